export * from './servers.js';
export * from './require-servers.js';
export * from './process.js';
export * from './postgres.js';
export * from './redis.js';
export * from './fake-model.js';
export * from './cluster.js';
