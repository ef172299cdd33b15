export { startAgentWorker, type AgentWorkerOptions } from './service.js';
export { buildConversation, agentNode, runAgent } from './run-agent.js';
export { RunEventPublisher } from '@agentry/engine';
