export * from './submit.js';
export * from './watch.js';
export * from './schedule.js';
export * from './agent-cache.js';
export * from './cancel.js';
export * from './events/index.js';
export * from './create-cron-job.js';
