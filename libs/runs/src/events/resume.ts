import { RunKeeps, type RunEvent } from '@agentry/contracts';
import type { PubSub, Unsubscribe } from '@agentry/bus';
import { RunEventQueue } from './queue.js';
import { runEventChannel } from './replies.js';

/** The run as a resume needs it: where its events are published. */
interface ResumableRun {
  id: string;
  replyTo: string | null;
}

export interface ResumedEvents {
  /** Every event of the run from the first one kept, then the live rest, each once and in order. */
  queue: RunEventQueue;
  /** The seq of the first event kept (0 unless the log was trimmed); undefined when none is kept yet. */
  firstKept: number | undefined;
  /** Stops listening for live events. */
  stop: Unsubscribe;
}

/**
 * The events of a run for a client that resumes its stream, on whichever gateway it reaches:
 * the subscription to the run's channel (its original gateway's reply channel, whose traffic is
 * filtered down to this run) is made first and the kept log read after, so an event is in one
 * or the other (the worker appends and publishes in one step) and none falls between. Events
 * seen in both are passed on once: by seq, and a terminal error (which may carry any seq) once.
 */
export async function resumeRunEvents(pubsub: Pick<PubSub, 'subscribe' | 'kept'>, run: ResumableRun): Promise<ResumedEvents> {
  const early: RunEvent[] = [];
  // Live events are held here until the kept ones have been passed on.
  const live: { feed?: (event: RunEvent) => void } = {};
  const stop = await pubsub.subscribe(runEventChannel(run), (event: RunEvent) => {
    if (event.runId !== run.id) return;
    if (live.feed) live.feed(event);
    else early.push(event);
  });
  let kept: RunEvent[];
  try {
    kept = ((await pubsub.kept(RunKeeps.events(run.id))) as RunEvent[]).filter((e) => e && e.runId === run.id);
  } catch (err) {
    await stop();
    throw err;
  }
  const firstKept = kept.find((e) => e.type !== 'error')?.seq ?? (kept.length > 0 ? 0 : undefined);
  const queue = new RunEventQueue(firstKept ?? 0);
  let errorSeen = false;
  // Retry notices share the seq of the event after them: told once each, and not after that event.
  const noticesSeen = new Set<string>();
  const pass = (event: RunEvent) => {
    if (event.type === 'error') {
      if (errorSeen) return;
      errorSeen = true;
    } else if (event.seq < queue.expected) return;
    else if (event.type === 'retry') {
      const key = `${event.seq}:${event.attempt}:${event.of}`;
      if (noticesSeen.has(key)) return;
      noticesSeen.add(key);
    }
    queue.push(event);
  };
  for (const event of kept) pass(event);
  for (const event of early) pass(event);
  live.feed = pass;
  return { queue, firstKept, stop };
}
