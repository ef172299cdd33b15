import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { PubSubChannels } from '@agentry/contracts';
import type { Db, RuleChainRow } from '@agentry/db';
import { AgentCache, OwnerAdminCache } from '@agentry/runs';
import { waitFor } from '@agentry/testing';

function rows() {
  const table = new Map<string, RuleChainRow>();
  let reads = 0;
  const put = (id: string, name: string) => table.set(id, { id, kind: 'agent', name } as unknown as RuleChainRow);
  const load = async (id: string) => {
    reads++;
    return table.get(id);
  };
  return { table, put, load, reads: () => reads };
}

describe('AgentCache', () => {
  it('reads an agent once, then serves it until it is invalidated or the TTL passes', async () => {
    const r = rows();
    r.put('a', 'one');
    let now = 0;
    const cache = new AgentCache({} as Db, { load: r.load, ttlMs: 1000, now: () => now });
    expect((await cache.get('a'))?.name).toBe('one');
    r.put('a', 'two');
    expect((await cache.get('a'))?.name).toBe('one');
    expect(r.reads()).toBe(1);
    cache.invalidate('a');
    expect((await cache.get('a'))?.name).toBe('two');
    r.put('a', 'three');
    now = 1000;
    expect((await cache.get('a'))?.name).toBe('three');
    expect(r.reads()).toBe(3);
  });

  it('does not cache a missing agent, and shares one read between concurrent gets', async () => {
    const r = rows();
    const cache = new AgentCache({} as Db, { load: r.load });
    expect(await cache.get('b')).toBeUndefined();
    r.put('b', 'new');
    const [x, y] = await Promise.all([cache.get('b'), cache.get('b')]);
    expect(x?.name).toBe('new');
    expect(y).toBe(x);
    expect(r.reads()).toBe(2);
  });

  it('does not store a read that an invalidation overtook', async () => {
    const r = rows();
    r.put('c', 'old');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const cache = new AgentCache({} as Db, {
      load: async (id) => {
        const row = await r.load(id);
        await gate;
        return row;
      },
    });
    const pending = cache.get('c');
    r.put('c', 'new');
    cache.invalidate('c');
    release();
    expect((await pending)?.name).toBe('old');
    expect(cache.size).toBe(0);
    expect((await cache.get('c'))?.name).toBe('new');

    // The same for an invalidation of every agent.
    let releaseAll!: () => void;
    const gateAll = new Promise<void>((resolve) => (releaseAll = resolve));
    const all = new AgentCache({} as Db, {
      load: async (id) => {
        await gateAll;
        return r.load(id);
      },
    });
    const before = all.get('c');
    all.invalidate();
    releaseAll();
    expect((await before)?.name).toBe('new');
    expect(all.size).toBe(0);
  });

  it("follows invalidate {area:'agents'} on the bus, by id and all at once", async () => {
    const r = rows();
    r.put('d', 'one');
    r.put('e', 'one');
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const cache = new AgentCache({} as Db, { load: r.load });
    const unfollow = await cache.follow(bus.pubsub);
    await cache.get('d');
    await cache.get('e');
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'providers', id: 'd' });
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'agents', id: 'd' });
    await waitFor(async () => cache.size === 1, 2000, 5);
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'agents' });
    await waitFor(async () => cache.size === 0, 2000, 5);
    await unfollow();
    await bus.close();
  });
});

describe('OwnerAdminCache', () => {
  it('reads an owner once per run burst, and forgets every owner on any users or config change, whatever id it names', async () => {
    const roles = new Map([['alice', true], ['bob', false]]);
    const reads: string[] = [];
    const cache = new OwnerAdminCache(async (owner) => {
      reads.push(owner);
      return roles.get(owner) ?? false;
    });
    const bus = createMemoryBus({ logger: pino({ level: 'silent' }) });
    const unfollow = await cache.follow(bus.pubsub);
    expect([await cache.isAdmin('alice'), await cache.isAdmin('alice'), await cache.isAdmin('bob')]).toEqual([true, true, false]);
    expect(reads).toEqual(['alice', 'bob']);
    // Alice demoted: the route announces the users area (here naming someone else's account).
    roles.set('alice', false);
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'agents' });
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'users', id: 'carol' });
    await waitFor(async () => cache.size === 0, 2000, 5);
    expect(await cache.isAdmin('alice')).toBe(false);
    await cache.isAdmin('bob');
    await bus.pubsub.publish(PubSubChannels.invalidate, { area: 'config' });
    await waitFor(async () => cache.size === 0, 2000, 5);
    await unfollow();
    await bus.close();
  });
});
