import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimRun, finishRun, insertRun, type JsonValue } from '@agentry/db';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

const YAML = `
security:
  requireAuth: true
  jwtSecret: runs-test-jwt-secret-0123456789-abcdef
  users:
    admin: "admin-pass-1234"
    alice: "alice-pass-1234"
    bob: "bob-pass-1234"
models:
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", api_key: sk-x, models: [{name: m}]}
`;

let h: Harness;
const tokens: Record<'admin' | 'alice' | 'bob', string> = { admin: '', alice: '', bob: '' };
const STEPS: JsonValue[] = [
  { nodeId: 't', type: 'exprTransform', relations: ['Success'], ms: 1.5, debug: { chainId: 'runs_agent', in: { data: 'hi' }, out: { data: 'HI' } } },
  { nodeId: 'node_agent', type: 'ai/agent', relations: ['Success'], ms: 20 },
  // A node's error can quote the message it failed on (issue 35, finding 7).
  { nodeId: 'f', type: 'jsFilter', relations: ['Failure'], ms: 2, error: 'SyntaxError near "a secret question"' },
];

const get = (url: string, who: keyof typeof tokens) => h.app.inject({ method: 'GET', url: `/api/v1${url}`, headers: bearer(tokens[who]) });

beforeAll(async () => {
  h = await startHarness(YAML);
  for (const who of ['admin', 'alice', 'bob'] as const) tokens[who] = await login(h.app, who, `${who}-pass-1234`);
  const made = await h.app.inject({ method: 'POST', url: '/api/v1/agents', headers: bearer(tokens.alice), payload: agentDsl('runs_agent') });
  expect(made.statusCode).toBe(201);
  const db = h.runtime.db.db;
  const request = { messages: [{ role: 'user', content: 'a secret question' }] };
  await insertRun(db, { id: 'run_chain', agentId: 'runs_agent', sessionId: null, source: 'api', request, principal: 'user:alice' });
  await claimRun(db, 'run_chain');
  await finishRun(db, 'run_chain', { status: 'succeeded', output: 'a secret answer', steps: STEPS });
  // Runs of alice's agent asked by someone else: bob, an api account, a channel peer (nobody named).
  for (const [id, principal] of [['run_of_bob', 'user:bob'], ['run_of_account', 'api:acct1'], ['run_of_channel', '']] as const) {
    await insertRun(db, { id, agentId: 'runs_agent', sessionId: null, source: principal === '' ? 'chat_a' : 'api', request, principal });
    await claimRun(db, id);
    await finishRun(db, id, { status: 'succeeded', output: 'a secret answer', steps: STEPS });
  }
  await insertRun(db, { id: 'run_lone', agentId: 'runs_agent', sessionId: null, source: 'cron', request });
  await claimRun(db, 'run_lone');
  await finishRun(db, 'run_lone', { status: 'failed', error: 'the model failed' });
  await insertRun(db, { id: 'run_queued', agentId: 'runs_agent', sessionId: null, source: 'api', request });
});
afterAll(async () => {
  await h?.close();
});

