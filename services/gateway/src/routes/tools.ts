import type { FastifyInstance } from 'fastify';
import { ToolForms, ToolList } from '@agentry/contracts';
import { toolForms, toolList } from '@agentry/definitions';
import type { GatewayDeps } from '../deps.js';
import { typed } from './common.js';

const ListTools = { response: { 200: ToolList } };
const GetForms = { response: { 200: ToolForms } };

/**
 * `GET /tools`: the built-in tools (`{name, description, parameters, optIn}`, parameters as JSON
 * schema). `GET /tools/forms`: what configuration forms are built from: every node type with the
 * schema of its `configuration`, every built-in tool with the schemas of its arguments and of its
 * per-agent `config`, the tool kinds and the shape of an `ai/agent` node's `tools[]` entry.
 */
export function toolRoutes(app: FastifyInstance, _deps: GatewayDeps): void {
  const api = typed(app);
  api.get('/tools', { config: { access: 'user' }, schema: ListTools }, listTools(toolList()));
  api.get('/tools/forms', { config: { access: 'user' }, schema: GetForms }, getToolForms(toolForms()));
}

/** Both answers are computed once: the registries they read are fixed at start. */
function listTools(list: ToolList) {
  return async function listTools(): Promise<ToolList> {
    return list;
  };
}

function getToolForms(forms: ToolForms) {
  return async function getToolForms(): Promise<ToolForms> {
    return forms;
  };
}
