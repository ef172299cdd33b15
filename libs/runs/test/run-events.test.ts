import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RunEvent } from '@agentry/contracts';
import { EventGapError, GatewayReplies, RunEventPublisher, RunEventQueue, RunRelay, runEventChannel } from '@agentry/runs';

/** A publish whose completion the test controls. */
function gatedPublish() {
  const sent: RunEvent[] = [];
  const gates: Array<() => void> = [];
  const publish = (event: RunEvent) =>
    new Promise<void>((resolve) => {
      sent.push(event);
      gates.push(resolve);
    });
  const release = async () => {
    gates.splice(0).forEach((g) => g());
    await new Promise((r) => setImmediate(r));
  };
  return { sent, publish, release };
}

describe('RunEventPublisher', () => {
  it('sends the first delta at once and joins the deltas that arrive while a publish is in flight', async () => {
    const { sent, publish, release } = gatedPublish();
    const events = new RunEventPublisher('r1', publish);
    events.text('a');
    expect(sent).toEqual([{ type: 'text', text: 'a', runId: 'r1', seq: 0 }]);
    events.text('b');
    events.text('c');
    expect(sent).toHaveLength(1);
    await release();
    expect(sent[1]).toEqual({ type: 'text', text: 'bc', runId: 'r1', seq: 1 });
    const done = events.event({ type: 'done', finishReason: 'stop' });
    await release();
    await release();
    await done;
    expect(sent.map((e) => [e.seq, e.type])).toEqual([
      [0, 'text'],
      [1, 'text'],
      [2, 'done'],
    ]);
  });

  it('publishes each delta on its own when they come slower than a publish', async () => {
    const sent: RunEvent[] = [];
    const events = new RunEventPublisher('r2', async (e) => void sent.push(e));
    for (const t of ['x', 'y', 'z']) {
      events.text(t);
      await events.flush();
    }
    await events.event({ type: 'error', message: 'm', status: 500 });
    expect(sent.map((e) => [e.seq, e.type, (e as { text?: string }).text])).toEqual([
      [0, 'text', 'x'],
      [1, 'text', 'y'],
      [2, 'text', 'z'],
      [3, 'error', undefined],
    ]);
  });

  it('surfaces a failed publish on the next call', async () => {
    const events = new RunEventPublisher('r3', () => Promise.reject(new Error('redis down')));
    events.text('a');
    await expect(events.flush()).rejects.toThrow('redis down');
    expect(() => events.text('b')).toThrow('redis down');
    await expect(events.event({ type: 'done', finishReason: 'stop' })).rejects.toThrow('redis down');
  });

  it('survives a publish that throws at once', async () => {
    const events = new RunEventPublisher('r4', () => {
      throw new Error('sync');
    });
    events.text('a');
    await expect(events.flush()).rejects.toThrow('sync');
  });
});

