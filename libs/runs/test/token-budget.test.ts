import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { budgetCounter } from '@agentry/contracts';
import { upsertChannelAccount, upsertSeededUser, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { TokenBudgets } from '@agentry/runs';

/**
 * A model call's reservation on its principal's day (issue 35 F): granted while what is spent and
 * reserved stays below the limit, refused with the budget's 429 once it does not, settled to the
 * call's usage, given back when the call fails, and read from the user's or the api account's
 * stored budget.
 */

const log = pino({ level: 'silent' });

describe('TokenBudgets', () => {
  let handle: DbHandle;
  let bus: Bus;
  let budgets: TokenBudgets;
  let perPeer = 30;
  let perAccount = 0;
  const used = (principal: string) => {
    const day = budgetCounter('tokensPerDay', principal);
    return bus.count(day.key, 0, day.ttlMs);
  };

  beforeAll(async () => {
    handle = await createTestPglite();
    bus = createMemoryBus({ logger: log });
    await upsertSeededUser(handle.db, { username: 'amy', passwordHash: 'x', role: 'user', fileHmac: 'amy', budget: { tokensPerDay: 100 } });
    await upsertSeededUser(handle.db, { username: 'ben', passwordHash: 'x', role: 'user', fileHmac: 'ben', budget: null });
    await upsertChannelAccount(handle.db, { platform: 'api', id: 'app', name: 'app', enabled: true, settings: { budget: { tokensPerDay: 50 } }, secretsSealed: null, apiKeyHash: null, fileHmac: null });
    budgets = new TokenBudgets({ db: handle.db, counter: bus, logger: log, channelPeerTokensPerDay: () => perPeer, channelAccountTokensPerDay: () => perAccount });
  }, 400_000);
  afterAll(async () => {
    await bus?.close();
    await handle?.close();
  });

  it("reads the limit of a user and of an api account; none for others and for ''", async () => {
    expect(await budgets.limitOf('user:amy')).toBe(100);
    expect(await budgets.limitOf('api:app')).toBe(50);
    expect(await budgets.limitOf('user:ben')).toBeUndefined();
    expect(await budgets.limitOf('user:nobody')).toBeUndefined();
    expect(await budgets.limitOf('')).toBeUndefined();
  });

  it('reserves while the day is below the limit, settles to the usage (negative allowed) and gives a failed call back', async () => {
    const first = await budgets.reserve('user:amy', 80);
    expect(await used('user:amy')).toBe(80);
    // 80 of 100 spent or reserved: one more call may start (and may cross the limit) ...
    const second = await budgets.reserve('user:amy', 60);
    expect(await used('user:amy')).toBe(140);
    // ... but none while the day stands at or over it.
    await expect(budgets.reserve('user:amy', 1)).rejects.toThrow(/^Too many requests: the tokensPerDay budget of user:amy \(100 tokens per day\) is spent; it resets at .+ \(in \d+ s\)$/);
    await first.settle(10);
    await first.settle(10); // once only
    expect(await used('user:amy')).toBe(70);
    await second.release();
    expect(await used('user:amy')).toBe(10);
    const third = await budgets.reserve('user:amy', 500);
    await third.settle(30);
    expect(await used('user:amy')).toBe(40);
  });

  it('counts the calls of a principal without a limit (a budget set later starts from them), and nothing for no principal', async () => {
    const r = await budgets.reserve('user:ben', 1000);
    expect(await used('user:ben')).toBe(0);
    await r.settle(12);
    expect(await used('user:ben')).toBe(12);
    await (await budgets.reserve('', 1000)).settle(12);
    expect(await used('')).toBe(0);
  });

  it('an explicit limit (the gateway knows it) wins over the stored one', async () => {
    const day = budgetCounter('tokensPerDay', 'api:app');
    await bus.count(day.key, 60, day.ttlMs);
    await expect(budgets.reserve('api:app', 1)).rejects.toThrow(/api:app \(50 tokens per day\)/);
    const r = await budgets.reserve('api:app', 1, 1000);
    await r.release();
    expect(await used('api:app')).toBe(60);
  });

  it('gives each channel peer the configured day of its own, read at each call; 0 is none (issue 35)', async () => {
    const alice = 'channel:chat_d:tg:7007';
    const mallory = 'channel:chat_d:tg:6666';
    expect(await budgets.limitOf(alice)).toBe(30);
    const r = await budgets.reserve(mallory, 10);
    await r.settle(40);
    await expect(budgets.reserve(mallory, 1)).rejects.toThrow(/the tokensPerDay budget of channel:chat_d:tg:6666 \(30 tokens per day\) is spent/);
    // Another peer of the same account is not held by mallory's day.
    await (await budgets.reserve(alice, 10)).settle(5);
    expect(await used(alice)).toBe(5);
    perPeer = 0;
    expect(await budgets.limitOf(mallory)).toBeUndefined();
    await (await budgets.reserve(mallory, 1)).settle(1);
    expect(await used(mallory)).toBe(41);
    perPeer = 30;
  });

  it('holds a whole chat account across its senders to channelAccountTokensPerDay, read at each call; 0 is none', async () => {
    perPeer = 1000;
    perAccount = 50;
    try {
      const peer = (n: number, account = 'busy') => `channel:chat_d:${account}:${n}`;
      await (await budgets.reserve(peer(1), 10)).settle(30);
      // Each sender is far below its own day, but together they reach the account's.
      await (await budgets.reserve(peer(2), 10)).settle(25);
      await expect(budgets.reserve(peer(3), 5)).rejects.toThrow(
        /^Too many requests: chat_d account "busy" has spent its tokens for today across all its senders \(security\.budgets\.channelAccountTokensPerDay: 50 tokens per day\); it resets at .+ \(in \d+ s\)$/,
      );
      // The refused call holds nothing of its sender's own day.
      expect(await used(peer(3))).toBe(0);
      // Another account of the same platform has a day of its own.
      await (await budgets.reserve(peer(3, 'quiet'), 5)).settle(5);
      // A call under way holds both days; given back, both are freed.
      const held = await budgets.reserve(peer(4, 'quiet'), 45);
      await expect(budgets.reserve(peer(5, 'quiet'), 1)).rejects.toThrow(/chat_d account "quiet"/);
      await held.release();
      await (await budgets.reserve(peer(5, 'quiet'), 1)).settle(1);
      expect(await used(peer(4, 'quiet'))).toBe(0);
      perAccount = 0;
      await (await budgets.reserve(peer(3), 5)).settle(5);
      expect(await used(peer(3))).toBe(5);
    } finally {
      perPeer = 30;
      perAccount = 0;
    }
  });

  it('a counter that does not answer lets the call through', async () => {
    const down = new TokenBudgets({ db: handle.db, counter: { reserve: () => Promise.reject(new Error('down')), count: () => Promise.reject(new Error('down')) }, logger: log, channelPeerTokensPerDay: () => 0 });
    const r = await down.reserve('user:amy', 10);
    await expect(r.settle(5)).resolves.toBeUndefined();
  });
});
