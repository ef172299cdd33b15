import type { Logger } from 'pino';
import { trace, SpanKind, type Context } from '@opentelemetry/api';
import { Compile } from 'typebox/compile';
import { AgentRunJob, PubSubChannels, RunKeeps, type ReplyChannel, type RunEvent } from '@agentry/contracts';
import { UnrecoverableJobError, type Bus, type Job, type KeepOptions } from '@agentry/bus';
import { Errors, hasCode } from '@agentry/errors';
import { claimRun, claimRunOutsideSession, finishRun, isActiveRunStatus, type Db, type RunRecord } from '@agentry/db';
import { retryWhileDbDown, runAgent, type RunDeps } from '@agentry/engine';
import { WORKER_LOST_MESSAGE, completeCronRun, runEventChannel, type LocalClaims } from '@agentry/runs';
import { contextFromTraceparent, inSpan, tracingEnabled, TRACER_NAME } from '@agentry/runtime';
import type { ListenerWatchdog } from './listener-watchdog.js';
import type { RunLeases } from './run-leases.js';
import type { SessionTurnGate } from './session-turns.js';

/**
 * How long a run event's publish is retried while Redis is not connected. The job that started
 * the run came over another connection, which may be back a moment before the publishing one
 * (ioredis retries every 2 s at most); past this the run fails (Redis is really away).
 */
const PUBLISH_RETRY_MS = 3_000;

export interface RunJobContext {
  db: Db;
  bus: Pick<Bus, 'pubsub'>;
  logger: Logger;
  watchdog: ListenerWatchdog;
  /** The liveness leases of the runs in hand: taken before a run is claimed. */
  leases: RunLeases;
  turns: SessionTurnGate;
  /** How long and how many of a chat run's events are kept for a client that resumes its stream (read per run: configuration is live). */
  keep: () => { retainMs: number; maxEvents: number };
  /** Runs in hand in this process, by id: `run-cancel` and the sweep look here. */
  running: Map<string, AbortController>;
  /** Runs whose insert claimed them for this process (in-process queue only): taken instead of claimed. */
  claims?: Pick<LocalClaims, 'take'>;
  /** What every run of this process shares, read per run (configuration is live; the run labels its token counts); the job adds its own publish and delivery hook. */
  agent: (run: RunRecord) => Omit<RunDeps, 'publish' | 'delivered'>;
}

/**
 * The `agent-run` job: claims the run and runs it, after the earlier turns of its session. Owns
 * the take-over rule: a run whose previous worker had streamed a token is failed with a clean
 * error (the client saw half an answer; running it again would answer twice), one that had not
 * is run again; a chat run nobody waits for any more is cancelled, not answered.
 */
/** Compiled once: Value.Check walks the schema on every call. */
const agentRunJob = Compile(AgentRunJob);

