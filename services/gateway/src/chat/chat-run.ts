import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RunKeeps } from '@agentry/contracts';
import { getRunOutcome, type SessionRecord } from '@agentry/db';
import { RunEventQueue, RunRelay, GatewayReplies, cancelRun, newRunId, relayLease, submitRun, type RelayLease, type SubmitRunInput } from '@agentry/runs';
import type { GatewayDeps } from '../deps.js';
import { assertSessionQuota } from '../auth/quotas.js';

/** What an answer writer needs of the run it relays: its id, and saying it answered or giving up on it. */
export interface RunControl {
  readonly runId: string;
  /** The answer is out (or failed): a later close of the connection cancels nothing. */
  settle(): void;
  /** Cancels the run unless it has settled; at most once. */
  cancel(why: string): Promise<void>;
}

/**
 * A streamed run whose client went away is cancelled only after `reliability.resume_grace_ms`,
 * and not at all when a client resumed it meanwhile (on any gateway: the resume count is on the
 * bus). `seen`: the count when this client attached (0 for the request that started the run).
 */
export async function cancelUnlessResumed(deps: Pick<GatewayDeps, 'bus' | 'config'>, run: RunControl, seen: number, why: string, log: FastifyRequest['log']): Promise<void> {
  const { resume_grace_ms: graceMs, resume_retain_ms: retainMs } = deps.config.current.reliability;
  if (graceMs > 0) {
    await sleep(graceMs, undefined, { ref: false });
    let resumes = seen;
    try {
      resumes = await deps.bus.count(RunKeeps.resumes(run.runId), 0, retainMs);
    } catch (err) {
      // Unknown is taken as "nobody resumed": the run ends as it did before resumes existed.
      log.warn({ err, runId: run.runId }, 'could not read whether the run was resumed; cancelling it');
    }
    if (resumes > seen) {
      log.info({ runId: run.runId }, 'the client went away but the run was resumed: not cancelled');
      return;
    }
  }
  await run.cancel(why);
}

/**
 * One run asked for by an HTTP client, from the gateway's side: it listens for the run's events
 * on the process's reply channel (`GatewayReplies`) before the job exists (no event can be missed), commits and enqueues the run unless the client has
 * already left, cancels it when the client goes away before it settled, and stops listening at
 * the end. Whatever the answer's shape (chat completions, later the Responses API), it reads the
 * events through `relay()` and says `settle()` when it has answered.
 */
export class ChatRun implements RunControl {
  readonly runId = newRunId();
  readonly #queue = new RunEventQueue();
  readonly #replies: GatewayReplies;
  readonly #subscribed: Promise<() => void>;
  readonly #clientGone = new AbortController();
  #settled = false;
  #lease: RelayLease | undefined;

  constructor(
    private readonly deps: GatewayDeps,
    private readonly req: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    // Listening must be in place before the job is enqueued; it runs alongside the insert.
    this.#replies = GatewayReplies.of(deps.bus.pubsub);
    this.#subscribed = this.#replies.listen(this.runId, (m) => this.#queue.push(m));
    this.#subscribed.catch(() => undefined);
    // Listened for from the start: a client that leaves while the run is being created must not
    // have it enqueued (its close would otherwise go unheard, and the run be answered for nobody).
    // A close after the answer went out completely is no departure (and an abort costs a
    // DOMException with its stack on every request).
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) this.#clientGone.abort();
    });
  }

  /** Commits and enqueues the run; `started: false` when the client left first (nothing was enqueued). */
  async start(
    input: Omit<SubmitRunInput, 'runId' | 'replyTo' | 'replyNotInJob' | 'beforeEnqueue' | 'signal' | 'commit' | 'claimHere'>,
    opts: {
      resumable?: boolean;
      /** A background response: the run lives without its client, whose leaving cancels nothing. */
      detached?: boolean;
    } = {},
  ): Promise<{ session: SessionRecord | null; started: boolean }> {
    // A new session counts against the user's security.quotas.sessionsPerUser (409 over it).
    if (input.session) {
      await assertSessionQuota(this.deps.db.db, this.deps.config.current.security.quotas, this.req.principal, {
        agentId: input.agentId,
        key: input.session.key,
        channel: input.session.channel,
      });
    }
    // The row's commit does not wait for its WAL flush: the worker's claim, a synchronous commit
    // made before the run's first event, flushes it (RunCommit says what a crash loses: runs no
    // worker had claimed, whose waiting clients are told). A background response is acknowledged
    // to its client before any worker has it, so its row is durable first.
    const { session, cancelled } = await submitRun(
      { db: this.deps.db.db, queue: this.deps.bus.queue },
      {
        ...input,
        runId: this.runId,
        replyTo: this.#replies.id,
        replyNotInJob: this.deps.config.current.reliability.rolling_upgrade,
        beforeEnqueue: this.#subscribed,
        signal: this.#clientGone.signal,
        // PGlite has no WAL writer: a deferred commit stays unwritten until the next synchronous
        // one, so chats queued behind busy run slots would vanish, not be cancelled, if the process died.
        commit: opts.detached || this.deps.db.dialect === 'pglite' ? 'durable' : 'deferred',
        // Embedded mode: the worker of this process takes the run at once, so the insert claims
        // it (a statement fewer); a session's turn is still claimed at its turn.
        claimHere: true,
      },
    );
    if (cancelled) {
      this.#settled = true;
      return { session, started: false };
    }
    if (opts.detached) {
      // Nothing this client does ends the run (an event gap or its leaving only ends its stream).
      this.#settled = true;
      return { session, started: true };
    }
    // A client that goes away cancels its run: at once, or, for a stream whose client asked to
    // resume, after the resume grace unless it was resumed.
    const gone = () => (opts.resumable ? cancelUnlessResumed(this.deps, this, 0, 'the client went away', this.req.log) : this.cancel('the client went away'));
    this.reply.raw.on('close', () => {
      if (!this.reply.raw.writableFinished) void gone();
    });
    if (this.#clientGone.signal.aborted) void gone();
    return { session, started: true };
  }

  /** The run's events, ending from the stored row when they go quiet, and `closed` when the client left. */
  relay(): RunRelay {
    // Its worker's death is noticed from the run's lease within seconds (cluster mode).
    this.#lease ??= runLease(this.deps, this.runId);
    return new RunRelay(this.#queue, {
      readRun: () => getRunOutcome(this.deps.db.db, this.runId),
      checkMs: () => this.deps.config.current.reliability.relay_check_ms,
      closed: this.#clientGone.signal,
      lease: this.#lease,
    });
  }

  /** The answer is out (or failed): a later close of the connection cancels nothing. */
  settle(): void {
    this.#settled = true;
  }

  /** Cancels the run unless it has settled; at most once. */
  async cancel(why: string): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    this.req.log.info({ runId: this.runId, why }, 'run cancelled by the gateway');
    await cancelRun({ db: this.deps.db.db, pubsub: this.deps.bus.pubsub }, this.runId, why);
  }

  /** Stops listening for the run's events (the process's subscription stays). */
  async close(): Promise<void> {
    this.#lease?.watch.stop();
    const stop = await this.#subscribed.catch(() => undefined);
    stop?.();
  }
}

/** The liveness lease a relay of `runId` watches (cluster mode, `reliability.run_lease_ms` > 0). */
export function runLease(deps: Pick<GatewayDeps, 'bus' | 'db' | 'logger' | 'config'>, runId: string): RelayLease | undefined {
  return relayLease({ bus: deps.bus, db: deps.db.db, logger: deps.logger, leaseMs: () => deps.config.current.reliability.run_lease_ms }, runId);
}
