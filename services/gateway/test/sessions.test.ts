import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { appendMessages, ensureSession, type DbHandle } from '@agentry/db';
import { createTestDatabase, createTestPglite, describeWithPostgres, type TestDatabase } from '@agentry/testing';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { agentDsl } from './resources-harness.js';

/**
 * Sessions as the spec's clients name them: by the `sessionId` of their chat requests (a key
 * per principal), cleared with `{agentId, sessionKey, channel, scope}`; a caller reaches only
 * its own sessions, admins all.
 */

const ADMIN_PASSWORD = 'Adm1n-pass-word';
const YAML = `
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
  const call = (method: 'GET' | 'POST', url: string, who: string, payload?: object): Promise<LightMyRequestResponse> =>
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

  beforeAll(async () => {
    h = await startHarness(YAML, { db: await open() });
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

  it('POST /sessions/{id}/compact: only the owner (or an admin) reaches the session; a model that cannot answer is a 502 that marks nothing', async () => {
    const id = await conversation('user:carol', 'long-chat', 'turn 1');
    for (let i = 2; i <= 6; i++) await appendMessages(h.runtime.db.db, id, `run-${i}`, [{ role: 'user', content: `turn ${i}` }, { role: 'assistant', content: `re: turn ${i}` }]);
    const theirs = await call('POST', `/sessions/${id}/compact`, 'dave');
    expect(theirs.statusCode).toBe(404);
    expect(theirs.json()).toEqual({ error: `Not found: session "${id}"` });
    // Nothing older than the 10 kept messages of a 2-message session: no model call needed.
    const small = await conversation('user:carol', 'short-chat', 'hi');
    const nothing = await call('POST', `/sessions/${small}/compact`, 'carol');
    expect(nothing.statusCode).toBe(200);
    expect(nothing.json()).toEqual({ compacted: 0, summary: null });
    // p1 points at a closed port: the summary call fails, the session stays as it was.
    const failed = await call('POST', `/sessions/${id}/compact`, 'carol');
    expect(failed.statusCode).toBe(502);
    expect(failed.json()).toEqual({ error: expect.stringContaining('could not summarise') });
    const messages = await call('GET', `/sessions/${id}/messages`, 'admin');
    expect(messages.json()).toHaveLength(12);
    expect(messages.json().filter((m: { compactedAt?: string }) => m.compactedAt)).toEqual([]);
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
