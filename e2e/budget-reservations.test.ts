import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { budgetCounter } from '@agentry/contracts';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, waitFor, type FakeModel, type FakeRequest } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { buildGateway, seedGateway } from '@agentry/gateway';
import { openaiErrorMessage } from './openai-error.js';

/**
 * Token budgets reserve before each model call and settle after it (issue 35 F), through the
 * whole embedded stack (the worker's model client is the one cluster mode runs too). Before,
 * the gateway's one check at the request's start let 20 parallel requests of a principal with a
 * small `tokensPerDay` all through, and each of their model calls spent; a forced compaction
 * called the model outside any budget and left no usage.
 */

const PASSWORDS = { admin: 'admin-pass-word-1', pat: 'pat-pass-word-1', quinn: 'quinn-pass-word-1' };
const PAT_KEY = 'pat-key-0123456789abcdefghijkl';
/** pat's day: a few model calls. */
const PAT_LIMIT = 40;
/** What every model call of the fake costs (prompt + completion), as it reports it. */
const CALL_TOKENS = 10;
/** Model calls in one of the `looper` agent's runs: two tool rounds, then the answer. */
const CALLS_PER_RUN = 3;
const PARALLEL = 20;

const isSummaryCall = (r: FakeRequest) => String(r.body.messages[0]?.content ?? '').startsWith('You compact a conversation');
const toolResults = (r: FakeRequest) => r.body.messages.filter((m) => m.role === 'tool').length;

