import { aiAgent } from './ai-agent.js';
import { aiLlm } from './ai-llm.js';
import { comment } from './comment.js';
import { delay } from './delay.js';
import { end } from './end.js';
import { exprFilter } from './expr-filter.js';
import { exprTransform } from './expr-transform.js';
import { fieldFilter } from './field-filter.js';
import { flow } from './flow.js';
import { fork } from './fork.js';
import { groupFilter } from './group-filter.js';
import { jsFilter } from './js-filter.js';
import { jsSwitch } from './js-switch.js';
import { jsTransform } from './js-transform.js';
import { join } from './join.js';
import { log } from './log.js';
import { metadataTransform } from './metadata-transform.js';
import { msgTypeSwitch } from './msg-type-switch.js';
import { restApiCall } from './rest-api-call.js';
import { exprSwitch } from './switch.js';
import type { NodeType } from './types.js';

export { defineNodeType, type NodeType, type NodeTypeDef } from './types.js';

/**
 * Every node type, one line each: what the DSL accepts (`validateRuleChain`), what
 * `GET /tools/forms` lists, and what the chain runner executes.
 */
const NODE_TYPES: readonly NodeType[] = [
  aiAgent,
  aiLlm,
  end,
  jsFilter,
  jsTransform,
  jsSwitch,
  restApiCall,
  log,
  flow,
  msgTypeSwitch,
  fork,
  join,
  delay,
  groupFilter,
  exprFilter,
  exprTransform,
  exprSwitch,
  fieldFilter,
  metadataTransform,
  comment,
];

/**
 * The node types by `type`. No prototype: a DSL's `type` is user input, and `toString` or
 * `constructor` must be an unknown type, not Object's own.
 */
export const nodeTypes: Readonly<Record<string, NodeType>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, NodeType>, Object.fromEntries(NODE_TYPES.map((def) => [def.type, def]))),
);
