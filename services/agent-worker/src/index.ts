export { startAgentWorker } from './service.js';
