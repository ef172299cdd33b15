import type { FastifyInstance } from 'fastify';
import { AgentTemplate } from '@agentry/contracts';
import { agentTemplate, defaultWorkspaceFiles } from '@agentry/definitions';
import type { GatewayDeps } from '../deps.js';
import { serializeAsWritten } from './chain-support.js';
import { typed } from './common.js';

const GetTemplate = { response: { 200: AgentTemplate } };

/**
 * GET /agent-template: a complete, valid agent DSL (one `ai/agent` node on the default
 * provider with the default built-in tools as `tools: [{type: 'builtin', name}]` and a system
 * prompt that includes AGENTS.md, then `end`), ready to POST to /agents once given an id and
 * name, plus the files its workspace is seeded with (`workspaceFiles`, ignored by POST /agents).
 */
export function agentTemplateRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  typed(app).get('/agent-template', { config: { access: 'user' }, serializerCompiler: serializeAsWritten, schema: GetTemplate }, getAgentTemplate(deps));
}

function getAgentTemplate(deps: GatewayDeps) {
  return async function getAgentTemplate(): Promise<AgentTemplate> {
    const dsl = agentTemplate({ defaultProvider: deps.config.current.models.default_provider });
    return { ...dsl, workspaceFiles: defaultWorkspaceFiles(dsl) };
  };
}
