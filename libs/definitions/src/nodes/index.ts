import { aiAgentSpec } from './ai-agent.js';
import { aiLlmSpec } from './ai-llm.js';
import { commentSpec } from './comment.js';
import { delaySpec } from './delay.js';
import { endSpec } from './end.js';
import { exprFilterSpec } from './expr-filter.js';
import { exprTransformSpec } from './expr-transform.js';
import { fieldFilterSpec } from './field-filter.js';
import { flowSpec } from './flow.js';
import { forkSpec } from './fork.js';
import { groupFilterSpec } from './group-filter.js';
import { jsFilterSpec } from './js-filter.js';
import { jsSwitchSpec } from './js-switch.js';
import { jsTransformSpec } from './js-transform.js';
import { joinSpec } from './join.js';
import { logSpec } from './log.js';
import { metadataTransformSpec } from './metadata-transform.js';
import { msgTypeSwitchSpec } from './msg-type-switch.js';
import { restApiCallSpec } from './rest-api-call.js';
import { exprSwitchSpec } from './switch.js';
import type { NodeSpec } from './types.js';

export { defineNodeSpec, type NodeSpec } from './types.js';
export { MAX_DELAY_MS } from './delay.js';
export { aiAgentSpec, aiLlmSpec, commentSpec, delaySpec, endSpec, exprFilterSpec, exprSwitchSpec, exprTransformSpec, fieldFilterSpec, flowSpec, forkSpec, groupFilterSpec, joinSpec, jsFilterSpec, jsSwitchSpec, jsTransformSpec, logSpec, metadataTransformSpec, msgTypeSwitchSpec, restApiCallSpec };

/**
 * Every node type, one line each: what the DSL accepts (`validateRuleChain`) and what
 * `GET /tools/forms` lists. The engine's `nodeTypes` implements each of them, no more.
 */
const NODE_SPECS: readonly NodeSpec[] = [
  aiAgentSpec,
  aiLlmSpec,
  endSpec,
  jsFilterSpec,
  jsTransformSpec,
  jsSwitchSpec,
  restApiCallSpec,
  logSpec,
  flowSpec,
  msgTypeSwitchSpec,
  forkSpec,
  joinSpec,
  delaySpec,
  groupFilterSpec,
  exprFilterSpec,
  exprTransformSpec,
  exprSwitchSpec,
  fieldFilterSpec,
  metadataTransformSpec,
  commentSpec,
];

/**
 * The node specs by `type`. No prototype: a DSL's `type` is user input, and `toString` or
 * `constructor` must be an unknown type, not Object's own.
 */
export const nodeSpecs: Readonly<Record<string, NodeSpec>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, NodeSpec>, Object.fromEntries(NODE_SPECS.map((def) => [def.type, def]))),
);
