import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { Errors } from '@agentry/errors';
import { PubSubChannels, QueueNames, RunKeeps, budgetCounter, type CompactionOutcomeMessage, type RunEvent } from '@agentry/contracts';
import { sql } from 'kysely';
import {
  appendMessages,
  claimRun,
  ensureSession,
  getCronJob,
  getRun,
  insertCronJob,
  insertCronRun,
  insertRuleChain,
  insertRun,
  listCronJobs,
  listCronRuns,
  listSessionMessages,
  markRunStreamed,
  upsertSeededUser,
  type JsonValue,
} from '@agentry/db';
import { type ModelCallRequest, type ModelEvent } from '@agentry/engine';
import { LocalClaims, cancelRun, enqueueRun, newRunId, submitRun } from '@agentry/runs';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, waitFor } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';

const FAILING_SCRIPTS = {
  'script-throws': "throw new Error('no temperature');",
  'script-loops': 'while (true) {}',
  // A new 1 MiB string a step: out of memory after some 32 steps, long before the 1 s deadline even on a loaded machine.
  'script-oom': "var a = []; var s = 'x'.repeat(1 << 20); while (true) { a.push(s + a.length); }",
  'script-circular': 'var o = {}; o.self = o; return o;',
  'script-syntax': 'return {msg: ;',
  'script-shape': "return 'not an object';",
};