/** The protocol's one rule, both ends together: seq from 0, contiguous; an error at any seq. */
describe('the run event protocol, publisher to queue', () => {
  it('delivers what the publisher sends, in order, coalesced text included', async () => {
    const queue = new RunEventQueue();
    const events = new RunEventPublisher('p1', async (e) => queue.push(e));
    events.text('Hel');
    events.text('lo');
    await events.event({ type: 'tool_start', toolCallId: 'c', toolName: 't', arguments: '{}', toolType: 'builtin' } as never);
    events.text('!');
    await events.event({ type: 'done', finishReason: 'stop' });
    const seen: RunEvent[] = [];
    for (let e = await queue.next(); ; e = await queue.next()) {
      seen.push(e);
      if (e.type === 'done') break;
    }
    expect(seen.map((e) => e.seq)).toEqual(seen.map((_e, i) => i));
    expect(seen.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join('')).toBe('Hello!');
    expect(seen.map((e) => e.type).filter((t) => t !== 'text')).toEqual(['tool_start', 'done']);
  });

  it('fails on a lost event, and takes a terminal error at any seq', async () => {
    const lossy = new RunEventQueue();
    let n = 0;
    const events = new RunEventPublisher('p2', async (e) => {
      if (n++ !== 1) lossy.push(e);
    });
    await events.event({ type: 'tool_start', toolCallId: 'c', toolName: 't', arguments: '{}', toolType: 'builtin' } as never);
    await events.event({ type: 'tool_result', toolCallId: 'c', toolName: 't', content: 'x', toolType: 'builtin' } as never);
    await events.event({ type: 'done', finishReason: 'stop' });
    expect((await lossy.next()).seq).toBe(0);
    const gap = await lossy.next().then(() => undefined, (e: unknown) => e);
    expect(gap).toBeInstanceOf(EventGapError);
    // A person reads the message (a Redis restart mid-stream shows it); the seqs go to the logs.
    expect((gap as EventGapError).message).toMatch(/^part of the answer was lost on its way from the worker .*please retry$/);
    expect((gap as EventGapError).detail).toBe('run events arrived out of order (expected 1, got 2)');

    const taken = new RunEventQueue();
    taken.push({ type: 'error', runId: 'p3', seq: 7, message: 'the worker died', status: 502 });
    expect(await taken.next()).toMatchObject({ type: 'error', seq: 7 });
  });

  it('a retry notice consumes no seq: it carries the next event\'s, and the queue passes it without counting it', async () => {
    const queue = new RunEventQueue();
    const events = new RunEventPublisher('p4', async (e) => queue.push(e));
    await events.notice({ type: 'retry', attempt: 2, of: 3, reason: 'provider unreachable' });
    await events.notice({ type: 'retry', attempt: 3, of: 3, reason: 'provider unreachable' });
    expect(queue.expected).toBe(0);
    events.text('hi');
    await events.flush();
    await events.event({ type: 'done', finishReason: 'stop' });
    const got = [await queue.next(), await queue.next(), await queue.next(), await queue.next()];
    expect(got.map((e) => [e.type, e.seq])).toEqual([
      ['retry', 0],
      ['retry', 0],
      ['text', 0],
      ['done', 1],
    ]);
    expect(queue.expected).toBe(2);
  });
});

/** A pub/sub with one channel namespace, counting SUBSCRIBEs; the first `failures` of them fail. */
function countingPubSub(failures = 0) {
  const handlers = new Map<string, Set<(m: RunEvent) => void>>();
  let subscribes = 0;
  return {
    get subscribes() {
      return subscribes;
    },
    async subscribe(channel: `replies:${string}`, handler: (m: RunEvent) => void) {
      subscribes++;
      if (subscribes <= failures) throw new Error('Redis is away');
      const set = handlers.get(channel) ?? new Set();
      set.add(handler);
      handlers.set(channel, set);
      return async () => void set.delete(handler);
    },
    async publish(channel: string, message: RunEvent) {
      // Each subscriber decodes its own copy, as over Redis.
      for (const h of handlers.get(channel) ?? []) h(JSON.parse(JSON.stringify(message)) as RunEvent);
    },
  };
}

