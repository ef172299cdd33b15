export * from './ports.js';
export { createMemoryBus, type MemoryBusOptions } from './memory/bus.js';
// The Redis bus is `@agentry/bus/redis`: embedded mode never loads BullMQ and ioredis (~24 MB of RSS).