describe('GET /agents/{agentId}/runs', () => {
  it("lists the owner's agent's runs newest first, without what was answered, and what was asked only of the caller's own runs", async () => {
    const res = await get('/agents/runs_agent/runs', 'alice');
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { data: Array<Record<string, unknown>>; total: number; page: number; size: number };
    expect(body).toMatchObject({ total: 6, page: 1, size: 20 });
    expect(body.data.map((r) => String(r.id)).filter((id) => !id.startsWith('run_of_'))).toEqual(['run_queued', 'run_lone', 'run_chain']);
    const [queued, lone, chain] = ['run_queued', 'run_lone', 'run_chain'].map((id) => body.data.find((r) => r.id === id));
    expect(chain).toMatchObject({ status: 'succeeded', source: 'api', hasSteps: true, error: null });
    expect(typeof chain!.durationMs).toBe('number');
    // Nobody is named in it (a cron fire from before jobs had owners): not alice's run, so its error is not hers to read.
    expect(lone).toMatchObject({ status: 'failed', source: 'cron', hasSteps: false, error: 'failed' });
    expect(queued).toMatchObject({ status: 'queued', finishedAt: null, durationMs: null, hasSteps: false });
    expect(Object.keys(chain!).sort()).toEqual(['createdAt', 'durationMs', 'error', 'finishedAt', 'firstWords', 'hasSteps', 'id', 'source', 'status']);
    // alice asked run_chain: she reads its first words; the others were asked by someone else.
    expect(chain!.firstWords).toBe('a secret question');
    for (const r of body.data.filter((x) => x.id !== 'run_chain')) expect(Object.keys(r), String(r.id)).not.toContain('firstWords');
    expect(res.body.split('secret').length - 1).toBe(1);
    expect(res.body).not.toContain('answer');
  });

  it("gives an admin every run's first words: the last user message, cut short; '' when there is none", async () => {
    const db = h.runtime.db.db;
    const long = `${'word '.repeat(40)}end`;
    const conversation = { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'the first turn' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: long }] };
    await insertRun(db, { id: 'run_long', agentId: 'runs_agent', sessionId: null, source: 'api', request: conversation, principal: 'user:bob' });
    await insertRun(db, { id: 'run_empty', agentId: 'runs_agent', sessionId: null, source: 'api', request: { messages: [{ role: 'system', content: 'only this' }] }, principal: 'user:bob' });
    try {
      const body = (await get('/agents/runs_agent/runs?size=100', 'admin')).json() as { data: Array<{ id: string; firstWords?: string }> };
      const words = Object.fromEntries(body.data.map((r) => [r.id, r.firstWords]));
      expect(words.run_long).toBe(long.slice(0, 120));
      expect(words.run_empty).toBe('');
      expect(words.run_of_bob).toBe('a secret question');
      expect(words.run_of_channel).toBe('a secret question');
    } finally {
      await db.deleteFrom('runs').where('id', 'in', ['run_long', 'run_empty']).execute();
    }
  });

  it("shows a failed run's error to its own principal and admins, and only \"failed\" to the owner of the agent when someone else asked it", async () => {
    const db = h.runtime.db.db;
    // The error of a run can quote what its principal sent (a node failing on the message).
    const others = [['fail_of_bob', 'user:bob', 'api'], ['fail_of_account', 'api:acct1', 'api'], ['fail_of_channel', 'channel:chat_a:acc:peer9', 'chat_a'], ['fail_of_nobody', '', 'chat_a']] as const;
    for (const [id, principal, source] of [...others, ['fail_of_alice', 'user:alice', 'cron'] as const]) {
      await insertRun(db, { id, agentId: 'runs_agent', sessionId: null, source, request: { messages: [{ role: 'user', content: 'x' }] }, principal });
      await claimRun(db, id);
      await finishRun(db, id, { status: 'failed', error: `jsFilter failed on "private words of ${id}"` });
    }
    try {
      const errors = async (who: keyof typeof tokens) => {
        const body = (await get('/agents/runs_agent/runs?size=100', who)).json() as { data: Array<{ id: string; error: string | null }> };
        return Object.fromEntries(body.data.map((r) => [r.id, r.error]));
      };
      const owner = await errors('alice');
      for (const [id] of others) expect(owner[id], id).toBe('failed');
      // Her own run (a fire of a cron job of hers) keeps its text; a run without an error stays null.
      expect(owner.fail_of_alice).toBe('jsFilter failed on "private words of fail_of_alice"');
      expect(owner.run_of_bob).toBeNull();
      const admin = await errors('admin');
      for (const [id] of others) expect(admin[id], id).toBe(`jsFilter failed on "private words of ${id}"`);
    } finally {
      await db.deleteFrom('runs').where('id', 'in', [...others.map(([id]) => id), 'fail_of_alice']).execute();
    }
  });

  it('pages', async () => {
    const res = await get('/agents/runs_agent/runs?page=3&size=2', 'alice');
    expect(res.json()).toMatchObject({ total: 6, page: 3, size: 2 });
    expect((res.json() as { data: unknown[] }).data).toHaveLength(2);
    expect((await get('/agents/runs_agent/runs?size=500', 'alice')).statusCode).toBe(400);
  });

  it("is the owner's and the admin's: another user is refused, an unknown agent is a 404", async () => {
    expect((await get('/agents/runs_agent/runs', 'admin')).json()).toMatchObject({ total: 6 });
    const bob = await get('/agents/runs_agent/runs', 'bob');
    expect(bob.statusCode).toBe(403);
    expect(bob.body).not.toContain('run_chain');
    const unknown = await get('/agents/nobody_here/runs', 'admin');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: expect.stringContaining('nobody_here') });
  });
});

