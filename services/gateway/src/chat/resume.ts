import type { FastifyReply, FastifyRequest } from 'fastify';
import { RunKeeps } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { getRun, getRunOutcome, isFinalRunStatus, type RunRecord } from '@agentry/db';
import { cancelRun, resumeRunEvents, RunRelay } from '@agentry/runs';
import { serviceMetrics } from '@agentry/runtime';
import { sessionOwner } from '../auth/ownership.js';
import type { GatewayDeps } from '../deps.js';
import { cancelUnlessResumed, runLease, type RunControl } from './chat-run.js';
import { streamCompletion } from './openai-answer.js';

/**
 * Whether a stream's client asked for its run to outlive a dropped connection
 * (`X-Agentry-Resumable: true`; Agentry's client, CLI and web UI send it). Any other client's
 * disconnect cancels the run at once, as OpenAI ends a stream whose connection closed: a plain
 * SDK can never resume, so waiting for it would only spend the provider's tokens.
 */
export function resumptionRequested(req: FastifyRequest): boolean {
  return String(req.headers['x-agentry-resumable'] ?? '').trim().toLowerCase() === 'true';
}

/** Where a client's stream stopped: the run and the seq of the last event it got (-1: none). */
export interface ResumePoint {
  runId: string;
  after: number;
}

/**
 * `Last-Event-ID` as the streams write it (`<runId>:<seq>`). Anything else is refused rather
 * than taken for a new request: the client meant to resume, and a second run would answer twice.
 */
export function parseLastEventId(value: string): ResumePoint {
  const m = /^([0-9a-f]{32}):(\d{1,9})$/.exec(value.trim());
  if (!m) throw new Errors.VALIDATION(`Last-Event-ID must be "<runId>:<seq>" as a stream's "id:" lines give it (got ${JSON.stringify(value.slice(0, 80))})`);
  return { runId: m[1]!, after: Number(m[2]) };
}

/**
 * The run a client may resume: its own chat run. Another principal's run, a run that is not a
 * chat's (cron fires and channel messages keep no events) and an unknown one are all the same
 * 404, so run ids cannot be probed.
 */
export async function resumableRun(deps: GatewayDeps, req: FastifyRequest, runId: string): Promise<RunRecord> {
  const run = await getRun(deps.db.db, runId);
  if (!run || run.source !== 'api' || run.principal !== sessionOwner(req.principal)) throw new Errors.NOT_FOUND(`run "${runId}"`);
  return run;
}

/**
 * The run a chat or Responses request resumes, when it carries `Last-Event-ID` (the client sends
 * the same request again after its stream dropped); undefined for a new request. Refused without
 * `stream: true` (a new run would answer the question twice) or for another agent's run.
 */
export async function resumeRequested(
  deps: GatewayDeps,
  req: FastifyRequest,
  body: { model: string; stream?: boolean | null },
): Promise<{ run: RunRecord; after: number } | undefined> {
  const lastEventId = req.headers['last-event-id'];
  if (typeof lastEventId !== 'string' || lastEventId === '') return undefined;
  if (body.stream !== true) throw new Errors.VALIDATION('Last-Event-ID resumes a stream: send the request again with "stream": true');
  const { runId, after } = parseLastEventId(lastEventId);
  const run = await resumableRun(deps, req, runId);
  if (run.agentId !== body.model) throw new Errors.VALIDATION(`Last-Event-ID names a run of agent "${run.agentId}", not of "${body.model}"`);
  return { run, after };
}

/** Whether a run was asked for as a background response (it lives without its client). */
export function isBackgroundRun(run: Pick<RunRecord, 'request'>): boolean {
  return (run.request as { background?: unknown } | null)?.background === true;
}

/** A resumed stream's hold on its run: cancelling it goes through the same grace as the first client's. */
class ResumedRun implements RunControl {
  #settled = false;
  constructor(
    private readonly deps: GatewayDeps,
    private readonly req: FastifyRequest,
    readonly runId: string,
  ) {}

  settle(): void {
    this.#settled = true;
  }

  async cancel(why: string): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    this.req.log.info({ runId: this.runId, why }, 'resumed run cancelled by the gateway');
    await cancelRun({ db: this.deps.db.db, pubsub: this.deps.bus.pubsub }, this.runId, why);
  }
}

