export * from './ports.js';
export { createRedisBus, type RedisBusOptions } from './redis/bus.js';
export { createMemoryBus, type MemoryBusOptions } from './memory/bus.js';
