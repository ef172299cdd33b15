import { aiAgent } from './ai-agent.js';
import { aiLlm } from './ai-llm.js';
import { end } from './end.js';
import { flow } from './flow.js';
import { jsFilter } from './js-filter.js';
import { jsSwitch } from './js-switch.js';
import { jsTransform } from './js-transform.js';
import { log } from './log.js';
import { restApiCall } from './rest-api-call.js';
import type { NodeTypeDef } from './types.js';

export { defineNodeType, type NodeTypeDef } from './types.js';

/** Every node type the DSL accepts, by `type`. One line per type. */
export const nodeTypes: Readonly<Record<string, NodeTypeDef>> = Object.freeze(
  Object.fromEntries(
    [aiAgent, aiLlm, end, jsFilter, jsTransform, jsSwitch, restApiCall, log, flow].map((def) => [def.type, def]),
  ),
);
