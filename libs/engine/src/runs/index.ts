export * from './submit.js';
export * from './watch.js';
export * from './schedule.js';
export * from './agent-cache.js';
export * from './create-cron-job.js';