export function runJobHandler(ctx: RunJobContext): (job: Job<unknown>, shutdownSignal: AbortSignal) => Promise<void> {
  const { db, logger } = ctx;
  return async (job, shutdownSignal) => {
    if (!agentRunJob.Check(job.data)) throw new UnrecoverableJobError(`malformed agent-run payload: ${JSON.stringify(job.data)}`);
    const { runId } = job.data;
    const ctl = new AbortController();
    // Taken first, whatever happens next: a later try of this job claims from the row.
    const handed = ctx.claims?.take(runId);
    // Before the claim: a run whose lease another live worker holds is being run there (this job
    // is a stalled one's redelivery, or a gateway's hand-off that raced it), and is left alone.
    const taken = ctx.leases.take(runId, ctl);
    // A job that names its gateway's reply channel (v3) has that gateway's listeners asked for in
    // the same Redis write as the lease (the producer pipelines a tick's commands), not one round
    // trip after the claim. Asked a claim earlier: a gateway dying meanwhile is the watch's to
    // notice, as one dying just after a check made after the claim always was.
    const replyChannel = job.data.v === 3 ? PubSubChannels.replies(job.data.replyTo) : undefined;
    const early = replyChannel && { channel: replyChannel, listeners: ctx.watchdog.probe(replyChannel) };
    if (!(await taken)) {
      logger.info({ runId, jobId: job.id }, 'another worker holds this run (its lease is live): this job leaves it alone');
      return;
    }
    try {
      // Outside a session the run is claimed at once (one round trip), unless its insert in this
      // process claimed it already; a session's turn is only read here and claimed once the
      // earlier turns have ended.
      const first = handed ? { run: handed, claimed: true } : await retryWhileDbDown(logger, 'claim run', () => claimRunOutsideSession(db, runId));
      if (!first) throw new UnrecoverableJobError(`run ${runId} does not exist`);
      const traceparent = job.data.v === 1 ? undefined : job.data.traceparent;
      const parent = traceparent && tracingEnabled() ? contextFromTraceparent(traceparent) : undefined;
      try {
        if (!parent) return await handleClaimed(ctx, first, shutdownSignal, ctl, early);
        return await tracedRun(parent, first.run, job.attemptsMade, () => handleClaimed(ctx, first, shutdownSignal, ctl, early));
      } finally {
        if (first.run.source === 'cron' || first.run.source === 'heartbeat') await completeFire(ctx, runId);
      }
    } finally {
      ctx.leases.drop(runId, ctl);
    }
  };
}

/**
 * A traced run: the time it waited in the queue (from the row's creation, just before the
 * enqueue, to this pickup) is a span under the request's, and the run is a span under that one;
 * everything the run does (its model calls, tools, chain nodes, log lines) is under the run.
 */
function tracedRun(parent: Context, queued: RunRecord, attemptsMade: number, body: () => Promise<void>): Promise<void> {
  const tracer = trace.getTracer(TRACER_NAME);
  const wait = tracer.startSpan('queue wait agent-run', { kind: SpanKind.CONSUMER, startTime: queued.createdAt, attributes: { 'messaging.destination.name': 'agent-run', 'agentry.run.id': queued.id } }, parent);
  wait.end();
  const attributes = { 'agentry.run.id': queued.id, 'agentry.agent.id': queued.agentId, 'agentry.run.source': queued.source, 'agentry.job.attempt': attemptsMade + 1 };
  return inSpan('agent run', { attributes, parent: trace.setSpan(parent, wait) }, body);
}

/** The listener count of the reply channel a job named, asked for as the job started. */
interface EarlyProbe {
  channel: ReplyChannel;
  listeners: Promise<number | undefined>;
}

