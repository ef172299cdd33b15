import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { budgetCounter } from '@agentry/contracts';
import { getRuleChain, insertCronJob, insertRuleChain, setAgentAudience, upsertSeededUser, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { runPrincipal } from '@agentry/scheduler';

/**
 * Cron and heartbeat runs carry their owner (issue 35 F): before, every fire ran as principal ''
 * (no budget, no usage under anyone, no audience). A job runs as `user:<job owner>`, a heartbeat
 * as `user:<agent owner>`, refused when that user may no longer chat with the agent or has spent
 * its tokensPerDay.
 */

const log = pino({ level: 'silent' });

describe('the principal of a cron fire', () => {
  let handle: DbHandle;
  let bus: Bus;
  beforeAll(async () => {
    handle = await createTestPglite();
    bus = createMemoryBus({ logger: log });
    const db = handle.db;
    for (const [username, role] of [['alice', 'user'], ['bob', 'user']] as const) {
      await upsertSeededUser(db, { username, passwordHash: 'x', role, fileHmac: username, budget: username === 'bob' ? { tokensPerDay: 100 } : null });
    }
    await insertRuleChain(db, { id: 'a1', kind: 'agent', agentId: null, name: 'a1', category: null, dsl: {}, owner: 'alice', audience: { everyone: false, users: ['bob'], roles: [], apiAccounts: [] } });
  }, 400_000);
  afterAll(async () => {
    await bus?.close();
    await handle?.close();
  });

  const job = (id: string, owner: string) => insertCronJob(handle.db, { id, agentId: 'a1', owner, name: id, schedule: '0 0 3 * * *', message: 'm', timezone: 'UTC', disabled: false, deliver: null });

  it("is the job's owner, and a heartbeat's the agent's owner", async () => {
    const agent = await getRuleChain(handle.db, 'a1');
    expect(await runPrincipal(handle.db, bus, await job('j-alice', 'alice'), agent, log)).toBe('user:alice');
    expect(await runPrincipal(handle.db, bus, await job('heartbeat:a1', 'admin'), agent, log)).toBe('user:alice');
  });

  it("refuses a fire once the owner's budget is spent", async () => {
    const bobs = await job('j-bob', 'bob');
    const agent = await getRuleChain(handle.db, 'a1');
    expect(await runPrincipal(handle.db, bus, bobs, agent, log)).toBe('user:bob');
    const day = budgetCounter('tokensPerDay', 'user:bob');
    await bus.count(day.key, 150, day.ttlMs);
    await expect(runPrincipal(handle.db, bus, bobs, agent, log)).rejects.toThrow(/tokensPerDay budget of user:bob/);
  });

  it('refuses a fire once the agent is no longer shared with the owner', async () => {
    const carol = await job('j-carol', 'carol');
    await setAgentAudience(handle.db, 'a1', { everyone: false, users: [], roles: [], apiAccounts: [] });
    await expect(runPrincipal(handle.db, bus, carol, await getRuleChain(handle.db, 'a1'), log)).rejects.toThrow(/not shared with the job's owner "carol"/);
  });
});
