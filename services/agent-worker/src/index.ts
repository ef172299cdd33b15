export { startAgentWorker, type AgentWorkerOptions } from './service.js';