describe('GatewayReplies: one reply channel per gateway process', () => {
  it('subscribes once for every run and hands each run its own events, in order, through the seq check', async () => {
    const pubsub = countingPubSub();
    const replies = GatewayReplies.of(pubsub);
    expect(GatewayReplies.of(pubsub)).toBe(replies);
    const queues = { a: new RunEventQueue(), b: new RunEventQueue() };
    const stops = await Promise.all((['a', 'b'] as const).map((id) => replies.listen(id, (e) => queues[id].push(e))));
    expect(pubsub.subscribes).toBe(1);
    expect(replies.size).toBe(2);
    const channel = runEventChannel({ id: 'a', replyTo: replies.id });
    expect(channel).toBe(`replies:${replies.id}`);
    expect(runEventChannel({ id: 'a', replyTo: null })).toBe('run:a');
    // Two runs' publishers interleaved on the one channel.
    const pa = new RunEventPublisher('a', (e) => pubsub.publish(channel, e));
    const pb = new RunEventPublisher('b', (e) => pubsub.publish(channel, e));
    pa.text('A1');
    pb.text('B1');
    await pb.event({ type: 'done', finishReason: 'stop' });
    pa.text('A2');
    await pa.event({ type: 'done', finishReason: 'stop' });
    const drain = async (q: RunEventQueue) => {
      const seen: RunEvent[] = [];
      for (let e = await q.next(); ; e = await q.next()) {
        seen.push(e);
        if (e.type === 'done') return seen;
      }
    };
    const [a, b] = [await drain(queues.a), await drain(queues.b)];
    expect(a.map((e) => [e.seq, e.type, (e as { text?: string }).text])).toEqual([
      [0, 'text', 'A1'],
      [1, 'text', 'A2'],
      [2, 'done', undefined],
    ]);
    expect(b.map((e) => [e.seq, e.type])).toEqual([
      [0, 'text'],
      [1, 'done'],
    ]);
    // A run no longer listened for gets nothing; the others keep theirs; the subscription stays.
    stops[0]!();
    await pubsub.publish(channel, { type: 'text', text: 'late', runId: 'a', seq: 3 });
    expect(queues.a.poll()).toBeUndefined();
    expect(replies.size).toBe(1);
    await replies.listen('c', () => {});
    expect(pubsub.subscribes).toBe(1);
  });

  it('fails the chat whose subscription failed and tries again for the next', async () => {
    const pubsub = countingPubSub(1);
    const replies = GatewayReplies.of(pubsub);
    await expect(replies.listen('x', () => {})).rejects.toThrow('Redis is away');
    expect(replies.size).toBe(0);
    const got: RunEvent[] = [];
    await replies.listen('y', (e) => got.push(e));
    await pubsub.publish(`replies:${replies.id}`, { type: 'text', text: 'hi', runId: 'y', seq: 0 });
    expect(got).toHaveLength(1);
    expect(pubsub.subscribes).toBe(2);
  });
});

describe('RunRelay silence', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('reads the run after checkMs of silence counted from the start of each wait, not from the first', async () => {
    vi.useFakeTimers();
    const queue = new RunEventQueue();
    let reads = 0;
    const relay = new RunRelay(queue, { readRun: async () => (reads++, { status: 'running' }) as never, checkMs: () => 100 });
    let first = relay.next();
    await vi.advanceTimersByTimeAsync(60);
    queue.push({ type: 'text', runId: 'r', seq: 0, text: 'a' });
    expect(await first).toMatchObject({ type: 'event', event: { seq: 0 } });
    // A second wait from t=60: the relay's one timer fires at t=100 and must wait on to t=160.
    first = relay.next();
    await vi.advanceTimersByTimeAsync(90);
    expect(reads).toBe(0);
    await vi.advanceTimersByTimeAsync(20);
    expect(reads).toBe(1);
    // The run is still going: the next silence is a whole checkMs after the first (t=260), and an event still ends the wait.
    await vi.advanceTimersByTimeAsync(80);
    expect(reads).toBe(1);
    await vi.advanceTimersByTimeAsync(20);
    expect(reads).toBe(2);
    queue.push({ type: 'done', runId: 'r', seq: 1, finishReason: 'stop' } as never);
    expect(await first).toMatchObject({ type: 'event', event: { type: 'done' } });
    // Nothing is left armed after the last event: a timer would hold the request and its response for checkMs more.
    expect(vi.getTimerCount()).toBe(0);
  });

  it('ends from the stored row when the events went quiet and the run has ended', async () => {
    vi.useFakeTimers();
    const relay = new RunRelay(new RunEventQueue(), { readRun: async () => ({ status: 'succeeded', output: 'x' }) as never, checkMs: () => 100 });
    const next = relay.next();
    await vi.advanceTimersByTimeAsync(100);
    expect(await next).toMatchObject({ type: 'ended', run: { status: 'succeeded' } });
    expect(vi.getTimerCount()).toBe(0);
  });
});
