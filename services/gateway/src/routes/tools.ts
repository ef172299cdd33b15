import type { FastifyInstance } from 'fastify';
import { toolForms, toolList } from '@agentry/engine';
import type { GatewayDeps } from '../deps.js';

/**
 * `GET /tools`: the built-in tools (`{name, description, parameters, optIn}`, parameters as JSON
 * schema). `GET /tools/forms`: what configuration forms are built from: every node type with the
 * schema of its `configuration`, every built-in tool with the schemas of its arguments and of its
 * per-agent `config`, the tool kinds and the shape of an `ai/agent` node's `tools[]` entry.
 */
export function toolRoutes(app: FastifyInstance, _deps: GatewayDeps): void {
  const forms = toolForms();
  const list = toolList();
  app.get('/tools', { config: { access: 'user' } }, async () => list);
  app.get('/tools/forms', { config: { access: 'user' } }, async () => forms);
}
