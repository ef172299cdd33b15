import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimRun, getRun, getRunSteps, insertRuleChain, insertRun, type DbHandle, type JsonValue } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { runAgent, type ChainTraceEntry } from '../src/index.js';
import { boundSteps, MAX_DEBUG_CHARS, MAX_RUN_STEPS } from '../src/runs/execute/run-steps.js';
import { fakeRunDeps } from './fake-run-deps.js';

let handle: DbHandle;

const ai = (id: string): JsonValue => ({ id, type: 'ai/agent', configuration: { provider: 'p', systemPrompt: 'Hi' } });
const expr = (id: string, e: string, debugMode = false): JsonValue => ({ id, type: 'exprTransform', configuration: { expr: e }, ...(debugMode ? { debugMode } : {}) });

async function agent(id: string, nodes: JsonValue[], connections: Array<[string, string]>, debugMode = false): Promise<void> {
  const dsl = { ruleChain: { id, name: id, debugMode }, metadata: { nodes, connections: connections.map(([fromId, toId]) => ({ fromId, toId, type: 'Success' })) } };
  await insertRuleChain(handle.db, { id, kind: 'agent', agentId: null, name: id, category: null, dsl });
}

beforeAll(async () => {
  handle = await createTestPglite();
  await agent('before', [expr('t', '"rewritten"', true), ai('a')], [['t', 'a']]);
  await agent('after', [ai('a'), expr('t', '"changed"')], [['a', 't']], true);
  // A private address is refused by the outbound policy: the node fails at run time, offline.
  await agent('broken', [expr('t', '"first"'), { id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'http://127.0.0.1:9/x' } }, ai('a')], [['t', 'call'], ['call', 'a']]);
  await agent('lone', [ai('a')], []);
  await agent('unloadable', [expr('t', 'nosuchfunction(1)'), ai('a')], [['t', 'a']]);
});
afterAll(async () => {
  await handle?.close();
});

let runs = 0;
async function stepsOf(agentId: string) {
  const id = `run_steps_${++runs}`;
  await insertRun(handle.db, { id, agentId, sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'hi' }] } });
  const { deps } = fakeRunDeps(handle.db);
  await runAgent(deps, (await claimRun(handle.db, id))!, new AbortController().signal);
  const run = await getRun(handle.db, id);
  return { run, steps: (await getRunSteps(handle.db, id))?.steps as Array<Record<string, unknown>> | null };
}

describe("a run's steps (runs.steps)", () => {
  it('a chain that answers: each node with its relation and time, debugMode with what it got and passed on', async () => {
    const { run, steps } = await stepsOf('before');
    expect(run?.status).toBe('succeeded');
    expect(steps?.map((s) => [s.nodeId, s.type, s.relations])).toEqual([
      ['t', 'exprTransform', ['Success']],
      ['a', 'ai/agent', ['Success']],
    ]);
    for (const s of steps!) expect(typeof s.ms).toBe('number');
    const debug = steps![0]!.debug as { in: { data: string }; out: { data: string } };
    expect(debug.in.data).toBe('hi');
    expect(debug.out.data).toBe('rewritten');
    expect(steps![1]!.debug).toBeUndefined();
  });

  it('nodes after the answering agent are stored once the chain ends (chain-wide debugMode)', async () => {
    const { run, steps } = await stepsOf('after');
    expect(run?.status).toBe('succeeded');
    expect(steps?.map((s) => [s.nodeId, s.relations])).toEqual([
      ['a', ['Success']],
      ['t', ['Success']],
    ]);
    expect((steps![1]!.debug as { out: { data: string } }).out.data).toBe('changed');
    expect((steps![0]!.debug as { out: { data: string } }).out.data).toBe('ok');
  });

  it('a failed chain keeps its steps up to the failing node, with the error', async () => {
    const { run, steps } = await stepsOf('broken');
    expect(run?.status, run?.error ?? '').toBe('failed');
    expect(steps?.map((s) => [s.nodeId, s.relations]), run?.error ?? '').toEqual([
      ['t', ['Success']],
      ['call', ['Failure']],
    ]);
    expect(String(steps![1]!.error)).toMatch(/127\.0\.0\.1|private|not allowed|refused/i);
  });

  it('a chain that does not load ran no node: failed, no steps', async () => {
    const { run, steps } = await stepsOf('unloadable');
    expect(run?.status).toBe('failed');
    expect(run?.error).toMatch(/does not load/);
    expect(steps).toBeNull();
  });

  it('a lone ai/agent node is not a chain: no steps', async () => {
    const { run, steps } = await stepsOf('lone');
    expect(run?.status).toBe('succeeded');
    expect(steps).toBeNull();
  });
});

describe('boundSteps', () => {
  const entry = (i: number, data = 'x'): ChainTraceEntry => ({
    nodeId: `n${i}`,
    type: 'exprTransform',
    relations: ['Success'],
    ms: 1.23456,
    debug: { chainId: 'c', in: { id: 'm', type: '', data, metadata: {} }, out: { id: 'm', type: '', data: 'small', metadata: {} } },
  });

  it(`keeps ${MAX_RUN_STEPS} steps and says how many more there were`, () => {
    const steps = boundSteps(Array.from({ length: MAX_RUN_STEPS + 100 }, (_, i) => entry(i)));
    expect(steps).toHaveLength(MAX_RUN_STEPS + 1);
    expect(steps.at(-1)).toMatchObject({ type: 'truncated', error: '100 more steps were not recorded' });
    expect((steps[0] as { ms: number }).ms).toBe(1.23);
  });

  it('cuts a debug message over the limit, with a marker, and leaves a small one as it was', () => {
    const [step] = boundSteps([entry(0, 'y'.repeat(MAX_DEBUG_CHARS * 2))]) as Array<{ debug: { in: Record<string, unknown>; out: Record<string, unknown> } }>;
    expect(step!.debug.in.truncated).toBe(true);
    expect((step!.debug.in.preview as string).length).toBe(MAX_DEBUG_CHARS);
    expect(step!.debug.in.chars as number).toBeGreaterThan(MAX_DEBUG_CHARS * 2);
    expect(step!.debug.out.data).toBe('small');
    expect(JSON.stringify(step).length).toBeLessThan(MAX_DEBUG_CHARS + 2000);
  });
});
