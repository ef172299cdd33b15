export { startScheduler } from './service.js';
