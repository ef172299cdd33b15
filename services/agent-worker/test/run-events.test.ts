import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@agentry/contracts';
import { RunEventPublisher } from '@agentry/agent-worker';

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
