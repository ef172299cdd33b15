// The REST API's response shapes, one module per route family.
export * from './common.js';
export * from './skills.js';
export * from './workspace.js';
export * from './cron.js';
export * from './channels.js';
export * from './providers.js';
export * from './agents.js';
export * from './sessions.js';
export * from './users.js';
export * from './auth.js';
export * from './config.js';
export * from './tools.js';
export * from './probes.js';
export * from './chat.js';
export * from './responses.js';
export * from './usage.js';
export * from './runs.js';