describe('token budgets: reserved before each model call, settled after (embedded)', { timeout: 120_000 }, () => {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-budget-'));
  let runtime: Runtime;
  let app: FastifyInstance;
  let fake: FakeModel;
  const tokens = { admin: '', quinn: '' };

  const call = (method: InjectOptions['method'], url: string, token: string, payload?: unknown): Promise<LightMyRequestResponse> =>
    app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
  const usage = async (token: string, query: string) => {
    const res = await call('GET', `/usage?${query}`, token);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { data: Array<{ key: string; totalTokens: number; requests: number }> }).data;
  };
  const counter = (principal: string) => {
    const day = budgetCounter('tokensPerDay', principal);
    return runtime.bus.count(day.key, 0, day.ttlMs);
  };

  beforeAll(async () => {
    fake = await startFakeModel({
      // Every call costs CALL_TOKENS and takes a moment, so that parallel runs overlap. A looper
      // call asks for a tool (there is none by that name: the loop answers with an error and asks
      // the model again) until two results came back; a summary call summarises.
      defaultReply: (r) => {
        const cost = { delayMs: 30, usage: { prompt_tokens: 6, completion_tokens: CALL_TOKENS - 6 } };
        if (isSummaryCall(r)) return { ...cost, text: 'SUMMARY: the user said hello a few times.' };
        if (r.body.messages.some((m) => String(m.content ?? '').startsWith('loop')) && toolResults(r) < CALLS_PER_RUN - 1) {
          return { ...cost, toolCalls: [{ name: 'nothing_here', arguments: JSON.stringify({ round: toolResults(r) }) }] };
        }
        return { ...cost, text: 'done' };
      },
    });
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        'security:',
        '  requireAuth: true',
        '  users:',
        `    admin: "${PASSWORDS.admin}"`,
        `    pat: {password: "${PASSWORDS.pat}", api_key: "${PAT_KEY}", budget: {tokensPerDay: ${PAT_LIMIT}}}`,
        `    quinn: {password: "${PASSWORDS.quinn}", budget: {tokensPerDay: 100000}}`,
      ].join('\n'),
    );
    runtime = await bootstrap({
      service: 'budget-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'budget-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: () => {} },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    await startAgentWorker(runtime);
    await seedGateway(runtime);
    app = await buildGateway(runtime);
    await app.ready();
    runtime.health.markStarted();
    for (const user of Object.keys(tokens) as Array<keyof typeof tokens>) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username: user, password: PASSWORDS[user] } });
      tokens[user] = (res.json() as { token: string }).token;
    }
    const agent = (id: string, configuration: Record<string, unknown>) => ({
      ruleChain: { id, name: id },
      metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', ...configuration } }], connections: [] },
    });
    expect((await call('POST', '/agents', tokens.admin, agent('looper', {}))).statusCode).toBe(201);
    expect((await call('POST', '/agents', tokens.admin, agent('summed', { compaction: { keepRecentCount: 2, minMessagesToCompact: 100 } }))).statusCode).toBe(201);
  }, 300_000);

  afterAll(async () => {
    await app?.close();
    await runtime?.lifecycle.shutdown('test');
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it(`${PARALLEL} parallel chats of a user with a small tokensPerDay spend at most the limit and one model call each`, async () => {
    const chats = Array.from({ length: PARALLEL }, () =>
      call('POST', '/chat/completions', PAT_KEY, { model: 'looper', messages: [{ role: 'user', content: 'loop please' }] }),
    );
    const answers = await Promise.all(chats);
    const codes = answers.map((r) => r.statusCode);
    // Some went through, the others were refused with the budget's words, never a 500.
    expect(codes.filter((c) => c === 200).length).toBeGreaterThan(0);
    expect(codes.every((c) => c === 200 || c === 429), String(codes)).toBe(true);
    const refused = answers.filter((r) => r.statusCode === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect(openaiErrorMessage(r.json())).toContain(`tokensPerDay budget of user:pat (${PAT_LIMIT} tokens per day) is spent`);
    // Every call the model answered is recorded under pat (the rows are written a moment later).
    const answered = () => fake.requests.filter((r) => r.completed).length;
    await waitFor(async () => ((await usage(tokens.admin, 'groupBy=principal')).find((u) => u.key === 'user:pat')?.requests ?? 0) === answered(), 5000, 20);
    const spent = (await usage(tokens.admin, 'groupBy=principal')).find((u) => u.key === 'user:pat')!.totalTokens;
    expect(spent).toBe(answered() * CALL_TOKENS);
    // Before, every run made all its calls: PARALLEL * CALLS_PER_RUN * CALL_TOKENS = 600 tokens.
    expect(spent).toBeLessThanOrEqual(PAT_LIMIT + PARALLEL * CALL_TOKENS);
    // ... and as the fake's calls cost less than their reservation, no more than one call over.
    expect(spent).toBeLessThanOrEqual(PAT_LIMIT + CALL_TOKENS);
    // Every reservation was settled or given back: the day's counter is exactly what was spent.
    expect(await counter('user:pat')).toBe(spent);
  });

  it('a forced compaction is budgeted and shows in usage as kind compaction under the caller; refused (429) once the day is spent', async () => {
    const chat = (content: string) => call('POST', '/chat/completions', tokens.quinn, { model: 'summed', sessionId: 'talk', messages: [{ role: 'user', content }] });
    for (const content of ['hello', 'hello again', 'and once more']) expect((await chat(content)).statusCode).toBe(200);
    const list = (await call('GET', '/sessions?agentId=summed', tokens.quinn)).json() as { data: Array<{ id: string; sessionKey: string }> };
    const session = list.data.find((s) => s.sessionKey === 'talk')!.id;
    await waitFor(async () => ((await usage(tokens.quinn, 'groupBy=kind')).find((u) => u.key === 'chat')?.requests ?? 0) === 3, 5000, 20);
    const before = await counter('user:quinn');

    const compacted = await call('POST', `/sessions/${session}/compact`, tokens.quinn);
    expect(compacted.statusCode, compacted.body).toBe(200);
    expect((compacted.json() as { summary: string }).summary).toContain('SUMMARY');
    const byKind = await usage(tokens.quinn, 'groupBy=kind');
    expect(byKind.map((u) => [u.key, u.requests, u.totalTokens])).toEqual([
      ['chat', 3, 3 * CALL_TOKENS],
      ['compaction', 1, CALL_TOKENS],
    ]);
    expect((await usage(tokens.admin, 'groupBy=principal')).find((u) => u.key === 'user:quinn')?.totalTokens).toBe(4 * CALL_TOKENS);
    expect(await counter('user:quinn')).toBe(before + CALL_TOKENS);

    // More turns to summarise; then the day spent (by anything: here the counter is filled), the summary call is never made.
    for (const content of ['more', 'and more', 'and yet more']) expect((await chat(content)).statusCode).toBe(200);
    const day = budgetCounter('tokensPerDay', 'user:quinn');
    await runtime.bus.count(day.key, 100000, day.ttlMs);
    const summariesBefore = fake.requests.filter(isSummaryCall).length;
    const refused = await call('POST', `/sessions/${session}/compact`, tokens.quinn);
    expect(refused.statusCode, refused.body).toBe(429);
    expect((refused.json() as { error: string }).error).toContain('tokensPerDay budget of user:quinn (100000 tokens per day) is spent');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(fake.requests.filter(isSummaryCall).length).toBe(summariesBefore);
    expect((await usage(tokens.quinn, 'groupBy=kind')).find((u) => u.key === 'compaction')?.requests).toBe(1);
  });
});
