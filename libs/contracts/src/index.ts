export * from './queues.js';
export * from './events.js';
export * from './channels.js';
export * from './runs.js';
export * from './http/index.js';
export * from './budget.js';
export * from './audience.js';
export * from './trace-context.js';
