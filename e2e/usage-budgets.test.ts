import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { budgetCounter } from '@agentry/contracts';
import { startFakeTelegram, waitFor } from '@agentry/testing';
import { agentDsl, inProcessStack } from './harness.js';
import { openaiErrorMessage } from './openai-error.js';

/**
 * Usage and budgets through the whole embedded stack (requireAuth on, an in-process worker, the
 * fake model): who sees what, requests per minute and tokens per day answered with 429,
 * Retry-After and the reset time, budgets from the configuration file and from the API. The
 * report's grouping and windows are services/gateway/test/usage.test.ts; two gateways sharing
 * the Redis counts are e2e/usage-cluster.test.ts.
 */

const METERED_KEY = 'metered-key-0123456789abcdef';
const OPEN_KEY = 'unmetered-key-0123456789abcdef';
const ERIN_KEY = 'erin-key-0123456789abcdefghij';

describe('usage and budgets through chat (embedded)', () => {
  const stack = inProcessStack({
    name: 'usage-budgets',
    // The object form of an entry, with a budget (the string form cannot carry one).
    users: { admin: 'admin-pass-word-1', dave: 'dave-pass-word-1', erin: { password: 'erin-pass-word-1', api_key: ERIN_KEY, budget: { requestsPerMinute: 1 } } },
    // erin's one request a minute is the test's to spend.
    login: ['admin', 'dave'],
    security: ['  budgets: {channelPeerTokensPerDay: 20, channelAccountTokensPerDay: 1000}'],
    config: ['channels:', '  api:', '    accounts:', `      metered: {api_key: "${METERED_KEY}", budget: {tokensPerDay: 20}}`, `      unmetered: {api_key: "${OPEN_KEY}"}`],
  });
  const { call, tokens } = stack;
  const chat = (token: string, content = 'hi') => call('POST', '/chat/completions', token, { model: 'meter', messages: [{ role: 'user', content }] });

  beforeAll(() => stack.create(tokens.admin, agentDsl('meter')));

  const usage = async (token: string, query: string) => {
    const res = await call('GET', `/usage?${query}`, token);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { data: Array<{ key: string; promptTokens: number; completionTokens: number; requests: number }> }).data;
  };

  it("records each chat's tokens under its principal; a user sees only their own, an admin everyone's", async () => {
    stack.fake.script({ text: 'one', usage: { prompt_tokens: 4, completion_tokens: 2 } }, { text: 'two', usage: { prompt_tokens: 3, completion_tokens: 1 } });
    expect((await chat(tokens.dave)).statusCode).toBe(200);
    expect((await chat(OPEN_KEY)).statusCode).toBe(200);
    await waitFor(async () => (await usage(tokens.admin, 'groupBy=principal')).length === 2, 5000, 20);
    expect((await usage(tokens.admin, 'groupBy=principal')).map((r) => [r.key, r.promptTokens, r.completionTokens, r.requests])).toEqual([
      ['api:unmetered', 3, 1, 1],
      ['user:dave', 4, 2, 1],
    ]);
    expect((await usage(tokens.dave, 'groupBy=principal')).map((r) => r.key)).toEqual(['user:dave']);
    expect((await usage(tokens.dave, 'groupBy=agent')).map((r) => [r.key, r.requests])).toEqual([['meter', 1]]);
    const other = await call('GET', '/usage?principal=user:admin', tokens.dave);
    expect(other.statusCode).toBe(403);
    // An api key is for chat: the report is for logged-in users.
    expect((await call('GET', '/usage', OPEN_KEY)).statusCode).toBe(401);
  });

  it('requests per minute: over the budget set through PUT /users, chat and responses answer 429 with Retry-After and the reset', async () => {
    const put = await call('PUT', '/users/dave', tokens.admin, { budget: { requestsPerMinute: 2 } });
    expect(put.statusCode, put.body).toBe(200);
    expect((put.json() as { budget: unknown }).budget).toEqual({ requestsPerMinute: 2 });
    // Starts well inside a minute, so that the three requests share one window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    const minute = budgetCounter('requestsPerMinute', 'user:dave');
    const codes: number[] = [];
    let refused: LightMyRequestResponse | undefined;
    for (let i = 0; i < 3; i++) {
      const res = await chat(tokens.dave);
      codes.push(res.statusCode);
      if (res.statusCode === 429) refused = res;
    }
    expect(codes).toEqual([200, 200, 429]);
    const error = openaiErrorMessage(refused!.json());
    expect(error).toContain('requestsPerMinute budget of user:dave (2 requests per minute) is spent');
    expect(error).toContain(`resets at ${minute.resetsAt.toISOString()}`);
    const retryAfter = Number(refused!.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const responses = await call('POST', '/responses', tokens.dave, { model: 'meter', input: 'hi' });
    expect(responses.statusCode).toBe(429);
    expect(openaiErrorMessage(responses.json())).toContain('requestsPerMinute');
    // Another principal is not affected, and removing the budget lifts it at once.
    expect((await chat(OPEN_KEY)).statusCode).toBe(200);
    expect((await call('PUT', '/users/dave', tokens.admin, { budget: null })).statusCode).toBe(200);
    await waitFor(async () => (await chat(tokens.dave)).statusCode === 200, 3000, 50);
  });

  it("a user's budget from the configuration file applies to their API key and their JWT alike, and shows in GET /users", async () => {
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    expect((await chat(ERIN_KEY)).statusCode).toBe(200);
    const refused = await chat(ERIN_KEY);
    expect(refused.statusCode).toBe(429);
    expect(openaiErrorMessage(refused.json())).toContain('requestsPerMinute budget of user:erin (1 request per minute) is spent');
    const login = await call('POST', '/auth/login', undefined, { username: 'erin', password: 'erin-pass-word-1' });
    expect((await chat((login.json() as { token: string }).token)).statusCode).toBe(429);
    const users = (await call('GET', '/users', tokens.admin)).json() as { users: Array<{ username: string; budget?: unknown }> };
    expect(users.users.find((u) => u.username === 'erin')?.budget).toEqual({ requestsPerMinute: 1 });
  });

  it('tokens per day: the file-configured account is refused once a run has spent its day', async () => {
    const day = budgetCounter('tokensPerDay', 'api:metered');
    stack.fake.script({ text: 'costly', usage: { prompt_tokens: 15, completion_tokens: 10 } });
    expect((await chat(METERED_KEY)).statusCode).toBe(200);
    // The worker adds the run's tokens once its model call is done.
    await waitFor(async () => (await stack.runtime.bus.count(day.key, 0, day.ttlMs)) >= 25, 5000, 20);
    const refused = await chat(METERED_KEY);
    expect(refused.statusCode).toBe(429);
    const error = openaiErrorMessage(refused.json());
    expect(error).toContain('tokensPerDay budget of api:metered (20 tokens per day) is spent');
    expect(error).toContain(`resets at ${day.resetsAt.toISOString()}`);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(86_400);
  });

  it('each channel peer spends its own security.budgets.channelPeerTokensPerDay, and all of an account together its channelAccountTokensPerDay: past either, runs fail naming the budget; other peers go on (issue 35)', async () => {
    const tg = await startFakeTelegram();
    try {
      const made = await call('POST', '/channels/chat_d/accounts', tokens.admin, { id: 'tg', dm_policy: 'allow', group_policy: 'disabled', ...tg.account, binding: { agentId: 'meter' } });
      expect(made.statusCode, made.body).toBe(201);
      let seq = 0;
      const dm = async (sender: string, text: string) => {
        const { headers, body } = tg.inbound({ eventId: `peer${++seq}`, chatId: sender, chatType: 'dm', senderId: sender, text });
        const res = await stack.app.inject({ method: 'POST', url: '/api/v1/channels/chat_d/accounts/tg/events', headers, payload: body });
        expect(res.statusCode, res.body).toBe(200);
        let run: { status: string; principal: string; error: string | null } | undefined;
        await waitFor(
          async () => {
            const rows = await stack.runtime.db.db.selectFrom('runs').select(['status', 'principal', 'error', 'request']).where('source', '=', 'chat_d').execute();
            run = rows.find((r) => JSON.stringify(r.request).includes(text) && (r.status === 'succeeded' || r.status === 'failed'));
            return run !== undefined;
          },
          20_000,
          50,
        );
        return run!;
      };
      stack.fake.script({ text: 'costly', usage: { prompt_tokens: 15, completion_tokens: 10 } });
      expect(await dm('7007', 'first question')).toMatchObject({ status: 'succeeded', principal: 'channel:chat_d:tg:7007' });
      const day = budgetCounter('tokensPerDay', 'channel:chat_d:tg:7007');
      expect(await stack.runtime.bus.count(day.key, 0, day.ttlMs)).toBe(25);
      const spent = await dm('7007', 'second question');
      expect(spent.status).toBe('failed');
      expect(spent.error).toContain('the tokensPerDay budget of channel:chat_d:tg:7007 (20 tokens per day) is spent');
      // The budget is each peer's: another sender on the same account is answered.
      expect(await dm('8008', 'another peer')).toMatchObject({ status: 'succeeded', principal: 'channel:chat_d:tg:8008' });
      // The account's day holds all its senders together: counted with each call, and once it is
      // spent (here by many senders before), a sender who spent nothing is refused too, and told so in the chat.
      const account = budgetCounter('tokensPerDay', 'channel-account:chat_d:tg');
      const together = await stack.runtime.bus.count(account.key, 0, account.ttlMs);
      expect(together).toBeGreaterThan(25);
      await stack.runtime.bus.count(account.key, 1000 - together, account.ttlMs);
      const flooded = await dm('9009', 'a new sender');
      expect(flooded.status).toBe('failed');
      expect(flooded.error).toMatch(/chat_d account "tg" has spent its tokens for today across all its senders \(security\.budgets\.channelAccountTokensPerDay: 1000 tokens per day\); it resets at /);
      const notice = await stack.runtime.db.db.selectFrom('outbound_messages').select(['payload']).where('chat_id', '=', '9009').executeTakeFirst();
      expect(JSON.stringify(notice?.payload)).toContain('Sorry, I could not answer that: Too many requests: chat_d account \\"tg\\" has spent its tokens for today');
    } finally {
      await tg.close();
    }
  });

  it('PUT /channels/api/accounts/{id} sets, shows and removes a budget; a bad one is 400', async () => {
    const bad = await call('PUT', '/channels/api/accounts/unmetered', tokens.admin, { budget: { tokensPerDay: -1 } });
    expect(bad.statusCode).toBe(400);
    const put = await call('PUT', '/channels/api/accounts/unmetered', tokens.admin, { budget: { requestsPerMinute: 1 } });
    expect(put.statusCode, put.body).toBe(200);
    expect((put.json() as { budget: unknown }).budget).toEqual({ requestsPerMinute: 1 });
    await waitFor(async () => (await chat(OPEN_KEY)).statusCode === 429, 3000, 50);
    const cleared = await call('PUT', '/channels/api/accounts/unmetered', tokens.admin, { budget: null });
    expect((cleared.json() as { budget?: unknown }).budget).toBeUndefined();
    await waitFor(async () => (await chat(OPEN_KEY)).statusCode === 200, 3000, 50);
  });
});
