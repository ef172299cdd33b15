import { PubSubChannels, type RunCancelMessage } from '@agentry/contracts';
import { finishRun, type Db } from '@agentry/db';

/** What cancelling needs: the database and the pub/sub side of the bus. */
interface CancelRunDeps {
  db: Db;
  pubsub: { publish(channel: typeof PubSubChannels.runCancel, message: RunCancelMessage): Promise<void> };
}

/**
 * Cancels a run, the one way every caller does it (a chat whose client left, a cron fire that
 * waited too long, a deleted agent): the row is marked `cancelled` with `why` unless it already
 * ended, and `run-cancel {runId}` tells its worker to stop. Both are attempted whatever the other
 * does and nothing is thrown: a worker that misses the message still stops when its relay ends
 * (the listener check). Answers whether each step went through, for the caller's log.
 */
export async function cancelRun(deps: CancelRunDeps, runId: string, why: string): Promise<{ marked: boolean; announced: boolean }> {
  const [marked, announced] = await Promise.allSettled([
    finishRun(deps.db, runId, { status: 'cancelled', error: why }),
    deps.pubsub.publish(PubSubChannels.runCancel, { runId } satisfies RunCancelMessage),
  ]);
  return { marked: marked.status === 'fulfilled' && marked.value, announced: announced.status === 'fulfilled' };
}
