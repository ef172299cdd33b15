import type { NodeExecutor } from '../types.js';
import { aiAgentExecutor } from './ai-agent.js';
import { aiLlmExecutor } from './ai-llm.js';
import { endExecutor } from './end.js';
import { flowExecutor } from './flow.js';
import { jsFilterExecutor } from './js-filter.js';
import { jsSwitchExecutor } from './js-switch.js';
import { jsTransformExecutor } from './js-transform.js';
import { logExecutor } from './log.js';
import { restApiCallExecutor } from './rest-api-call.js';

/**
 * What each node type of `src/nodes/` does when it runs, by the same `type`. A node type is
 * its schema (a file in `src/nodes/` plus a line in `nodeTypes`) and its executor (a file
 * here plus a line below); a test checks that both registries name the same types.
 */
export const nodeExecutors: Readonly<Record<string, NodeExecutor>> = Object.freeze(
  Object.fromEntries(
    [
      aiAgentExecutor,
      aiLlmExecutor,
      endExecutor,
      jsFilterExecutor,
      jsTransformExecutor,
      jsSwitchExecutor,
      restApiCallExecutor,
      logExecutor,
      flowExecutor,
    ].map((e) => [e.type, e]),
  ),
);
