import { randomUUID } from 'node:crypto';
import { Errors } from '@agentry/errors';
import { activeTraceparent, QueueNames, type AgentRunJob, type RunRequest } from '@agentry/contracts';
import { finishRun, inTransaction, insertRun, insertRunInSession, type Db, type JsonValue, type RunCommit, type RunRecord, type RunSource, type SessionRecord } from '@agentry/db';
import { LocalClaims } from './local-claims.js';

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
   * The job leaves `replyTo` out (`agent-run` v1/v2, which workers of releases before v3 read):
   * `reliability.rolling_upgrade`. The row still names it; the worker then reads it there.
   */
  replyNotInJob?: boolean;
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
  /**
   * The run may be inserted claimed (`insertRun`'s `claimed`: one statement instead of the
   * worker's insert-then-claim) when a worker of this process takes it at once: an in-process
   * queue whose worker has a free run slot (LocalClaims). Only outside a session and without
   * `withRun`; the row is then committed durably, whatever `commit` says.
   */
  claimHere?: boolean;
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
 * `replyTo` is the run row's (`SubmitRunInput.replyTo`); without it the worker reads it from the row.
 */
export async function enqueueRun(queue: RunQueue, runId: string, opts: { jobId?: string; replyTo?: string | null } = {}): Promise<void> {
  // A traced request's context goes with the job (v2); untraced, the job stays v1. A run with a
  // reply channel names it (v3): its worker asks whether the gateway listens beside its lease.
  const traceparent = activeTraceparent();
  const job: AgentRunJob = opts.replyTo
    ? { type: 'agent-run', v: 3, runId, replyTo: opts.replyTo, ...(traceparent ? { traceparent } : {}) }
    : traceparent
      ? { type: 'agent-run', v: 2, runId, traceparent }
      : { type: 'agent-run', v: 1, runId };
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
  const claims = input.claimHere && !wanted && !withRun ? LocalClaims.of(deps.queue) : undefined;
  const claimed = claims?.hasRoom() === true;
  const create = async (db: Db): Promise<{ run: RunRecord; session: SessionRecord | null }> =>
    wanted
      ? insertRunInSession(db, { agentId: input.agentId, sessionKey: wanted.key, channel: wanted.channel, scope: wanted.scope, owner: wanted.owner }, row, { commit })
      : { run: await insertRun(db, { ...row, agentId: input.agentId, sessionId: null }, { commit, claimed }), session: null };
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
  // Handed over only now: a run that is not enqueued (failed or cancelled above) leaves nothing behind.
  if (claimed) claims!.hand(run);
  try {
    await enqueueRun(deps.queue, runId, { replyTo: input.replyNotInJob ? undefined : input.replyTo });
  } catch (err) {
    claims?.drop(runId);
    await finishRun(deps.db, runId, { status: 'failed', error: 'could not enqueue the run' });
    throw new Errors.NOT_READY('the run queue is unavailable; try again', { cause: err });
  }
  return { run, session };
}
