import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimRun, getRun, insertRuleChain, insertRun, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { runAgent, type ModelCallRequest, type ModelEvent, type RunDeps } from '../src/index.js';
import { fakeRunDeps } from './fake-run-deps.js';

/**
 * Issue 35, finding 2 and D: one depth bound and cycle check across chain tools, flow and
 * sub-agents, and caps on a run's model calls, tool calls and wall time (the cancel of a deep
 * run: agent-loop.test.ts).
 */

let handle: DbHandle;

const agentNode = (tools: JsonValue[]): JsonValue => ({ id: 'a', type: 'ai/agent', configuration: { provider: 'p', tools } });

async function store(id: string, nodes: JsonValue[]): Promise<void> {
  const dsl = { ruleChain: { id, name: id }, metadata: { nodes, connections: [] } };
  await insertRuleChain(handle.db, { id, kind: 'agent', agentId: null, name: id, category: null, dsl });
}

/** Calls its first tool (with a new argument each time, so the repeat guard stays out of it) until it sees an error result. */
async function* keepsCalling(req: ModelCallRequest): AsyncIterable<ModelEvent> {
  const last = req.messages.at(-1)!;
  const failed = last.role === 'tool' && last.content.startsWith('Error');
  if (req.tools?.length && !failed) {
    const name = (req.tools[0] as { function: { name: string } }).function.name;
    yield { type: 'tool_calls', calls: [{ id: `c${req.messages.length}`, name, arguments: JSON.stringify({ message: `m${req.messages.length}` }) }] };
    yield { type: 'done', finishReason: 'tool_calls', provider: 'p', model: 'm' };
    return;
  }
  yield { type: 'text', text: failed ? `stopped: ${last.content}` : 'done' };
  yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm' };
}

let runs = 0;
async function runOf(agentId: string, overrides: Partial<RunDeps> = {}) {
  const id = `run_bounds_${++runs}`;
  await insertRun(handle.db, { id, agentId, sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'go' }] } });
  const run = (await claimRun(handle.db, id))!;
  const { deps, record } = fakeRunDeps(handle.db, { stream: keepsCalling, ...overrides });
  await runAgent(deps, run, new AbortController().signal);
  return { record, stored: await getRun(handle.db, id) };
}

/** A tool that waits until its signal stops it, then fails with the signal's reason (what the model is told). */
function waitingTool() {
  let aborted = false;
  const wait = {
    name: 'wait',
    description: 'waits for its signal',
    parameters: { type: 'object' },
    run: (_a: Record<string, unknown>, ctx: { signal: AbortSignal }) =>
      new Promise<string>((_, reject) =>
        ctx.signal.addEventListener('abort', () => {
          aborted = true;
          reject(ctx.signal.reason as Error);
        }),
      ),
  };
  return { wait, aborted: () => aborted };
}

const bounds = (change: Partial<ReturnType<RunDeps['bounds']>>) => () => ({ maxCallDepth: 8, maxRunMs: 600_000, maxModelCalls: 200, maxToolCalls: 500, maxToolTimeoutMs: 600_000, ...change });

beforeAll(async () => {
  handle = await createTestPglite();
  // Finding 2: a rule-chain tool whose target is its own agent.
  await store('self', [agentNode([{ type: 'rulechain', name: 'again', targetId: 'self' }])]);
  // A ladder of twelve distinct agents, each calling the next through a chain tool.
  for (let i = 0; i < 12; i++) await store(`step${i}`, [agentNode(i < 11 ? [{ type: 'rulechain', name: 'next', targetId: `step${i + 1}` }] : [])]);
  // Sub-agents and chain tools count together: step agents reached as sub-agents too.
  for (let i = 0; i < 12; i++) await store(`sub${i}`, [agentNode(i < 11 ? [{ type: i % 2 ? 'agent' : 'rulechain', name: 'next', targetId: `sub${i + 1}` }] : [])]);
  await store('echoer', [agentNode([{ type: 'builtin', name: 'echo' }])]);
  await store('waiter', [agentNode([{ type: 'builtin', name: 'wait' }])]);
  // Finding 2: the user-set timeout (an hour here) was the only thing that stopped a run.
  await store('patient', [agentNode([{ type: 'builtin', name: 'wait', timeout: 3_600_000 }])]);
  // Slow on a loaded machine: PGlite starts in it.
}, 180_000);

afterAll(async () => {
  await handle?.close();
});

describe('the bounds of a run', () => {
  it('a chain tool that targets its own agent is refused as a cycle at once, not run 868 levels deep', async () => {
    const { record, stored } = await runOf('self');
    expect(stored?.status).toBe('succeeded');
    expect(stored?.output).toMatch(/already running in this run \(self -> self\)/);
    expect(record.calls.length).toBeLessThanOrEqual(3);
  });

  it.each(['step0', 'sub0'])('%s: nesting past worker.max_call_depth fails the run with a human error', async (agentId) => {
    const { record, stored } = await runOf(agentId);
    expect(stored?.status).toBe('failed');
    expect(stored?.error).toMatch(/nest at most 8 deep \(worker\.max_call_depth\)/);
    // The agent at depth 8 was the last to call its model.
    expect(record.calls.length).toBe(9);
  });

  it('the depth bound is configurable', async () => {
    const { stored } = await runOf('step0', { bounds: bounds({ maxCallDepth: 2 }) });
    expect(stored?.error).toMatch(/nest at most 2 deep/);
  });

  it('more model calls than worker.max_model_calls_per_run fail the run', async () => {
    const { record, stored } = await runOf('step0', { bounds: bounds({ maxModelCalls: 4 }) });
    expect(stored?.status).toBe('failed');
    expect(stored?.error).toBe('the run made more than 4 model calls (worker.max_model_calls_per_run) and was stopped');
    expect(record.calls.length).toBe(4);
  });

  it('more tool calls than worker.max_tool_calls_per_run fail the run', async () => {
    const calls: string[] = [];
    const echo = { name: 'echo', description: 'echo', parameters: { type: 'object' }, run: async (a: Record<string, unknown>) => (calls.push(String(a.message)), 'ok') };
    const { stored } = await runOf('echoer', { builtin: { echo }, bounds: bounds({ maxToolCalls: 3 }) });
    expect(stored?.status).toBe('failed');
    expect(stored?.error).toBe('the run made more than 3 tool calls (worker.max_tool_calls_per_run) and was stopped');
    expect(calls).toHaveLength(3);
  });

  it('a run past worker.max_run_ms fails, and the tool it was waiting on is aborted with it', async () => {
    const { wait, aborted } = waitingTool();
    const { stored } = await runOf('waiter', { builtin: { wait }, bounds: bounds({ maxRunMs: 1000 }) });
    expect(stored?.status).toBe('failed');
    expect(stored?.error).toBe('the run took longer than 1000 ms (worker.max_run_ms) and was stopped');
    expect(aborted()).toBe(true);
  });

  it("a tool's own timeout is cut to worker.max_tool_timeout_ms: a user-set hour does not hold the call", async () => {
    const { wait, aborted } = waitingTool();
    const { stored } = await runOf('patient', { builtin: { wait }, bounds: bounds({ maxToolTimeoutMs: 1000 }) });
    expect(aborted()).toBe(true);
    // The model is told, and the run goes on to its answer.
    expect(stored?.status).toBe('succeeded');
    expect(JSON.stringify(stored?.output)).toContain('wait timed out after 1000 ms');
  });
});
