import { describe, expectTypeOf, it } from 'vitest';
import {
  PubSubChannels,
  QueueNames,
  type AgentQueueJob,
  type AgentRunJob,
  type InvalidateMessage,
  type OutboundOutcomeMessage,
  type QueueName,
  type QueuePayloads,
  type RunEvent,
} from '@agentry/contracts';
import type { Bus, Job } from '../src/index.js';

/**
 * Compile-time checks: tsc -b fails this file when a wrong payload or message stops being an
 * error (each `@ts-expect-error` then has nothing to expect). The calls sit in a function that
 * never runs, so no bus is needed.
 */
function typedCalls(bus: Bus): void {
  void bus.queue.enqueue(QueueNames.agentRun, { type: 'agent-run', v: 1, runId: 'r' });
  // @ts-expect-error a channel-send payload on the agent-run queue
  void bus.queue.enqueue(QueueNames.agentRun, { type: 'channel-send', v: 1, messageId: 'm' });
  // @ts-expect-error a queue no map names
  void bus.queue.enqueue('agent-runs', { type: 'agent-run', v: 1, runId: 'r' });
  bus.queue.consume(QueueNames.agentRun, async (job) => {
    // A run, or a forced compaction (the worker runs both).
    expectTypeOf(job).toEqualTypeOf<Job<AgentQueueJob>>();
  }, { concurrency: 1 });
  // @ts-expect-error a handler for another queue's payload
  bus.queue.consume(QueueNames.channelSend, async (_job: Job<AgentRunJob>) => {}, { concurrency: 1 });

  void bus.pubsub.publish(PubSubChannels.invalidate, { area: 'agents', id: 'a' });
  // @ts-expect-error an area that does not exist
  void bus.pubsub.publish(PubSubChannels.invalidate, { area: 'nothing' });
  // @ts-expect-error a run-cancel message on a run's own channel
  void bus.pubsub.publish(PubSubChannels.run('r'), { runId: 'r' });
  // @ts-expect-error a channel no map names
  void bus.pubsub.publish('invalidated', { area: 'agents' });
  void bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => expectTypeOf(m).toEqualTypeOf<InvalidateMessage>());
  void bus.pubsub.subscribe(PubSubChannels.run('r'), (m) => expectTypeOf(m).toEqualTypeOf<RunEvent>());
  void bus.pubsub.subscribe(PubSubChannels.outbound('o'), (m) => expectTypeOf(m).toEqualTypeOf<OutboundOutcomeMessage>());
}

describe('typed ports', () => {
  it('type the services by the maps of @agentry/contracts (checked by tsc)', () => {
    expectTypeOf(typedCalls).toBeFunction();
    // A queue added to QueueNames without a payload (or the reverse) would leave a name untyped.
    expectTypeOf<keyof QueuePayloads>().toEqualTypeOf<QueueName>();
    expectTypeOf(PubSubChannels.run('r')).toEqualTypeOf<`run:${string}`>();
  });
});