/** The claimed (or, in a session, read) run, carried on to its end. */
async function handleClaimed(ctx: RunJobContext, first: { run: RunRecord; claimed: boolean }, shutdownSignal: AbortSignal, ctl: AbortController, early?: EarlyProbe): Promise<void> {
  const { db, logger } = ctx;
  const runId = first.run.id;
  const queued = first.run;
  // The waiting gateway's reply channel (the row says which), else the run's own.
  const channel = runEventChannel(queued);
  // The job's channel is taken only when the row agrees (the row is the truth).
  const firstCheck = early?.channel === channel ? early.listeners : undefined;
  // A streamed chat's events are kept as well as published: its client may resume the stream on any gateway.
  const { retainMs, maxEvents } = ctx.keep();
  const streamed = queued.source === 'api' && (queued.request as { stream?: unknown } | null)?.stream === true;
  // A background response lives without its client: nobody listening is no reason to stop it.
  const watched = queued.source === 'api' && (queued.request as { background?: unknown } | null)?.background !== true;
  const keep = streamed ? { log: RunKeeps.events(runId), maxLen: maxEvents, ttlMs: retainMs } : undefined;
  const publish = eventPublisher(ctx.bus, channel, keep);
  if (!isActiveRunStatus(queued.status)) return;
  if (queued.streamed) return failTakenOver(ctx, queued, publish);
  ctx.running.set(runId, ctl);
  const onShutdown = () => ctl.abort(new Error('the worker is shutting down'));
  shutdownSignal.addEventListener('abort', onShutdown);
  try {
    if (watched && !(await ctx.watchdog.clientWaiting(channel, ctl.signal, firstCheck))) {
      logger.info({ runId }, 'nobody waits for this chat run any more (its client left before it started): cancelled, not answered');
      await retryWhileDbDown(logger, 'cancel run', () => finishRun(db, runId, { status: 'cancelled', error: 'the client was gone before the run started' }));
      return;
    }
    if (watched) ctx.watchdog.watch(runId, channel, ctl);
    if (queued.sessionId) await ctx.turns.waitForTurn(queued.sessionId, queued.seq, ctl.signal);
    const run = first.claimed ? queued : await retryWhileDbDown(logger, 'claim run', () => claimRun(db, runId));
    if (!run) return;
    // Run again (its first worker died before it streamed): its seq starts at 0 again, so what the
    // first try kept must go, or a resume would take both tries' events for one answer.
    if (keep && run.attempts > 1) await forgetFirstTry(ctx, runId, keep.log);
    if (ctl.signal.aborted) {
      await retryWhileDbDown(logger, 'cancel run', () => finishRun(db, runId, { status: 'cancelled', error: 'cancelled' }));
      return;
    }
    // The client has its answer and goes: nodes after the ai/agent node must not be cancelled for that.
    await runAgent({ ...ctx.agent(run), publish, delivered: () => ctx.watchdog.unwatch(runId) }, run, ctl.signal);
  } finally {
    shutdownSignal.removeEventListener('abort', onShutdown);
    ctx.running.delete(runId);
    ctx.watchdog.unwatch(runId);
    ctx.turns.runEnded();
  }
}

/**
 * The fire a cron or heartbeat run came from is completed by the worker that ends the run (its
 * delivery is the connector's to record). Nothing while the run is still going (this worker
 * stops, another takes it over); a failure is left to the scheduler's sweep.
 */
async function completeFire(ctx: RunJobContext, runId: string): Promise<void> {
  try {
    await completeCronRun(ctx.db, runId, ctx.logger);
  } catch (err) {
    ctx.logger.warn({ err, runId }, "could not complete the run's cron record; the scheduler's sweep will");
  }
}

/** Empties a re-run's kept log; a failure fails the run (Redis is away: it could not publish either). */
async function forgetFirstTry(ctx: RunJobContext, runId: string, log: string): Promise<void> {
  const deadline = Date.now() + PUBLISH_RETRY_MS;
  for (;;) {
    try {
      await ctx.bus.pubsub.clearKept(log);
      ctx.logger.info({ runId }, "run started again: the first try's kept events are dropped");
      return;
    } catch (err) {
      if (!hasCode(err, Errors.NOT_READY) || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Publishes on the run's channel, retrying for a moment while Redis reconnects. */
function eventPublisher(bus: Pick<Bus, 'pubsub'>, channel: ReturnType<typeof runEventChannel>, keep: KeepOptions | undefined): (event: RunEvent) => Promise<void> {
  return async (event) => {
    const deadline = Date.now() + PUBLISH_RETRY_MS;
    for (;;) {
      try {
        return await bus.pubsub.publish(channel, event, keep);
      } catch (err) {
        if (!hasCode(err, Errors.NOT_READY) || Date.now() >= deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
}

/** A run whose previous worker died after it started answering: failed, and its client told so. */
async function failTakenOver(ctx: RunJobContext, queued: RunRecord, publish: (event: RunEvent) => Promise<void>): Promise<void> {
  const message = WORKER_LOST_MESSAGE;
  const runId = queued.id;
  if (await retryWhileDbDown(ctx.logger, 'fail a taken-over run', () => finishRun(ctx.db, runId, { status: 'failed', output: queued.output, error: message }))) {
    await publish({ runId, seq: 0, type: 'error', message, status: 503 });
  }
}
