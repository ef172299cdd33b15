import { Value } from 'typebox/value';
import { AgentRunJob, PubSubChannels, QueueNames, type RunCancelMessage, type RunEvent } from '@agentry/contracts';
import { UnrecoverableJobError, type Consumer, type Job } from '@agentry/bus';
import { claimRun, claimRunOutsideSession, finishRun, hasEarlierActiveRun } from '@agentry/db';
import {
  AgentCache,
  ChainRunner,
  ModelProviders,
  ScriptSandbox,
  agentSystemPrompt,
  builtinTools,
  type ModelCallRequest,
  type ModelEvent,
  type ToolDefinition,
} from '@agentry/engine';
import { registerQueueDepth, serviceMetrics, type Registry, type Runtime } from '@agentry/runtime';
import { runAgent } from './run-agent.js';
import { channelSender } from './reply.js';

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

/**
 * Runs agents: consumes `agent-run`, executes the run, publishes its events on `run:<id>`.
 * Turns of one session run one at a time in arrival order (the run's `seq`). A client that goes
 * away cancels its run through `run-cancel`; stopping the worker aborts running runs at the
 * shutdown deadline. A job whose previous worker died is run again only if that worker had not
 * streamed a token yet; otherwise the client gets a clean error (the partial answer is lost).
 */
export async function startAgentWorker(runtime: Runtime, opts: AgentWorkerOptions = {}): Promise<void> {
  const { db, bus, logger } = runtime;
  const concurrency = opts.concurrency ?? runtime.config.current.worker.concurrency;
  const running = new Map<string, AbortController>();
  const finished = new EventTarget();

  let providers: ModelProviders | undefined;
  if (!opts.stream) {
    providers = new ModelProviders({ db: db.db, secrets: runtime.secrets, config: () => runtime.config.current, bus, logger });
    await providers.start();
  }
  const stream = measuredStream(opts.stream ?? ((req: ModelCallRequest) => providers!.stream(req)), runtime.metrics, () => runtime.config.current.models.default_provider);
  const jobDuration = serviceMetrics.jobDuration(runtime.metrics);
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));
  // One script sandbox (a small pool of worker threads) per process, for rule-chain tools.
  const chains = { runner: new ChainRunner(), sandbox: new ScriptSandbox({ workers: 2 }) };

  // Agent rows, kept until the gateway announces a change (`invalidate {area:'agents', id}`) or 5 s.
  const agents = new AgentCache(db.db);
  const unfollow = await agents.follow(bus.pubsub);

  const unsubscribe = await bus.pubsub.subscribe(PubSubChannels.runCancel, (msg) => {
    const runId = (msg as RunCancelMessage | null)?.runId;
    const ctl = runId ? running.get(runId) : undefined;
    if (ctl && !ctl.signal.aborted) ctl.abort(new Error('the client went away'));
  });

  const waitForTurn = async (sessionId: string, seq: number, signal: AbortSignal) => {
    const pollMs = opts.sessionPollMs ?? 100;
    while (await hasEarlierActiveRun(db.db, sessionId, seq)) {
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
    const publish = (event: RunEvent) => bus.pubsub.publish(PubSubChannels.run(runId), event);
    // Outside a session the run is claimed at once (one round trip); a session's turn is only
    // read here and claimed once the earlier turns have ended.
    const first = await claimRunOutsideSession(db.db, runId);
    if (!first) throw new UnrecoverableJobError(`run ${runId} does not exist`);
    const queued = first.run;
    if (queued.status !== 'queued' && queued.status !== 'running') return;
    if (queued.streamed) {
      const message = 'the worker running this request stopped after it had started answering; the partial answer is lost, please retry';
      if (await finishRun(db.db, runId, { status: 'failed', output: queued.output, error: message })) {
        await publish({ runId, seq: 0, type: 'error', message, status: 503 });
      }
      return;
    }
    const ctl = new AbortController();
    running.set(runId, ctl);
    const onShutdown = () => ctl.abort(new Error('the worker is shutting down'));
    shutdownSignal.addEventListener('abort', onShutdown);
    try {
      if (queued.sessionId) await waitForTurn(queued.sessionId, queued.seq, ctl.signal);
      const run = first.claimed ? queued : await claimRun(db.db, runId);
      if (!run) return;
      if (ctl.signal.aborted) {
        await finishRun(db.db, runId, { status: 'cancelled', error: 'cancelled' });
        return;
      }
      await runAgent(
        {
          db: db.db,
          logger,
          stream,
          publish,
          agent: (agentId) => agents.get(agentId),
          maxMessages: runtime.config.current.agents.defaults.session.max_messages,
          builtin: opts.builtin ?? builtinTools,
          chains,
          publishInvalidate: (message) => bus.pubsub.publish(PubSubChannels.invalidate, message),
          outboundQueue: bus.queue,
          sendMessage,
          metrics: runtime.metrics,
          systemPrompt: (config, agentId) => agentSystemPrompt(config, { db: db.db, agentId, logger }),
        },
        run,
        ctl.signal,
      );
    } finally {
      shutdownSignal.removeEventListener('abort', onShutdown);
      running.delete(runId);
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