describe('GET /runs/{runId}/steps', () => {
  it('gives the owner the recorded steps, debug messages included', async () => {
    const res = await get('/runs/run_chain/steps', 'alice');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ runId: 'run_chain', agentId: 'runs_agent', status: 'succeeded', recorded: true, redacted: false, steps: STEPS });
  });

  it('a run that did not run as a chain has none', async () => {
    expect((await get('/runs/run_lone/steps', 'alice')).json()).toEqual({ runId: 'run_lone', agentId: 'runs_agent', status: 'failed', recorded: false, redacted: true, steps: [] });
  });

  it('the admin sees them; another user gets the 404 an unknown run gets', async () => {
    expect((await get('/runs/run_chain/steps', 'admin')).json()).toMatchObject({ recorded: true, redacted: false, steps: STEPS });
    const bob = await get('/runs/run_chain/steps', 'bob');
    const unknown = await get('/runs/run_nope/steps', 'bob');
    expect(bob.statusCode).toBe(404);
    expect(unknown.statusCode).toBe(404);
    expect(bob.json()).toEqual({ error: expect.stringContaining('run_chain') });
    expect(bob.body).not.toContain('exprTransform');
  });

  it("shows the agent's owner another principal's run without its message contents (debugMode in/out); admins see them", async () => {
    for (const id of ['run_of_bob', 'run_of_account', 'run_of_channel']) {
      const res = await get(`/runs/${id}/steps`, 'alice');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json(), id).toEqual({
        runId: id,
        agentId: 'runs_agent',
        status: 'succeeded',
        recorded: true,
        redacted: true,
        steps: [
          { nodeId: 't', type: 'exprTransform', relations: ['Success'], ms: 1.5, debug: { chainId: 'runs_agent', redacted: true } },
          { nodeId: 'node_agent', type: 'ai/agent', relations: ['Success'], ms: 20 },
          { nodeId: 'f', type: 'jsFilter', relations: ['Failure'], ms: 2, error: 'failed' },
        ],
      });
      expect(res.body, id).not.toContain('a secret question');
      expect(res.body, id).not.toContain('"hi"');
      expect(res.body, id).not.toContain('HI');
      expect((await get(`/runs/${id}/steps`, 'admin')).json(), id).toMatchObject({ redacted: false, steps: STEPS });
    }
  });

  it("keeps a refused tool's words for the agent's owner on another principal's run: they name her configuration, not the message", async () => {
    const db = h.runtime.db.db;
    const refused = { nodeId: '', type: 'tool refused', relations: [], ms: 0, error: 'tool "bash" of agent "runs_agent" was left out: the bash tool runs commands on the worker, so only an admin\'s definition may use it' };
    await insertRun(db, { id: 'run_refused', agentId: 'runs_agent', sessionId: null, source: 'api', request: { messages: [{ role: 'user', content: 'x' }] }, principal: 'user:bob' });
    await claimRun(db, 'run_refused');
    await finishRun(db, 'run_refused', { status: 'succeeded', output: 'ok', steps: [refused, { nodeId: 'f', type: 'jsFilter', relations: ['Failure'], ms: 2, error: 'SyntaxError near "x"' }] });
    try {
      const steps = ((await get('/runs/run_refused/steps', 'alice')).json() as { redacted: boolean; steps: Array<{ type: string; error?: string }> });
      expect(steps.redacted).toBe(true);
      expect(steps.steps.map((s) => s.error)).toEqual([refused.error, 'failed']);
    } finally {
      await db.deleteFrom('runs').where('id', '=', 'run_refused').execute();
    }
  });
});
