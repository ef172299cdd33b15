import { randomUUID } from 'node:crypto';
import { Errors } from '@agentry/errors';
import { activeTraceparent, QueueNames, type AgentRunJob, type RunRequest } from '@agentry/contracts';
import { finishRun, inTransaction, insertRun, insertRunInSession, type Db, type JsonValue, type RunCommit, type RunRecord, type RunSource, type SessionRecord } from '@agentry/db';

/** The job-queue side of runtime's `Bus` as this needs it. */
interface RunQueue {
  enqueue(queue: typeof QueueNames.agentRun, data: AgentRunJob, opts?: { jobId?: string; attempts?: number; backoffMs?: number }): Promise<string>;
}

interface SubmitRunDeps {
  db: Db;
  queue: RunQueue;
}

export interface SubmitRunInput {
  agentId: string;
  /** Keeps the conversation in this session (created on first use); none: the request is the whole context. */
  session?: { key: string; channel: string; scope?: string; owner?: string } | null;
  /** Who asked: `api`, `cron`, a channel platform. */
  source: RunSource;
  /** The principal whose usage and budget the run counts against (`user:<name>`, `api:<account>`; default ''). */
  principal?: string;
  request: RunRequest;
  /** A caller that listens on `run:<id>` before the job exists picks the id (see newRunId). */
  runId?: string;
  /** The caller's reply channel id (`GatewayReplies.id`): the run's events go there, not on `run:<id>`. */
  replyTo?: string;
  /**
   * Runs in the transaction that inserts the run, before the job is enqueued: rows that must
   * exist exactly when the run does (a cron fire's record). Throwing rolls the run back.
   */
  withRun?: (trx: Db, run: RunRecord) => Promise<void>;
  /**
   * Awaited after the run row is committed and before the job is enqueued (the caller's
   * subscription to `run:<id>`, started in parallel with the insert). Rejecting fails the run
   * (nothing is enqueued) and rethrows.
   */
  beforeEnqueue?: Promise<unknown>;
  /**
   * The caller stopped wanting the run (its client left while the run was being created): looked
   * at after `beforeEnqueue`, an aborted signal cancels the run instead of enqueueing it, so that
   * no worker can answer a question nobody waits for.
   */
  signal?: AbortSignal;
  /**
   * `deferred`: the run row (and a new session's) is committed without waiting for its WAL flush
   * (RunCommit in @agentry/db says what a crash can lose), for a caller whose client is told when
   * a run it waits for has no row: a chat. Ignored with `withRun` (those rows stay durable).
   */
  commit?: RunCommit;
}

interface SubmittedRun {
  run: RunRecord;
  session: SessionRecord | null;
  /** True when `signal` was aborted: the run is cancelled and was never enqueued. */
  cancelled?: boolean;
}

/** A fresh run id (32 hex digits). */
export function newRunId(): string {
  return randomUUID().replace(/-/g, '');
}

/**
 * The `agent-run` job of a run. Its job id is the run id, so enqueueing a run while its job waits
 * or runs adds nothing (once the job has finished, even failed for good, it is gone and a new one
 * is added: the sweep relies on that); a hand-off after its worker died (`handOffRun`) names
 * another, since the dead worker's job is still there.
 */
export async function enqueueRun(queue: RunQueue, runId: string, opts: { jobId?: string } = {}): Promise<void> {
  // A traced request's context goes with the job (v2); untraced, the job stays v1.
  const traceparent = activeTraceparent();
  const job: AgentRunJob = traceparent ? { type: 'agent-run', v: 2, runId, traceparent } : { type: 'agent-run', v: 1, runId };
  await queue.enqueue(QueueNames.agentRun, job, { jobId: opts.jobId ?? runId, attempts: 3, backoffMs: 500 });
}

/**
 * Creates a run of an agent, the one way every entry point (chat completions, cron fires, later
 * channels) does it: the session (if any) is ensured, the run row is committed (with whatever
 * `withRun` adds, in the same transaction), and only then is `agent-run {v:1, runId}` enqueued
 * (outbox rule: a worker never sees a job without its row). When the queue refuses the job, the
 * run is marked failed and NOT_READY is thrown. The caller has checked that the agent exists.
 */
export async function submitRun(deps: SubmitRunDeps, input: SubmitRunInput): Promise<SubmittedRun> {
  const runId = input.runId ?? newRunId();
  const row = { id: runId, source: input.source, request: input.request as unknown as JsonValue, replyTo: input.replyTo ?? null, principal: input.principal ?? '' };
  const wanted = input.session;
  // The session (if any) and the run in one statement; one INSERT is atomic on its own, so the
  // transaction (three round trips more) only when rows go with it.
  const withRun = input.withRun;
  const commit = withRun ? 'durable' : (input.commit ?? 'durable');
  const create = async (db: Db): Promise<{ run: RunRecord; session: SessionRecord | null }> =>
    wanted
      ? insertRunInSession(db, { agentId: input.agentId, sessionKey: wanted.key, channel: wanted.channel, scope: wanted.scope, owner: wanted.owner }, row, { commit })
      : { run: await insertRun(db, { ...row, agentId: input.agentId, sessionId: null }, { commit }), session: null };
  const { run, session } = withRun
    ? await inTransaction(deps.db, async (trx) => {
        const created = await create(trx);
        await withRun(trx, created.run);
        return created;
      })
    : await create(deps.db);
  if (input.beforeEnqueue) {
    try {
      await input.beforeEnqueue;
    } catch (err) {
      await finishRun(deps.db, runId, { status: 'failed', error: 'could not start the run' }).catch(() => undefined);
      throw err;
    }
  }
  if (input.signal?.aborted) {
    await finishRun(deps.db, runId, { status: 'cancelled', error: 'the client went away before the run started' });
    return { run, session, cancelled: true };
  }
  try {
    await enqueueRun(deps.queue, runId);
  } catch (err) {
    await finishRun(deps.db, runId, { status: 'failed', error: 'could not enqueue the run' });
    throw new Errors.NOT_READY('the run queue is unavailable; try again', { cause: err });
  }
  return { run, session };
}
