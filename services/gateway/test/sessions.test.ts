import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { PubSubChannels, QueueNames, type CompactionOutcomeMessage, type SessionCompactJob } from '@agentry/contracts';
import { appendMessages, appendUnfinishedTurn, ensureSession, loadHistory, type DbHandle } from '@agentry/db';
import { createTestDatabase, createTestPglite, describeWithPostgres, type TestDatabase } from '@agentry/testing';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

/**
 * Sessions as the spec's clients name them: by the `sessionId` of their chat requests (a key
 * per principal), cleared with `{agentId, sessionKey, channel, scope}`; a caller reaches only
 * its own sessions, admins all.
 */

const ADMIN_PASSWORD = 'Adm1n-pass-word';
// worker.max_run_ms: how long a forced compaction waits for a worker (its least, for the 503 test).
const YAML = `
worker:
  max_run_ms: 1000
security:
  requireAuth: true
  users:
    admin: "${ADMIN_PASSWORD}"
models:
  default_provider: p1
  providers:
    p1: {name: One, base_url: "http://127.0.0.1:1/v1", models: [{name: m1, alias: default}]}
`;

function suite(open: () => Promise<DbHandle>, close: () => Promise<void>): void {
  let h: Harness;
  const tokens: Record<string, string> = {};
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, who: string, payload?: object): Promise<LightMyRequestResponse> =>
    h.app.inject({ method, url: `/api/v1${url}`, headers: bearer(tokens[who]!), ...(payload ? { payload } : {}) });

  /** A stored conversation of one turn, as a chat request with `sessionId: key` leaves it. */
  async function conversation(owner: string, key: string, text: string, opts: { agentId?: string; channel?: string; scope?: string } = {}): Promise<string> {
    const db = h.runtime.db.db;
    const s = await ensureSession(db, { agentId: opts.agentId ?? 'helper', sessionKey: key, owner, channel: opts.channel ?? 'api', ...(opts.scope ? { scope: opts.scope } : {}) });
    await appendMessages(db, s.id, `run-${key}-${owner}`, [
      { role: 'user', content: text },
      { role: 'assistant', content: `re: ${text}` },
    ]);
    return s.id;
  }

  /**
   * A stand-in for the agent worker (the gateway has none): it says it took each forced
   * compaction (except a session's in `workerBusy`), answers it with the outcome set for its
   * session, and never answers for a session without one.
   */
  const compactJobs: SessionCompactJob[] = [];
  const workerAnswers = new Map<string, CompactionOutcomeMessage>();
  const workerBusy = new Set<string>();

  beforeAll(async () => {
    h = await startHarness(YAML, { db: await open() });
    h.runtime.bus.queue.consume(
      QueueNames.agentRun,
      async (job) => {
        if (job.data.type !== 'session-compact') throw new Error(`not a compaction: ${job.data.type}`);
        compactJobs.push(job.data);
        if (workerBusy.has(job.data.sessionId)) return;
        await h.runtime.bus.pubsub.publish(PubSubChannels.compaction(job.data.requestId), { started: true });
        const answer = workerAnswers.get(job.data.sessionId);
        if (answer) await h.runtime.bus.pubsub.publish(PubSubChannels.compaction(job.data.requestId), answer);
      },
      { concurrency: 2 },
    );
    tokens.admin = await login(h.app, 'admin', ADMIN_PASSWORD);
    for (const name of ['carol', 'dave']) {
      const res = await call('POST', '/users', 'admin', { username: name, password: `${name}-pass-word`, role: 'user' });
      if (res.statusCode !== 201) throw new Error(`creating ${name}: ${res.statusCode} ${res.body}`);
      tokens[name] = await login(h.app, name, `${name}-pass-word`);
    }
    const agent = await call('POST', '/agents', 'admin', agentDsl('helper'));
    if (agent.statusCode !== 201) throw new Error(`creating the agent: ${agent.statusCode} ${agent.body}`);
  });
  afterAll(async () => {
    await h?.close();
    await close();
  });

  it("POST /sessions/{id}/compact: only the owner (or an admin) reaches the session; a worker compacts it and its answer (or its 502) is the caller's", async () => {
    const id = await conversation('user:carol', 'long-chat', 'turn 1');
    const theirs = await call('POST', `/sessions/${id}/compact`, 'dave');
    expect(theirs.statusCode).toBe(404);
    expect(theirs.json()).toEqual({ error: `Not found: session "${id}"` });
    // Refused before any worker is asked.
    expect(compactJobs).toEqual([]);

    const small = await conversation('user:carol', 'short-chat', 'hi');
    workerAnswers.set(small, { ok: true, compacted: 0, summary: null });
    const nothing = await call('POST', `/sessions/${small}/compact`, 'carol');
    expect(nothing.statusCode).toBe(200);
    expect(nothing.json()).toEqual({ compacted: 0, summary: null });
    // Ids only, the caller as the principal who pays: never a secret in a job.
    expect(compactJobs).toEqual([{ type: 'session-compact', v: 1, sessionId: small, principal: 'user:carol', requestId: expect.any(String) }]);

    workerAnswers.set(id, { ok: false, code: 'UPSTREAM', message: 'Upstream failure: the model could not summarise the session: connect ECONNREFUSED' });
    const failed = await call('POST', `/sessions/${id}/compact`, 'carol');
    expect(failed.statusCode).toBe(502);
    expect(failed.json()).toEqual({ error: expect.stringContaining('could not summarise') });
    workerAnswers.set(id, { ok: true, compacted: 4, summary: 'SUMMARY' });
    const byAdmin = await call('POST', `/sessions/${id}/compact`, 'admin');
    expect(byAdmin.json()).toEqual({ compacted: 4, summary: 'SUMMARY' });
    expect(compactJobs.at(-1)).toMatchObject({ sessionId: id, principal: 'user:admin' });
    // Each request waits on its own reply channel: none is left subscribed.
    expect(new Set(compactJobs.map((j) => j.requestId)).size).toBe(compactJobs.length);
    expect(await h.runtime.bus.pubsub.listeners(compactJobs.map((j) => PubSubChannels.compaction(j.requestId)))).toEqual(compactJobs.map(() => 0));
  });

  it("POST /sessions/{id}/compact: the worker's budget refusal is a 429 with Retry-After", async () => {
    const id = await conversation('user:carol', 'spent-chat', 'hello');
    workerAnswers.set(id, { ok: false, code: 'RATE_LIMITED', message: 'Too many requests: the tokensPerDay budget of user:carol (10 tokens per day) is spent' });
    const refused = await call('POST', `/sessions/${id}/compact`, 'carol');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ error: expect.stringContaining('tokensPerDay budget of user:carol') });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('POST /sessions/{id}/compact: no worker answering within worker.max_run_ms is a clean 503', async () => {
    const id = await conversation('user:carol', 'unanswered-chat', 'hello');
    const res = await call('POST', `/sessions/${id}/compact`, 'carol');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'Service not ready: no agent worker compacted the session within 1 s; try again later' });
    const job = compactJobs.find((j) => j.sessionId === id)!;
    // The gateway stopped waiting: a worker that picks the job up late sees nobody listening and skips it.
    expect(await h.runtime.bus.pubsub.listeners([PubSubChannels.compaction(job.requestId)])).toEqual([0]);
  });

  it('POST /sessions/{id}/compact: no worker taking the job is a 503 at the pickup bound, saying so', async () => {
    const id = await conversation('user:carol', 'busy-chat', 'hello');
    workerBusy.add(id);
    const res = await call('POST', `/sessions/${id}/compact`, 'carol');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'Service not ready: no agent worker was free to compact the session within 1 s; try again later' });
  });

  it('GET /sessions/-/messages?agentId=&sessionKey= reads the caller\'s session by the key it chats with', async () => {
    await conversation('user:carol', 'team-chat', 'carol asks');
    await conversation('user:dave', 'team-chat', 'dave asks');

    const mine = await call('GET', '/sessions/-/messages?agentId=helper&sessionKey=team-chat', 'carol');
    expect(mine.statusCode).toBe(200);
    expect(mine.json().map((m: { content: string }) => m.content)).toEqual(['carol asks', 're: carol asks']);
    // Same key, another principal: dave's own conversation, never carol's.
    const his = await call('GET', '/sessions/-/messages?agentId=helper&sessionKey=team-chat', 'dave');
    expect(his.json().map((m: { content: string }) => m.content)).toEqual(['dave asks', 're: dave asks']);
    // A user cannot reach another's session by naming its owner.
    const sneaky = await call('GET', '/sessions/-/messages?agentId=helper&sessionKey=team-chat&owner=user:dave', 'carol');
    expect(sneaky.json()[0].content).toBe('carol asks');
    // An admin names whose session it means.
    const admin = await call('GET', '/sessions/-/messages?agentId=helper&sessionKey=team-chat&owner=user:dave', 'admin');
    expect(admin.json()[0].content).toBe('dave asks');

    const unknown = await call('GET', '/sessions/-/messages?agentId=helper&sessionKey=nope', 'carol');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'Not found: session "nope" of agent "helper"' });
    const missing = await call('GET', '/sessions/-/messages?agentId=helper', 'carol');
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toBe('Invalid input: sessionKey is required to name a session by its key (session id "-")');
    const mixed = await call('GET', '/sessions/some-id/messages?agentId=helper&sessionKey=team-chat', 'carol');
    expect(mixed.statusCode).toBe(400);
  });

  it("POST /sessions/clear with the spec's body clears the API session whatever scope the client sends; {} clears only the caller's", async () => {
    const carols = await conversation('user:carol', 'to-clear', 'forget me');
    const daves = await conversation('user:dave', 'to-clear', 'keep me');
    const carolsOther = await conversation('user:carol', 'other', 'also mine');
    const count = async (id: string) => ((await call('GET', `/sessions/${id}/messages`, 'admin')).json() as unknown[]).length;

    const cleared = await call('POST', '/sessions/clear', 'carol', { agentId: 'helper', sessionKey: 'to-clear', channel: 'api', scope: 'per_peer' });
    expect(cleared.json()).toEqual({ success: true, message: 'cleared 1 session' });
    expect(await count(carols)).toBe(0);
    expect(await count(daves)).toBe(2);
    expect(await count(carolsOther)).toBe(2);

    // A channel session keeps its scope: another scope does not match it.
    const channelChat = await conversation('', 'dm:42', 'from the platform', { channel: 'chat_d', scope: 'main' });
    const other = await call('POST', '/sessions/clear', 'admin', { agentId: 'helper', sessionKey: 'dm:42', channel: 'chat_d', scope: 'per_peer' });
    expect(other.json().message).toBe('cleared 0 sessions');
    expect(await count(channelChat)).toBe(2);

    expect((await call('POST', '/sessions/clear', 'carol', {})).statusCode).toBe(200);
    expect(await count(carolsOther)).toBe(0);
    expect(await count(daves)).toBe(2);
    expect(await count(channelChat)).toBe(2);
  });
  it('GET /sessions/{id}/messages shows a failed turn with its status and error; the model history skips it', async () => {
    const id = await conversation('user:carol', 'with-failure', 'works');
    const db = h.runtime.db.db;
    await appendUnfinishedTurn(db, id, 'run-failed', {
      status: 'failed',
      error: 'Upstream failure: HTTP 500',
      messages: [
        { role: 'user', content: 'breaks' },
        { role: 'assistant', content: 'partial' },
      ],
    });
    // Once per run: a second writer adds nothing.
    expect(await appendUnfinishedTurn(db, id, 'run-failed', { status: 'stopped', error: 'x', messages: [{ role: 'user', content: 'again' }] })).toBe(false);
    // A session deleted while its turn ran keeps nothing (and the worker does not fail on it).
    expect(await appendUnfinishedTurn(db, 'no-such-session', 'run-gone', { status: 'stopped', error: 'x', messages: [{ role: 'user', content: 'q' }] })).toBe(false);
    const res = await call('GET', `/sessions/${id}/messages`, 'carol');
    expect(res.json().map((m: { content: string; status?: string; error?: string }) => [m.content, m.status, m.error])).toEqual([
      ['works', undefined, undefined],
      ['re: works', undefined, undefined],
      ['breaks', 'failed', 'Upstream failure: HTTP 500'],
      ['partial', 'failed', 'Upstream failure: HTTP 500'],
    ]);
    expect((await loadHistory(db, id, 50)).map((m) => m.content)).toEqual(['works', 're: works']);
  });

  it('GET /sessions counts turns without tool messages, leaves out empty sessions with nonEmpty, and searches titles', async () => {
    const db = h.runtime.db.db;
    expect((await call('POST', '/agents', 'admin', agentDsl('counted'))).statusCode).toBe(201);
    const s = await ensureSession(db, { agentId: 'counted', sessionKey: 'tools', owner: 'user:dave' });
    await appendMessages(db, s.id, 'run-tools', [
      { role: 'user', content: 'What time is it in Paris?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'time', arguments: '{}' } }] },
      { role: 'tool', content: '12:00', toolCallId: 'c1' },
      { role: 'assistant', content: 'Noon.' },
    ]);
    await ensureSession(db, { agentId: 'counted', sessionKey: 'empty', owner: 'user:dave' });
    const all = (await call('GET', '/sessions?agentId=counted', 'dave')).json();
    expect(all.total).toBe(2);
    const listed = (await call('GET', '/sessions?agentId=counted&nonEmpty=true', 'dave')).json();
    expect(listed.data.map((x: { sessionKey: string; messageCount: number; turnCount: number }) => [x.sessionKey, x.messageCount, x.turnCount])).toEqual([['tools', 4, 2]]);
    expect(listed.total).toBe(1);
    expect((await call('GET', '/sessions?agentId=counted&search=PARIS', 'dave')).json().data.map((x: { sessionKey: string }) => x.sessionKey)).toEqual(['tools']);
    expect((await call('GET', '/sessions?agentId=counted&search=100%25', 'dave')).json().total).toBe(0);
  });

  it('PATCH /sessions/{id} renames and DELETE /sessions/{id} deletes, only for the session\'s owner (or an admin)', async () => {
    const id = await conversation('user:carol', 'to-rename', 'hello there');
    const renamed = await call('PATCH', `/sessions/${id}`, 'carol', { title: '  Trip plans  ' });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ id, title: 'Trip plans', turnCount: 2 });
    expect((await call('PATCH', `/sessions/${id}`, 'carol', { title: '   ' })).json()).toEqual({ error: 'Invalid input: title: must not be blank' });
    expect((await call('PATCH', `/sessions/${id}`, 'carol', { title: 'x', owner: 'y' })).statusCode).toBe(400);
    // Another user's session answers as a missing one, for both verbs.
    expect((await call('PATCH', `/sessions/${id}`, 'dave', { title: 'mine now' })).json()).toEqual({ error: `Not found: session "${id}"` });
    expect((await call('DELETE', `/sessions/${id}`, 'dave')).statusCode).toBe(404);
    const deleted = await call('DELETE', `/sessions/${id}`, 'carol');
    expect(deleted.json()).toEqual({ success: true, message: 'deleted session "Trip plans"' });
    expect((await call('GET', `/sessions/${id}/messages`, 'carol')).statusCode).toBe(404);
    expect((await call('DELETE', `/sessions/${id}`, 'carol')).statusCode).toBe(404);
    const daves = await conversation('user:dave', 'admin-deletes', 'bye');
    expect((await call('DELETE', `/sessions/${daves}`, 'admin')).statusCode).toBe(200);
  });
}

describe('sessions by key and clear (embedded, PGlite)', () => {
  let handle: DbHandle | undefined;
  suite(
    async () => (handle = await createTestPglite()),
    async () => {
      await handle?.close();
    },
  );
});

describeWithPostgres('sessions by key and clear (Postgres)', () => {
  let test: TestDatabase | undefined;
  suite(
    async () => {
      test = await createTestDatabase();
      return test.handle;
    },
    async () => {
      await test?.drop();
    },
  );
});
