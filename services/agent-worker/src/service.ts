import { Value } from 'typebox/value';
import { AgentRunJob, PubSubChannels, QueueNames, type RunCancelMessage, type RunEvent } from '@agentry/contracts';
import { UnrecoverableJobError, type Consumer, type Job } from '@agentry/bus';
import { Errors, hasCode } from '@agentry/errors';
import { claimRun, claimRunOutsideSession, finishRun, hasEarlierActiveRun, isActiveRunStatus, listUnfinishedRuns } from '@agentry/db';
import {
  AgentCache,
  SkillsCache,
  ChainRunner,
  ModelProviders,
  ScriptSandbox,
  agentSystemPrompt,
  builtinTools,
  enqueueRun,
  type ModelCallRequest,
  type ModelEvent,
  type ToolDefinition,
} from '@agentry/engine';
import { registerQueueDepth, serviceMetrics, type Registry, type Runtime } from '@agentry/runtime';
import { runAgent } from './run-agent.js';
import { channelSender } from './reply.js';
import { retryWhileDbDown } from './db-retry.js';

/**
 * Checks in a row that find nobody listening on a chat run's channel before it is cancelled. More
 * than one, so that a gateway re-subscribing after a Redis blip (ioredis reconnects within 2 s)
 * does not lose its run; a failed check resets the count and never cancels.
 */
const LISTENER_MISSES = 3;
/**
 * Over Redis, how long a chat run about to start must find nobody listening before it is taken
 * for orphaned: longer than a gateway's subscriber needs to come back after a Redis blip (ioredis
 * retries every 2 s at most), which is when queued jobs are handed out again. In-process, a
 * subscription cannot blink, and one look is the truth.
 */
const START_GRACE_MS = 3_000;
/** Runs the sweep enqueues again per pass at most. */
const SWEEP_BATCH = 100;
/**
 * How long a run event's publish is retried while Redis is not connected. The job that started
 * the run came over another connection, which may be back a moment before the publishing one
 * (ioredis retries every 2 s at most); past this the run fails (Redis is really away).
 */
const PUBLISH_RETRY_MS = 3_000;

export interface AgentWorkerOptions {
  /** Runs at once in this process (default `worker.concurrency`). */
  concurrency?: number;
  /** How often a turn waiting for an earlier turn of its session looks again (default 100 ms). */
  sessionPollMs?: number;
  /** Built-in tools by name (default: the engine's built-ins). */
  builtin?: Record<string, ToolDefinition>;
  /** Tests: a model client instead of the configured providers. */
  stream?: (req: ModelCallRequest) => AsyncIterable<ModelEvent>;
}

/** A running chat run whose client's gateway is checked for (see LISTENER_MISSES). */
interface Watched {
  ctl: AbortController;
  misses: number;
}

/**
 * Runs agents: consumes `agent-run`, executes the run, publishes its events on `run:<id>`.
 * Turns of one session run one at a time in arrival order (the run's `seq`). A client that goes
 * away cancels its run through `run-cancel`; stopping the worker aborts running runs at the
 * shutdown deadline. A job whose previous worker died is run again only if that worker had not
 * streamed a token yet; otherwise the client gets a clean error (the partial answer is lost).
 *
 * Failures it bounds: a chat run nobody listens for any more (its gateway died, so no cancel
 * can come) is cancelled after LISTENER_MISSES checks, and one nobody listens for when it is
 * taken (queued across a restart) is cancelled without being run; statements that decide a
 * run's fate are retried while the database is unreachable; and a sweep enqueues again runs
 * still queued or running long after they were created (a job lost or given up while a backend
 * was away); the job id is the run id, so a run whose job still exists is left alone.
 */