/** What writes a resumed stream in its API's shape (chat chunks, Responses events) from the relay. */
export type ResumedWriter = (control: RunControl, relay: RunRelay) => Promise<unknown>;

/**
 * Streams a run's events after `after` to a client that reconnected, from whatever gateway it
 * reached: the kept events it missed, then the live rest, each once and in order, ending as the
 * original stream would have ([DONE], `response.completed`, or the run's error). A finished run
 * whose events are no longer kept is answered from its stored output when the client had
 * nothing yet, and 410 otherwise (what it missed cannot be told apart from what it has).
 */
export async function resumeStream(
  deps: GatewayDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  run: RunRecord,
  after: number,
  write: ResumedWriter,
  /**
   * `clientHasEvents`: the client has some of the run's output though `after` is -1 (a Responses
   * `starting_after`, counted in the answer's own events: all are replayed and the writer skips
   * what it has), so a run whose events are gone cannot be answered from its stored output.
   * `reader`: the client only reads the run (`GET /responses/{id}?stream=true`): its leaving
   * cancels nothing, whoever else is waiting for the answer.
   */
  opts: { clientHasEvents?: boolean; reader?: boolean } = {},
): Promise<FastifyReply> {
  const { resume_retain_ms: retainMs, relay_check_ms: checkMs } = deps.config.current.reliability;
  // Counted before anything else: the gateway whose client left sees it after its grace and lets
  // the run live. A resume refused below (410) counts too: its client was told the answer will
  // be in the session, so the run must finish.
  const seen = await deps.bus.count(RunKeeps.resumes(run.id), 1, retainMs);
  const events = await resumeRunEvents(deps.bus.pubsub, run);
  const lease = isFinalRunStatus(run.status) ? undefined : runLease(deps, run.id);
  try {
    const finished = isFinalRunStatus(run.status);
    // Nothing kept of a run the client has events of, finished or not: the log expired (a silence
    // longer than the retention) or Redis lost it, and the next live event would look like a gap.
    const lost = events.firstKept === undefined ? after >= 0 || (opts.clientHasEvents === true && finished) : after + 1 < events.firstKept;
    if (lost) {
      throw new Errors.GONE(
        `the events of run "${run.id}" after ${after} are no longer kept (they are kept ${Math.round(retainMs / 1000)} s after the run's last one); its answer is in the session's messages`,
      );
    }
    const control = new ResumedRun(deps, req, run.id);
    // A background response lives without its clients, and a mere reader holds no run: its leaving
    // (or a gap in its stream) ends only its stream.
    const holdsNoRun = isBackgroundRun(run) || opts.reader === true;
    if (holdsNoRun) control.settle();
    const gone = new AbortController();
    reply.raw.once('close', () => {
      gone.abort();
      if (!reply.raw.writableFinished && !holdsNoRun) void cancelUnlessResumed(deps, control, seen, 'the client went away', req.log);
    });
    const relay = new RunRelay(events.queue, {
      readRun: () => getRunOutcome(deps.db.db, run.id),
      // Nothing kept of a finished run: its stored answer is all there is, at once.
      checkMs: () => (finished && events.firstKept === undefined ? 0 : checkMs),
      closed: gone.signal,
      lease,
    });
    req.log.info({ runId: run.id, after, resumes: seen }, 'stream resumed');
    const streams = serviceMetrics.activeStreams(deps.metrics);
    streams.inc();
    reply.raw.once('close', () => streams.dec());
    await write(control, relay);
    return reply;
  } finally {
    lease?.watch.stop();
    await events.stop().catch((err: unknown) => req.log.warn({ err }, 'unsubscribe failed'));
  }
}

/** A resumed stream of chat completion chunks (`GET /runs/{id}/events`, or the chat request again). */
export function resumeChatStream(
  deps: GatewayDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  run: RunRecord,
  after: number,
  opts: { agui: boolean; includeUsage: boolean; heartbeatMs: number },
): Promise<FastifyReply> {
  const meta = { id: `chatcmpl-${run.id}`, created: Math.floor(run.createdAt.getTime() / 1000), model: run.agentId };
  return resumeStream(deps, req, reply, run, after, (control, relay) => streamCompletion(control, req, reply, relay, meta, { ...opts, after }));
}
