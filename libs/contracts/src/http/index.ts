// The REST API's response shapes, one module per route family.
export * from './common.js';
export * from './skills.js';
export * from './workspace.js';
export * from './cron.js';
export * from './channels.js';
export * from './providers.js';