export async function startAgentWorker(runtime: Runtime, opts: AgentWorkerOptions = {}): Promise<void> {
  const { db, bus, logger } = runtime;
  const concurrency = opts.concurrency ?? runtime.config.current.worker.concurrency;
  const running = new Map<string, AbortController>();
  const finished = new EventTarget();

  let providers: ModelProviders | undefined;
  if (!opts.stream) {
    const r = runtime.config.current.reliability;
    providers = new ModelProviders({
      db: db.db,
      secrets: runtime.secrets,
      config: () => runtime.config.current,
      bus,
      logger,
      timeouts: {
        connectMs: r.provider_connect_ms,
        firstTokenMs: r.provider_first_token_ms,
        totalMs: r.provider_total_ms,
        retries: r.provider_retries,
        backoffMs: r.provider_backoff_ms,
      },
    });
    await providers.start();
  }
  const stream = measuredStream(opts.stream ?? ((req: ModelCallRequest) => providers!.stream(req)), runtime.metrics, () => runtime.config.current.models.default_provider);
  const jobDuration = serviceMetrics.jobDuration(runtime.metrics);
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));
  // One script sandbox (a small pool of worker threads) per process, for rule-chain tools.
  const chains = { runner: new ChainRunner(), sandbox: new ScriptSandbox({ workers: runtime.config.current.worker.script_workers }) };

  // Agent rows, kept until the gateway announces a change (`invalidate {area:'agents', id}`) or 5 s.
  const agents = new AgentCache(db.db);
  // The skills of each agent for its system prompt, until the gateway announces a skill change.
  const skills = new SkillsCache(db.db);
  const unfollow = await Promise.all([agents.follow(bus.pubsub), skills.follow(bus.pubsub)]).then(
    (stops) => () => Promise.all(stops.map((stop) => stop())).then(() => undefined),
  );

  const unsubscribe = await bus.pubsub.subscribe(PubSubChannels.runCancel, (msg) => {
    const runId = (msg as RunCancelMessage | null)?.runId;
    const ctl = runId ? running.get(runId) : undefined;
    if (ctl && !ctl.signal.aborted) ctl.abort(new Error('the client went away'));
  });

  // Chat runs in hand, checked for a listening gateway every `reliability.listener_check_ms`.
  const watched = new Map<string, Watched>();
  const checkListeners = async () => {
    const entries = [...watched];
    if (entries.length === 0) return;
    let counts: number[];
    try {
      counts = await bus.pubsub.listeners(entries.map(([runId]) => PubSubChannels.run(runId)));
    } catch (err) {
      // Unknown is not "nobody": start counting again once the broker answers.
      for (const [, w] of entries) w.misses = 0;
      logger.debug({ err: (err as Error).message }, 'listener check failed');
      return;
    }
    entries.forEach(([runId, w], i) => {
      if ((counts[i] ?? 0) > 0) {
        w.misses = 0;
        return;
      }
      w.misses += 1;
      if (w.misses >= LISTENER_MISSES && !w.ctl.signal.aborted) {
        logger.info({ runId, checks: w.misses }, 'no gateway listens for this chat run any more (its client is gone); cancelling it');
        w.ctl.abort(new Error('nobody is waiting for this run any more'));
      }
    });
  };
  /**
   * Whether a gateway still waits for this chat run before it starts. A chat's client is gone
   * when nobody listens on the run's channel: its gateway died or restarted (the run then comes
   * back through the sweep or a surviving job), and an answer now would only be committed into
   * the session under the user's retry. False only after LISTENER_MISSES checks in a row (and,
   * over Redis, START_GRACE_MS) found nobody; a check that fails, or checks switched off, count
   * as someone waiting.
   */
  const clientWaiting = async (runId: string, signal: AbortSignal): Promise<boolean> => {
    const graceUntil = Date.now() + (bus.kind === 'redis' ? START_GRACE_MS : 0);
    for (let misses = 0; ; ) {
      const everyMs = runtime.config.current.reliability.listener_check_ms;
      if (everyMs <= 0 || signal.aborted) return true;
      let count: number;
      try {
        [count = 0] = await bus.pubsub.listeners([PubSubChannels.run(runId)]);
      } catch {
        return true;
      }
      if (count > 0) return true;
      misses += 1;
      if (misses >= LISTENER_MISSES && Date.now() >= graceUntil) return false;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  };

  let stopped = false;
  const timers: { listeners?: NodeJS.Timeout; sweep?: NodeJS.Timeout } = {};
  const scheduleListenerCheck = () => {
    if (stopped) return;
    const everyMs = runtime.config.current.reliability.listener_check_ms;
    // 0: off, but looked at again each second, should the configuration change.
    timers.listeners = setTimeout(() => void (everyMs > 0 ? checkListeners() : Promise.resolve()).finally(scheduleListenerCheck), everyMs || 1000);
    timers.listeners.unref();
  };
  scheduleListenerCheck();

  const sweep = async () => {
    const { worker, reliability } = runtime.config.current;
    // Older than a stall period: a run whose job is merely waiting for a stall check is not touched.
    const olderThanMs = Math.max(worker.stall_timeout_ms, reliability.run_sweep_ms);
    const stale = await listUnfinishedRuns(db.db, { olderThanMs, limit: SWEEP_BATCH });
    let enqueued = 0;
    for (const run of stale) {
      if (running.has(run.id)) continue;
      await enqueueRun(bus.queue, run.id);
      enqueued += 1;
    }
    if (enqueued > 0) logger.debug({ runs: enqueued }, 'sweep: unfinished runs enqueued again (a run whose job exists is left alone)');
  };
  const scheduleSweep = () => {
    if (stopped) return;
    timers.sweep = setTimeout(
      () => void sweep().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'run sweep failed')).finally(scheduleSweep),
      runtime.config.current.reliability.run_sweep_ms,
    );
    timers.sweep.unref();
  };
  scheduleSweep();

  const waitForTurn = async (sessionId: string, seq: number, signal: AbortSignal) => {
    const pollMs = opts.sessionPollMs ?? 100;
    while (await retryWhileDbDown(logger, 'session turn check', () => hasEarlierActiveRun(db.db, sessionId, seq))) {
      if (signal.aborted) return;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, pollMs);
        function done() {
          clearTimeout(t);
          finished.removeEventListener('finished', done);
          resolve();
        }
        finished.addEventListener('finished', done);
      });
    }
  };

  const sendMessage = channelSender({ db: db.db, queue: bus.queue, events: bus.pubsub });
  const handleRun = async (job: Job<unknown>, shutdownSignal: AbortSignal): Promise<void> => {
    if (!Value.Check(AgentRunJob, job.data)) throw new UnrecoverableJobError(`malformed agent-run payload: ${JSON.stringify(job.data)}`);
    const { runId } = job.data;
    const publish = async (event: RunEvent) => {
      const deadline = Date.now() + PUBLISH_RETRY_MS;
      for (;;) {
        try {
          return await bus.pubsub.publish(PubSubChannels.run(runId), event);
        } catch (err) {
          if (!hasCode(err, Errors.NOT_READY) || Date.now() >= deadline) throw err;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };
    // Outside a session the run is claimed at once (one round trip); a session's turn is only
    // read here and claimed once the earlier turns have ended.
    const first = await retryWhileDbDown(logger, 'claim run', () => claimRunOutsideSession(db.db, runId));
    if (!first) throw new UnrecoverableJobError(`run ${runId} does not exist`);
    const queued = first.run;
    if (!isActiveRunStatus(queued.status)) return;
    if (queued.streamed) {
      const message = 'the worker running this request stopped after it had started answering; the partial answer is lost, please retry';
      if (await retryWhileDbDown(logger, 'fail a taken-over run', () => finishRun(db.db, runId, { status: 'failed', output: queued.output, error: message }))) {
        await publish({ runId, seq: 0, type: 'error', message, status: 503 });
      }
      return;
    }
    const ctl = new AbortController();
    running.set(runId, ctl);
    const onShutdown = () => ctl.abort(new Error('the worker is shutting down'));
    shutdownSignal.addEventListener('abort', onShutdown);
    try {
      if (queued.source === 'api' && !(await clientWaiting(runId, ctl.signal))) {
        logger.info({ runId }, 'nobody waits for this chat run any more (its client left before it started): cancelled, not answered');
        await retryWhileDbDown(logger, 'cancel run', () => finishRun(db.db, runId, { status: 'cancelled', error: 'the client was gone before the run started' }));
        return;
      }
      if (queued.source === 'api') watched.set(runId, { ctl, misses: 0 });
      if (queued.sessionId) await waitForTurn(queued.sessionId, queued.seq, ctl.signal);
      const run = first.claimed ? queued : await retryWhileDbDown(logger, 'claim run', () => claimRun(db.db, runId));
      if (!run) return;
      if (ctl.signal.aborted) {
        await retryWhileDbDown(logger, 'cancel run', () => finishRun(db.db, runId, { status: 'cancelled', error: 'cancelled' }));
        return;
      }
      await runAgent(
        {
          db: db.db,
          logger,
          stream,
          publish,
          agent: (agentId) => agents.get(agentId),
          secrets: runtime.secrets,
          maxMessages: runtime.config.current.agents.defaults.session.max_messages,
          maxFileBytes: runtime.config.current.workspace.max_file_bytes,
          allowUnsandboxedBash: () => runtime.config.current.security.allowUnsandboxedBash,
          builtin: opts.builtin ?? builtinTools,
          chains,
          publishInvalidate: (message) => bus.pubsub.publish(PubSubChannels.invalidate, message),
          outboundQueue: bus.queue,
          sendMessage,
          metrics: runtime.metrics,
          systemPrompt: (config, agentId) => agentSystemPrompt(config, { db: db.db, agentId, logger, loadSkills: (id) => skills.get(id) }),
          // The client has its answer and goes: nodes after the ai/agent node must not be cancelled for that.
          delivered: () => watched.delete(runId),
        },
        run,
        ctl.signal,
      );
    } finally {
      shutdownSignal.removeEventListener('abort', onShutdown);
      running.delete(runId);
      watched.delete(runId);
      finished.dispatchEvent(new Event('finished'));
    }
  };

  const consumer: Consumer = bus.queue.consume<unknown>(
    QueueNames.agentRun,
    async (job, shutdownSignal) => {
      const jobStarted = Date.now();
      let outcome = 'ok';
      try {
        await handleRun(job, shutdownSignal);
      } catch (err) {
        outcome = 'error';
        throw err;
      } finally {
        jobDuration.observe({ queue: QueueNames.agentRun, outcome }, (Date.now() - jobStarted) / 1000);
      }
    },
    {
      concurrency,
      stallMs: runtime.config.current.worker.stall_timeout_ms,
      onFailed: (job, err, willRetry) => logger.warn({ jobId: job.id, err: err.message, willRetry }, 'agent-run job failed'),
    },
  );

  runtime.lifecycle.add('agent-worker', async (remainingMs) => {
    stopped = true;
    clearTimeout(timers.listeners);
    clearTimeout(timers.sweep);
    await consumer.close(Math.max(0, remainingMs - 500));
    await unsubscribe();
    await unfollow();
    await providers?.close();
    await chains.sandbox.close();
    logger.info('agent-worker stopped');
  });
  runtime.health.register('agent-worker', async () => {
    if (runtime.lifecycle.stopping) throw new Error('stopping');
  });
  logger.info({ bus: bus.kind, database: db.dialect, concurrency }, 'agent-worker started');
}

/**
 * The model client with provider metrics: calls by outcome and time to the first event, labelled
 * with the provider asked for (failover inside the call is the provider layer's business).
 */
function measuredStream(
  inner: (req: ModelCallRequest) => AsyncIterable<ModelEvent>,
  metrics: Registry,
  defaultProvider: () => string,
): (req: ModelCallRequest) => AsyncIterable<ModelEvent> {
  const calls = serviceMetrics.providerCalls(metrics);
  const ttft = serviceMetrics.providerTtft(metrics);
  return async function* (req) {
    const provider = req.provider || defaultProvider() || 'default';
    const started = Date.now();
    let first = true;
    try {
      for await (const event of inner(req)) {
        if (first) {
          first = false;
          ttft.observe({ provider }, (Date.now() - started) / 1000);
        }
        yield event;
      }
      calls.inc({ provider, outcome: 'ok' });
    } catch (err) {
      calls.inc({ provider, outcome: 'error' });
      throw err;
    }
  };
}