describe('agent-worker', () => {
  let runtime: Runtime;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-worker-'));
  const calls: ModelCallRequest[] = [];
  const logs: string[] = [];
  async function* fakeStream(req: ModelCallRequest): AsyncIterable<ModelEvent> {
    calls.push(req);
    const lastMessage = req.messages.at(-1)!;
    const last = lastMessage.content;
    if (last === 'boom') throw Object.assign(new Error('x'), {});
    if (last === 'refused') throw new Errors.UPSTREAM('provider p: HTTP 401 invalid api key');
    if (last === 'slow') {
      yield { type: 'text', text: 'thinking' };
      // Until cancelled (10 s at most): only a cancel ends this answer.
      for (let i = 0; i < 200 && !req.signal.aborted; i++) await new Promise((r) => setTimeout(r, 50));
      throw req.signal.reason ?? new Error('not cancelled');
    }
    if (last === 'schedule it') {
      const args = { operation: 'create', name: 'hourly', schedule: '0 0 * * * *', message: 'report' };
      yield { type: 'tool_calls', calls: [{ id: 'c1', name: 'cron', arguments: JSON.stringify(args) }] };
      yield { type: 'done', finishReason: 'tool_calls', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } };
      return;
    }
    if (lastMessage.role === 'tool') {
      yield { type: 'text', text: 'scheduled' };
      yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } };
      return;
    }
    for (const word of ['echo: ', last]) {
      if (req.signal.aborted) throw req.signal.reason;
      yield { type: 'text', text: word };
    }
    yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } };
  }

  beforeAll(async () => {
    // Short checks and resume grace, so that the tests of the listener check and the sweep are quick.
    fs.writeFileSync(path.join(cwd, 'config.yaml'), 'worker: {stall_timeout_ms: 1000}\nreliability: {listener_check_ms: 100, run_sweep_ms: 500, resume_grace_ms: 1000}\n');
    runtime = await bootstrap({
      service: 'worker-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'worker-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: (line: string) => void logs.push(line) },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    const agent = (id: string, nodes: JsonValue[], connections: Array<[string, string, string]> = []) =>
      insertRuleChain(runtime.db.db, {
        id,
        kind: 'agent',
        agentId: null,
        name: id,
        category: null,
        dsl: { ruleChain: { id, name: id }, metadata: { nodes, connections: connections.map(([fromId, toId, type]) => ({ fromId, toId, type })) } },
      });
    const agentNode = { id: 'a', type: 'ai/agent', configuration: { provider: 'p' } };
    // Nodes after the agent: a transform that rewrites msg.data, then a log line showing it ran.
    await agent('post', [
      agentNode,
      { id: 'rewrite', type: 'jsTransform', configuration: { jsScript: "return {msg: 'REWRITTEN ' + msg};" } },
      { id: 'note', type: 'log', configuration: { jsScript: "return 'post-agent saw: ' + msg;" } },
    ], [['a', 'rewrite', 'Success'], ['rewrite', 'note', 'Success']]);
    await agent('post-fails', [
      agentNode,
      { id: 'explode', type: 'jsTransform', configuration: { jsScript: "throw new Error('post-node exploded');" } },
    ], [['a', 'explode', 'Success']]);
    // Scripts before the agent that fail in each way a script can (issue 20, finding 8).
    for (const [id, jsScript] of Object.entries(FAILING_SCRIPTS)) {
      await agent(id, [{ id: 't', type: 'jsTransform', configuration: { jsScript } }, agentNode], [['t', 'a', 'Success']]);
    }
    await agent('planner', [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p', tools: [{ type: 'builtin', name: 'cron' }] } }]);
    // The same, for the usage test (its cron job must not be the one the planner's test finds).
    await agent('usage-planner', [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p', tools: [{ type: 'builtin', name: 'cron' }] } }]);
    await insertRuleChain(runtime.db.db, {
      id: 'w',
      kind: 'agent',
      agentId: null,
      name: 'W',
      category: null,
      dsl: {
        ruleChain: { id: 'w', name: 'W' },
        metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p', systemPrompt: 'sys', params: { temperature: 0.5 } } }], connections: [] },
      },
    });
    await startAgentWorker(runtime, { stream: fakeStream, sessionPollMs: 20 });
  });
  afterAll(async () => {
    await runtime.lifecycle.shutdown('test');
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  async function run(content: string, opts: { sessionId?: string; agentId?: string; principal?: string; stream?: boolean; source?: 'api' | 'cron'; prepare?: (id: string) => Promise<void> } = {}) {
    const id = `r${Math.random().toString(36).slice(2)}`;
    const events: RunEvent[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.run(id), (e) => events.push(e));
    await insertRun(runtime.db.db, {
      id,
      agentId: opts.agentId ?? 'w',
      sessionId: opts.sessionId ?? null,
      source: opts.source ?? 'api',
      request: { messages: [{ role: 'user', content }], ...(opts.stream ? { stream: true } : {}) },
      ...(opts.principal !== undefined ? { principal: opts.principal } : {}),
    });
    await opts.prepare?.(id);
    await runtime.bus.queue.enqueue(QueueNames.agentRun, { type: 'agent-run', v: 1, runId: id });
    await waitFor(async () => events.some((e) => e.type === 'done' || e.type === 'error'), 5000, 10);
    await unsub();
    return { id, events };
  }

  it('publishes text events with a monotonic seq, then done, and stores the outcome', async () => {
    const { id, events } = await run('hi');
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2]);
    expect(events.map((e) => e.type)).toEqual(['text', 'text', 'done']);
    expect(events[2]).toMatchObject({ usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } });
    const stored = await getRun(runtime.db.db, id);
    expect(stored).toMatchObject({ status: 'succeeded', output: 'echo: hi', streamed: true, attempts: 1 });
    expect(calls.at(-1)).toMatchObject({ provider: 'p', params: { temperature: 0.5 }, messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi' }] });
  });

  it("counts each model call's tokens in agentry_tokens_total, by the run's agent (with metrics.agent_label), the provider that answered and kind", async () => {
    const tokens = async () => {
      const metric = await runtime.metrics.getSingleMetric('agentry_tokens_total')?.get();
      const of = (agent: string, kind: string) => metric?.values.find((v) => v.labels.agent === agent && v.labels.kind === kind && v.labels.provider === 'p')?.value ?? 0;
      return { w: [of('w', 'prompt'), of('w', 'completion')], post: [of('post', 'prompt'), of('post', 'completion')], none: [of('', 'prompt'), of('', 'completion')] };
    };
    const delta = (a: number[], b: number[]) => a.map((x, i) => x - b[i]!);
    const three = async () => {
      await run('hi');
      await run('hi', { agentId: 'post' });
      await run('hi', { agentId: 'post' });
    };
    // Default (metrics.agent_label false): agent ids are users' choice, so no series carries one.
    expect(runtime.config.current.metrics.agent_label).toBe(false);
    let before = await tokens();
    await three();
    let after = await tokens();
    expect({ w: delta(after.w, before.w), post: delta(after.post, before.post), none: delta(after.none, before.none) }).toEqual({ w: [0, 0], post: [0, 0], none: [3, 6] });
    // An operator who wants per-agent series turns the label on (read at every call: the live config).
    (runtime.config.current.metrics as { agent_label: boolean }).agent_label = true;
    try {
      before = await tokens();
      await three();
      after = await tokens();
      expect({ w: delta(after.w, before.w), post: delta(after.post, before.post), none: delta(after.none, before.none) }).toEqual({ w: [1, 2], post: [2, 4], none: [0, 0] });
    } finally {
      (runtime.config.current.metrics as { agent_label: boolean }).agent_label = false;
    }
  });

  it("records a run_usage row per model call, with the run's agent and principal, and adds the tokens to the principal's day budget", async () => {
    const principal = `api:usage-${Math.random().toString(36).slice(2)}`;
    const day = budgetCounter('tokensPerDay', principal);
    // Two model calls: the cron tool call (1 + 1 tokens), then the answer after the tool (1 + 1).
    const { id, events } = await run('schedule it', { agentId: 'usage-planner', principal });
    expect(events.at(-1)?.type).toBe('done');
    const rows = async () => runtime.db.db.selectFrom('run_usage').selectAll().where('run_id', '=', id).orderBy('id').execute();
    await waitFor(async () => (await rows()).length === 2, 5000, 20);
    expect((await rows()).map((r) => [r.agent_id, r.principal, r.provider, r.model, Number(r.prompt_tokens), Number(r.completion_tokens)])).toEqual([
      ['usage-planner', principal, 'p', 'm', 1, 1],
      ['usage-planner', principal, 'p', 'm', 1, 1],
    ]);
    await waitFor(async () => (await runtime.bus.count(day.key, 0, day.ttlMs)) === 4, 5000, 20);
    // A run nobody owns (a channel, cron) is recorded under '' and spends no budget.
    const anonymous = await run('hi');
    await waitFor(async () => (await runtime.db.db.selectFrom('run_usage').select('principal').where('run_id', '=', anonymous.id).execute()).length === 1, 5000, 20);
    expect((await runtime.db.db.selectFrom('run_usage').select('principal').where('run_id', '=', anonymous.id).executeTakeFirst())?.principal).toBe('');
  });

  it("does a forced compaction (session-compact job) with its own model client: recorded as kind compaction under the caller, counted on the caller's day, answered on the reply channel", async () => {
    const principal = `api:compact-${Math.random().toString(36).slice(2)}`;
    const day = budgetCounter('tokensPerDay', principal);
    const session = await ensureSession(runtime.db.db, { agentId: 'w', sessionKey: `compact-${principal}`, owner: principal });
    for (let i = 1; i <= 8; i++) await appendMessages(runtime.db.db, session.id, `run-c${i}`, [{ role: 'user', content: `turn ${i}` }, { role: 'assistant', content: `re: turn ${i}` }]);
    const usageRows = () => runtime.db.db.selectFrom('run_usage').selectAll().where('run_id', '=', `compaction:${session.id}`).execute();
    // Read the moment the answer arrives, as a caller would read its usage then.
    let rowsAtAnswer: ReturnType<typeof usageRows> | undefined;
    const compact = async (sessionId: string, opts: { listen?: boolean } = {}) => {
      const requestId = `req-${Math.random().toString(36).slice(2)}`;
      const outcomes: CompactionOutcomeMessage[] = [];
      const onOutcome = (m: CompactionOutcomeMessage) => {
        if (!('started' in m)) rowsAtAnswer ??= usageRows();
        outcomes.push(m);
      };
      const unsub = opts.listen === false ? async () => undefined : await runtime.bus.pubsub.subscribe(PubSubChannels.compaction(requestId), onOutcome);
      try {
        await runtime.bus.queue.enqueue(QueueNames.agentRun, { type: 'session-compact', v: 1, sessionId, principal, requestId });
        if (opts.listen === false) await waitFor(async () => logs.some((l) => l.includes(requestId)), 5000, 10);
        else await waitFor(async () => outcomes.length > 1, 5000, 10);
      } finally {
        await unsub();
      }
      if (opts.listen === false) return undefined;
      // The worker says it took the job first (the gateway's pickup bound ends there), then answers once.
      expect(outcomes[0]).toEqual({ started: true });
      expect(outcomes).toHaveLength(2);
      return outcomes[1];
    };

    const callsBefore = calls.length;
    const outcome = await compact(session.id);
    // The newest 10 messages are kept; the 6 before them are summarised (the fake echoes the transcript).
    expect(outcome).toEqual({ ok: true, compacted: 6, summary: expect.stringMatching(/^echo: /) });
    expect(calls.slice(callsBefore).map((c) => c.purpose)).toEqual(['compaction']);
    // Written before the answer: the caller may read its usage at once.
    const rows = (await rowsAtAnswer)!;
    expect(rows.map((r) => [r.agent_id, r.principal, r.kind, Number(r.prompt_tokens), Number(r.completion_tokens)])).toEqual([['w', principal, 'compaction', 1, 2]]);
    expect(await runtime.bus.count(day.key, 0, day.ttlMs)).toBe(3);
    expect((await listSessionMessages(runtime.db.db, session.id)).filter((m) => m.compactedAt)).toHaveLength(6);

    expect(await compact('no-such-session')).toEqual({ ok: false, code: 'NOT_FOUND', message: 'Not found: session "no-such-session"' });
    // Nobody waits any more (the gateway answered 503 and left): skipped, the model never asked.
    const callsThen = calls.length;
    await compact(session.id, { listen: false });
    expect(logs.some((l) => l.includes('nobody waits for it any more'))).toBe(true);
    expect(calls.length).toBe(callsThen);
  });

  it('fails for good, with a log line, a session-compact job of another version and a job of a kind it does not know', async () => {
    const queue = runtime.bus.queue as unknown as { enqueue(q: string, data: unknown): Promise<string> };
    await queue.enqueue(QueueNames.agentRun, { type: 'session-compact', v: 2, sessionId: 's', principal: '', requestId: 'r-v2' });
    await queue.enqueue(QueueNames.agentRun, { type: 'agent-retire', v: 1 });
    await waitFor(async () => logs.some((l) => l.includes('session-compact job of an unknown version')) && logs.some((l) => l.includes('a job of a kind this worker does not know')), 5000, 10);
    await waitFor(async () => logs.filter((l) => l.includes('agent-run job failed') && l.includes('"willRetry":false') && /malformed session-compact|unknown job kind/.test(l)).length === 2, 5000, 10);
  });

  it('a run whose usage cannot be written still succeeds, and the failure is logged', async () => {
    await sql`alter table run_usage rename to run_usage_away`.execute(runtime.db.db);
    try {
      const { id, events } = await run('hi');
      expect(events.at(-1)?.type).toBe('done');
      await waitFor(async () => (await getRun(runtime.db.db, id))?.status === 'succeeded', 5000, 20);
      await waitFor(async () => logs.some((l) => l.includes('model call usage not recorded') && l.includes(id)), 5000, 20);
    } finally {
      await sql`alter table run_usage_away rename to run_usage`.execute(runtime.db.db);
    }
  });

  it('keeps a failed turn in the session marked failed with its error, and never sends it to the model', async () => {
    const session = await ensureSession(runtime.db.db, { agentId: 'w', sessionKey: 'sess-1' });
    await run('first', { sessionId: session.id });
    await run('refused', { sessionId: session.id });
    const messages = await listSessionMessages(runtime.db.db, session.id);
    expect(messages.map((m) => [m.role, m.content, m.status, m.error])).toEqual([
      ['user', 'first', 'ok', null],
      ['assistant', 'echo: first', 'ok', null],
      ['user', 'refused', 'failed', 'Upstream failure: provider p: HTTP 401 invalid api key'],
      ['assistant', '', 'failed', 'Upstream failure: provider p: HTTP 401 invalid api key'],
    ]);
    // The next turn's context: the completed turn only.
    await run('second', { sessionId: session.id });
    expect(calls.at(-1)!.messages.map((m) => m.content)).toEqual(['sys', 'first', 'echo: first', 'second']);
  });

  it('keeps a stopped turn with what was streamed, marked stopped, once', async () => {
    const session = await ensureSession(runtime.db.db, { agentId: 'w', sessionKey: 'sess-stop' });
    const id = `r${Math.random().toString(36).slice(2)}`;
    const events: RunEvent[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.run(id), (e) => events.push(e));
    await insertRun(runtime.db.db, { id, agentId: 'w', sessionId: session.id, source: 'api', request: { messages: [{ role: 'user', content: 'slow' }] } });
    await runtime.bus.queue.enqueue(QueueNames.agentRun, { type: 'agent-run', v: 1, runId: id });
    await waitFor(async () => events.some((e) => e.type === 'text'), 5000, 10);
    // As the gateway does when its client stops: the row is marked first, then the worker told.
    await cancelRun({ db: runtime.db.db, pubsub: runtime.bus.pubsub }, id, 'the client went away');
    await waitFor(async () => (await listSessionMessages(runtime.db.db, session.id)).length > 0, 5000, 20);
    await unsub();
    const messages = await listSessionMessages(runtime.db.db, session.id);
    expect(messages.map((m) => [m.role, m.content, m.status])).toEqual([
      ['user', 'slow', 'stopped'],
      ['assistant', 'thinking', 'stopped'],
    ]);
    expect(messages[0]!.error).toBe('stopped before the answer was complete');
  });

  it("completes the cron_runs row of a cron run it ends (answer or error), with no scheduler following the run", async () => {
    const db = runtime.db.db;
    const job = await insertCronJob(db, { id: 'w_job', agentId: 'w', name: 'job', schedule: '0 0 0 1 1 *', message: 'x', timezone: 'UTC', disabled: false, deliver: null });
    const fire = (tick: string) => async (id: string) => void (await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date(tick), runId: id }));
    const ok = await run('cron hello', { source: 'cron', prepare: fire('2026-03-01T10:00:00Z') });
    const failed = await run('boom', { source: 'cron', prepare: fire('2026-03-01T10:01:00Z') });
    const rows = await waitFor(async () => {
      const { data } = await listCronRuns(db, job.id, { limit: 10, offset: 0 });
      return data.length === 2 && data.every((r) => r.status !== 'running') ? data : undefined;
    }, 5000, 20);
    expect(rows.find((r) => r.runId === ok.id)).toMatchObject({ status: 'succeeded', outputExcerpt: 'echo: cron hello', error: null, deliveryStatus: null });
    expect(rows.find((r) => r.runId === failed.id)).toMatchObject({ status: 'failed', error: 'the agent failed unexpectedly', deliveryStatus: null });
    expect(await getCronJob(db, job.id)).toMatchObject({ lastStatus: 'failed' });
  });

  it("reserves each model call on the principal's tokensPerDay: a cron run of a user whose day runs out stops at its next call with the budget's 429", async () => {
    const db = runtime.db.db;
    await upsertSeededUser(db, { username: 'carl', passwordHash: 'x', role: 'user', fileHmac: 'carl', budget: { tokensPerDay: 1 } });
    const job = await insertCronJob(db, { id: 'carl_job', agentId: 'usage-planner', owner: 'carl', name: 'job', schedule: '0 0 0 1 1 *', message: 'x', timezone: 'UTC', disabled: false, deliver: null });
    const day = budgetCounter('tokensPerDay', 'user:carl');
    const before = calls.length;
    // The first call starts (nothing spent yet) and costs 2; the one after the cron tool finds the day spent.
    const { id, events } = await run('schedule it', { agentId: 'usage-planner', source: 'cron', principal: 'user:carl', prepare: async (runId) => void (await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date('2026-03-01T10:00:00Z'), runId })) });
    expect(calls.length - before).toBe(1);
    const error = events.find((e) => e.type === 'error');
    expect(error).toMatchObject({ status: 429, message: expect.stringMatching(/^Too many requests: the tokensPerDay budget of user:carl \(1 tokens per day\) is spent; it resets at /) });
    expect(await getRun(db, id)).toMatchObject({ status: 'failed', principal: 'user:carl' });
    // The first call's reservation settled to what it cost; the refused one left nothing behind.
    expect(await runtime.bus.count(day.key, 0, day.ttlMs)).toBe(2);
  });

  it('turns a model failure into one error event and a failed run', async () => {
    const { id, events } = await run('boom');
    expect(events).toEqual([{ runId: id, seq: 0, type: 'error', message: 'the agent failed unexpectedly', status: 500 }]);
    expect((await getRun(runtime.db.db, id))?.status).toBe('failed');
  });

  it("keeps a provider's status and message when the agent runs as a chain of several nodes", async () => {
    const single = await run('refused');
    expect(single.events).toEqual([expect.objectContaining({ type: 'error', status: 502, message: expect.stringContaining('provider p: HTTP 401 invalid api key') })]);
    const chained = await run('refused', { agentId: 'post' });
    expect(chained.events).toEqual([expect.objectContaining({ type: 'error', status: 502, message: expect.stringContaining('provider p: HTTP 401 invalid api key') })]);
    expect((await getRun(runtime.db.db, chained.id))?.status).toBe('failed');
  });

  it('answers a failing script with 502 (422 when the script is broken whatever its input) and no stack in the log', { timeout: 60_000 }, async () => {
    const expected: Record<keyof typeof FAILING_SCRIPTS, [number, RegExp]> = {
      'script-throws': [502, /chain "script-throws", node "t" \(jsTransform\): Error: no temperature \(line 1\)/],
      'script-loops': [502, /script timed out after 1000 ms/],
      'script-oom': [502, /script ran out of memory/],
      'script-circular': [422, /the script returned a value that is not JSON/],
      'script-syntax': [422, /SyntaxError/],
      'script-shape': [422, /jsTransform: the script must return an object/],
    };
    for (const [agentId, [status, message]] of Object.entries(expected)) {
      const { id, events } = await run('hi', { agentId });
      expect(events, agentId).toEqual([{ runId: id, seq: 0, type: 'error', status, message: expect.stringMatching(message) }]);
      expect((await getRun(runtime.db.db, id))?.status).toBe('failed');
      const lines = logs.filter((l) => l.includes(id)).map((l) => JSON.parse(l) as { level: number; err?: unknown });
      expect(lines.some((l) => l.level >= 50), agentId).toBe(false);
      expect(JSON.stringify(lines), agentId).not.toContain('"stack"');
    }
  });

  it('fails a retried run that had already streamed instead of running it twice', async () => {
    const before = calls.length;
    const { id, events } = await run('again', {
      prepare: async (runId) => {
        await claimRun(runtime.db.db, runId);
        await markRunStreamed(runtime.db.db, runId);
      },
    });
    expect(events).toEqual([expect.objectContaining({ type: 'error', status: 503 })]);
    expect(calls.length).toBe(before);
    expect((await getRun(runtime.db.db, id))?.status).toBe('failed');
  });

  it("keeps only a re-run's own events for a resume: the first try's kept events are dropped when it starts again", async () => {
    const log = (runId: string) => RunKeeps.events(runId);
    const { id, events } = await run('again, streamed', {
      stream: true,
      prepare: async (runId) => {
        // The first try: claimed, one event kept, then its worker died before the run was marked streamed.
        await claimRun(runtime.db.db, runId);
        await runtime.bus.pubsub.publish(PubSubChannels.run('elsewhere'), { type: 'text', text: 'FIRST TRY ', runId, seq: 0 }, { log: log(runId), maxLen: 100, ttlMs: 60_000 });
      },
    });
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'text'],
      [1, 'text'],
      [2, 'done'],
    ]);
    expect(await runtime.bus.pubsub.kept(log(id))).toEqual(events);
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', attempts: 2, output: 'echo: again, streamed' });
  });

  it('delivers the ai/agent answer: nodes after it run, but their changes to msg.data touch neither the stream nor what is stored', async () => {
    const session = await ensureSession(runtime.db.db, { agentId: 'post', sessionKey: 'post-1' });
    const { id, events } = await run('hello', { agentId: 'post', sessionId: session.id });
    expect(events.map((e) => e.type)).toEqual(['text', 'text', 'done']);
    expect(events.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join('')).toBe('echo: hello');
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: 'echo: hello' });
    expect((await listSessionMessages(runtime.db.db, session.id)).map((m) => [m.role, m.content])).toEqual([
      ['user', 'hello'],
      ['assistant', 'echo: hello'],
    ]);
    // The nodes after the agent ran, with the answer in msg.data (after `done`: wait for them).
    await waitFor(async () => logs.some((l) => l.includes('post-agent saw: REWRITTEN echo: hello')), 5000, 10);
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: 'echo: hello' });
  });

  it('keeps a run succeeded when a node after the ai/agent node throws, and warns naming the run and node', async () => {
    const { id, events } = await run('hi', { agentId: 'post-fails' });
    expect(events.map((e) => e.type)).toEqual(['text', 'text', 'done']);
    const warning = await waitFor(async () => logs.find((l) => l.includes('a node after the ai/agent node failed')), 5000, 10);
    expect(JSON.parse(warning)).toMatchObject({ level: 40, runId: id, agentId: 'post-fails', chainId: 'post-fails', nodeId: 'explode', err: expect.stringMatching(/post-node exploded/) });
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: 'echo: hi' });
  });

  it('lets the cron tool announce its change on invalidate, so the scheduler need not wait for its reconcile', async () => {
    const invalidations: unknown[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => invalidations.push(m));
    try {
      const { id, events } = await run('schedule it', { agentId: 'planner' });
      expect(events.at(-1)?.type).toBe('done');
      expect((await getRun(runtime.db.db, id))?.output).toBe('scheduled');
      const [job] = await listCronJobs(runtime.db.db, { agentId: 'planner' });
      expect(job).toMatchObject({ name: 'hourly', schedule: '0 0 * * * *' });
      expect(invalidations).toEqual([{ area: 'cron', id: job!.id }]);
    } finally {
      await unsub();
    }
  });

  it('cancels a chat run once nobody listens on its channel (its gateway died), and only then', async () => {
    const id = `r${Math.random().toString(36).slice(2)}`;
    const events: RunEvent[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.run(id), (e) => events.push(e));
    await insertRun(runtime.db.db, { id, agentId: 'w', sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'slow' }] } });
    await runtime.bus.queue.enqueue(QueueNames.agentRun, { type: 'agent-run', v: 1, runId: id });
    await waitFor(async () => events.some((e) => e.type === 'text'), 5000, 10);
    // Listened to: several checks pass and the run goes on.
    await new Promise((r) => setTimeout(r, 500));
    expect((await getRun(runtime.db.db, id))?.status).toBe('running');
    await unsub();
    const gone = Date.now();
    await waitFor(async () => (await getRun(runtime.db.db, id))?.status === 'cancelled', 4000, 20);
    // Not before the resume grace: its client may be resuming on another gateway.
    expect(Date.now() - gone).toBeGreaterThanOrEqual(1000);
    expect(calls.at(-1)!.signal.aborted).toBe(true);
  });

  it('runs a chat run its insert claimed for this worker without claiming it again (its first attempt)', async () => {
    const id = newRunId();
    const events: RunEvent[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.run(id), (e) => events.push(e));
    try {
      const request = { messages: [{ role: 'user' as const, content: 'claimed at its insert' }] };
      await submitRun({ db: runtime.db.db, queue: runtime.bus.queue }, { agentId: 'w', source: 'api', request, runId: id, claimHere: true });
      await waitFor(async () => events.some((e) => e.type === 'done'), 5000, 10);
      // A claim from the row would have counted a second attempt.
      expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: 'echo: claimed at its insert', attempts: 1 });
      expect(LocalClaims.of(runtime.bus.queue).size).toBe(0);
    } finally {
      await unsub();
    }
  });

  it('does not run a chat run its insert claimed once it is cancelled before its job starts: the job claims from the row', async () => {
    const id = newRunId();
    const claims = LocalClaims.of(runtime.bus.queue);
    const before = calls.length;
    await insertRun(runtime.db.db, { id, agentId: 'w', sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'cancelled before its job' }] } }, { claimed: true });
    claims.hand((await getRun(runtime.db.db, id))!);
    await cancelRun({ db: runtime.db.db, pubsub: runtime.bus.pubsub }, id, 'the client went away');
    // The worker heard the cancel and forgot the handed row.
    await waitFor(async () => claims.size === 0, 5000, 5);
    await enqueueRun(runtime.bus.queue, id);
    // A job with an id is removed when it ends (not counted as completed): wait for the queue to empty.
    await waitFor(async () => {
      const n = await runtime.bus.queue.counts(QueueNames.agentRun);
      return n.waiting + n.active + n.delayed === 0;
    }, 5000, 10);
    expect(calls.slice(before).map((c) => c.messages.at(-1)?.content)).not.toContain('cancelled before its job');
    expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'cancelled', error: 'the client went away', output: null });
  });

  it('sweeps a run whose job was lost: enqueued again, it runs to its end', async () => {
    const id = `r${Math.random().toString(36).slice(2)}`;
    const events: RunEvent[] = [];
    const unsub = await runtime.bus.pubsub.subscribe(PubSubChannels.run(id), (e) => events.push(e));
    try {
      // A run committed long ago whose job never made it (or was lost with a Redis without AOF).
      await insertRun(runtime.db.db, { id, agentId: 'w', sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'lost job' }] } });
      await sql`update runs set created_at = now() - interval '1 hour' where id = ${id}`.execute(runtime.db.db);
      await waitFor(async () => events.some((e) => e.type === 'done'), 5000, 20);
      expect(await getRun(runtime.db.db, id)).toMatchObject({ status: 'succeeded', output: 'echo: lost job', attempts: 1 });
    } finally {
      await unsub();
    }
  });
});
