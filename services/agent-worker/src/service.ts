import { PLATFORMS, PubSubChannels, QueueNames, type RunCancelMessage } from '@agentry/contracts';
import { UnrecoverableJobError, type Consumer, type Job } from '@agentry/bus';
import type { Span } from '@opentelemetry/api';
import { ChainRunner, ModelProviders, ScriptSandbox, builtinTools, estimateCallTokens, markSpanFailed, startChildSpan, modelInfoFromDb, type ModelCallRequest, type ModelEvent, type ModelInfo, type RunDeps, type RunMetrics, type ToolDefinition } from '@agentry/engine';
import { AgentCache, LocalClaims, OwnerAdminCache, SkillsCache, TokenBudgets } from '@agentry/runs';
import { FINAL_RUN_STATUSES, getUser, type RunRecord } from '@agentry/db';
import { ownerIsAdmin } from '@agentry/definitions';
import { registerQueueDepth, serviceMetrics, type Registry, type Runtime } from '@agentry/runtime';
import { channelSender, outboxReplies } from './reply.js';
import { ListenerWatchdog } from './listener-watchdog.js';
import { RunLeases } from './run-leases.js';
import { RunSweeper } from './run-sweeper.js';
import { SessionTurnGate } from './session-turns.js';
import { runJobHandler } from './run-job.js';
import { compactJobHandler } from './compact-job.js';
import { usageRecorder, type UsageRecorder, type UsageRun } from './usage.js';

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
 *
 * This file wires the named parts: the job handler (run-job.ts, with the take-over rule), the
 * per-session turn gate (session-turns.ts), the listener watchdog (listener-watchdog.ts: chat
 * runs nobody waits for any more are cancelled) and the run sweeper (run-sweeper.ts: runs whose
 * job was lost are enqueued again).
 */
export async function startAgentWorker(runtime: Runtime, opts: AgentWorkerOptions = {}): Promise<void> {
  const { bus, logger } = runtime;
  const concurrency = opts.concurrency ?? runtime.config.current.worker.concurrency;
  const running = new Map<string, AbortController>();
  registerQueueDepth(runtime.metrics, Object.values(QueueNames), (q) => bus.queue.counts(q));
  const usage = usageRecorder({ db: runtime.db.db, logger });
  const budgets = new TokenBudgets({
    db: runtime.db.db,
    counter: bus,
    logger,
    channelPeerTokensPerDay: () => runtime.config.current.security.budgets.channelPeerTokensPerDay,
    channelAccountTokensPerDay: () => runtime.config.current.security.budgets.channelAccountTokensPerDay,
  });
  const unfollowBudgets = await budgets.follow(bus.pubsub);
  const models = await modelClient(runtime, opts.stream, usage, budgets);
  const shared = await sharedParts(runtime);
  // In-process queue: a chat run's insert may claim it for this worker (LocalClaims).
  const claims = bus.kind === 'memory' ? LocalClaims.of(bus.queue) : undefined;
  const unsubscribe = await bus.pubsub.subscribe(PubSubChannels.runCancel, (msg) => cancelRunningHere(running, claims, msg));
  const reliability = () => runtime.config.current.reliability;
  const watchdog = new ListenerWatchdog(bus, logger, () => reliability().listener_check_ms, () => reliability().resume_grace_ms);
  watchdog.start();
  const sweeper = runSweeper(runtime, running);
  sweeper.start();
  // Leases matter only across processes: in embedded mode the worker dies with its gateway.
  const leases = new RunLeases(bus, logger, () => (bus.kind === 'redis' ? reliability().run_lease_ms : 0), runtime.config.current.worker.stall_timeout_ms);
  leases.start();
  const handleRun = runJobHandler({
    db: runtime.db.db,
    bus,
    logger,
    watchdog,
    leases,
    turns: new SessionTurnGate(runtime.db.db, logger, opts.sessionPollMs ?? 100),
    running,
    claims,
    keep: () => ({ retainMs: reliability().resume_retain_ms, maxEvents: reliability().resume_max_events }),
    agent: sharedRunDeps(runtime, { ...shared, stream: models.stream, modelInfo: models.modelInfo, builtin: opts.builtin ?? builtinTools }),
  });
  const handleCompaction = compactJobHandler({
    db: runtime.db.db,
    bus,
    logger,
    stream: models.stream,
    modelInfo: models.modelInfo,
    drainUsage: () => usage.drain(),
    settings: () => {
      const { worker, agents } = runtime.config.current;
      return { compaction: agents.defaults.session.compaction, maxMessages: agents.defaults.session.max_messages, maxRunMs: worker.max_run_ms };
    },
  });
  const slots = { busy: 0 };
  const consumer = consumeRuns(runtime, agentQueueJobs(logger, handleRun, handleCompaction), concurrency, slots);
  const unserve = claims?.serve(() => concurrency - slots.busy);

  runtime.lifecycle.add('agent-worker', async (remainingMs) => {
    unserve?.();
    watchdog.stop();
    await sweeper.stop();
    await consumer.close(Math.max(0, remainingMs - 500));
    // Renewed until the last job is done or back in the queue: a gateway must not take a run finishing here for dead.
    await leases.stop();
    await unsubscribe();
    await shared.unfollow();
    await unfollowBudgets();
    await models.close();
    await usage.drain();
    await shared.chains.sandbox.close();
    logger.info('agent-worker stopped');
  });
  runtime.health.register('agent-worker', async () => {
    if (runtime.lifecycle.stopping) throw new Error('stopping');
  });
  logger.info({ bus: bus.kind, database: runtime.db.dialect, concurrency }, 'agent-worker started');
}

/** What the runs of this process share: the chain runner and script sandbox, and the caches of agents and skills. */
async function sharedParts(runtime: Runtime): Promise<{ chains: { runner: ChainRunner; sandbox: ScriptSandbox }; agents: AgentCache; skills: SkillsCache; owners: OwnerAdminCache; unfollow: () => Promise<void> }> {
  const { db, bus } = runtime;
  // One script sandbox (a small pool of worker threads) per process, for rule-chain tools.
  const chains = { runner: new ChainRunner({ globals: () => runtime.config.current.worker.chain_globals, maxFlowDepth: runtime.config.current.worker.max_call_depth }), sandbox: new ScriptSandbox({ workers: runtime.config.current.worker.script_workers }) };
  // Agent rows, kept until the gateway announces a change (`invalidate {area:'agents', id}`) or 5 s.
  const agents = new AgentCache(db.db);
  // The skills of each agent for its system prompt, until the gateway announces a skill change.
  const skills = new SkillsCache(db.db);
  // Whether an agent's owner is an admin: a user row read per run before (a statement of five
  // in embedded mode), now until a users or config change is announced, or 5 s.
  const owners = new OwnerAdminCache((owner) => ownerIsAdmin(db.db, owner));
  const unfollow = await Promise.all([agents.follow(bus.pubsub), skills.follow(bus.pubsub), owners.follow(bus.pubsub)]).then(
    (stops) => () => Promise.all(stops.map((stop) => stop())).then(() => undefined),
  );
  return { chains, agents, skills, owners, unfollow };
}

/**
 * `run-cancel`: a run in hand here whose client went away is aborted; one its insert claimed for
 * this worker and whose job has not started is forgotten, so that its job claims from the row
 * (cancelled by then: not run).
 */
function cancelRunningHere(running: Map<string, AbortController>, claims: LocalClaims | undefined, { runId }: RunCancelMessage): void {
  if (runId) claims?.drop(runId);
  const ctl = runId ? running.get(runId) : undefined;
  if (ctl && !ctl.signal.aborted) ctl.abort(new Error('the client went away'));
}

function runSweeper(runtime: Runtime, running: Map<string, AbortController>): RunSweeper {
  return new RunSweeper({
    db: runtime.db.db,
    queue: runtime.bus.queue,
    logger: runtime.logger,
    metrics: runtime.metrics,
    timing: () => ({ stallMs: runtime.config.current.worker.stall_timeout_ms, sweepMs: runtime.config.current.reliability.run_sweep_ms }),
    isRunningHere: (runId) => running.has(runId),
  });
}

type JobHandlerOf = (job: Job<unknown>, shutdownSignal: AbortSignal) => Promise<void>;

/**
 * The `agent-run` queue's jobs by kind: runs, and forced compactions. A kind this worker does
 * not know (a newer deploy's) fails for good with a log line: no retry would teach it.
 */
function agentQueueJobs(logger: Runtime['logger'], handleRun: JobHandlerOf, handleCompaction: JobHandlerOf): JobHandlerOf {
  return async (job, shutdownSignal) => {
    const type = (job.data as { type?: unknown } | null)?.type;
    if (type === 'agent-run') return handleRun(job, shutdownSignal);
    if (type === 'session-compact') return handleCompaction(job, shutdownSignal);
    logger.warn({ jobId: job.id, type }, 'agent-run queue: a job of a kind this worker does not know; dropped');
    throw new UnrecoverableJobError(`unknown job kind on the agent-run queue: ${JSON.stringify(type)}`);
  };
}

/** Consumes `agent-run`, measuring each job; `slots.busy` counts the jobs in hand. */
function consumeRuns(runtime: Runtime, handleRun: JobHandlerOf, concurrency: number, slots: { busy: number }): Consumer {
  const { bus, logger } = runtime;
  const jobDuration = serviceMetrics.jobDuration(runtime.metrics);
  return bus.queue.consume(
    QueueNames.agentRun,
    async (job, shutdownSignal) => {
      const jobStarted = Date.now();
      let outcome = 'ok';
      slots.busy += 1;
      try {
        await handleRun(job, shutdownSignal);
      } catch (err) {
        outcome = 'error';
        throw err;
      } finally {
        slots.busy -= 1;
        jobDuration.observe({ queue: QueueNames.agentRun, outcome }, (Date.now() - jobStarted) / 1000);
      }
    },
    {
      concurrency,
      stallMs: runtime.config.current.worker.stall_timeout_ms,
      onFailed: (job, err, willRetry) => logger.warn({ jobId: job.id, runId: (job.data as { runId?: unknown } | null)?.runId, err: err.message, willRetry }, 'agent-run job failed'),
    },
  );
}

/** What every run of this process shares, read per run: configuration changes live. */
function sharedRunDeps(
  runtime: Runtime,
  parts: {
    stream: MeasuredStream;
    modelInfo: RunDeps['modelInfo'];
    chains: RunDeps['chains'];
    agents: AgentCache;
    skills: SkillsCache;
    owners: OwnerAdminCache;
    builtin: Record<string, ToolDefinition>;
  },
): (run: RunRecord) => Omit<RunDeps, 'publish' | 'delivered'> {
  const { db, bus, logger } = runtime;
  const sendMessage = channelSender({ db: db.db, queue: bus.queue, events: bus.pubsub });
  const replies = outboxReplies(bus.queue);
  const metrics = runMetrics(runtime.metrics);
  return (run) => ({
    db: db.db,
    logger,
    // Every model call of the run (sub-agents and chain nodes included) counts its tokens for the run's agent and principal.
    stream: (req) => parts.stream(req, run),
    agent: (agentId) => parts.agents.get(agentId),
    ownerIsAdmin: (owner) => parts.owners.isAdmin(owner),
    loadSkills: (agentId) => parts.skills.get(agentId),
    secrets: runtime.secrets,
    maxMessages: runtime.config.current.agents.defaults.session.max_messages,
    compaction: () => runtime.config.current.agents.defaults.session.compaction,
    modelInfo: parts.modelInfo,
    maxFileBytes: runtime.config.current.workspace.max_file_bytes,
    allowUnsandboxedBash: () => runtime.config.current.security.allowUnsandboxedBash,
    workspaceByteLimit: async (agentId) => {
      // Held as the workspace routes hold a plain user: an agent whose owner is a user without
      // the admin role (on a server that requires auth); admins' agents and file imports are not.
      const security = runtime.config.current.security;
      if (!security.requireAuth) return undefined;
      const owner = (await parts.agents.get(agentId))?.owner;
      const user = owner === undefined ? undefined : await getUser(db.db, owner);
      return user && user.role !== 'admin' ? security.quotas.workspaceBytesPerAgent : undefined;
    },
    bounds: () => {
      const w = runtime.config.current.worker;
      return { maxCallDepth: w.max_call_depth, maxRunMs: w.max_run_ms, maxModelCalls: w.max_model_calls_per_run, maxToolCalls: w.max_tool_calls_per_run, maxToolTimeoutMs: w.max_tool_timeout_ms };
    },
    builtin: parts.builtin,
    chains: parts.chains,
    publishInvalidate: (message) => bus.pubsub.publish(PubSubChannels.invalidate, message),
    replies,
    sendMessage,
    metrics,
  });
}

/** Run counts and latencies in the process's registry. */
function runMetrics(registry: Registry): RunMetrics {
  // Every status and source starts at 0: a rate (and AgentryRunsFailing) sees the first failure
  // after a restart, which a series born at 1 would hide.
  const runs = serviceMetrics.runs(registry);
  for (const status of FINAL_RUN_STATUSES) for (const source of ['cron', 'heartbeat', ...PLATFORMS] as const) runs.inc({ status, source }, 0);
  return {
    runEnded: ({ status, source, durationMs, ttftMs }) => {
      runs.inc({ status, source });
      serviceMetrics.runDuration(registry).observe({ status }, durationMs / 1000);
      if (ttftMs !== undefined) serviceMetrics.runTtft(registry).observe({ source }, ttftMs / 1000);
    },
  };
}

/** The configured providers (or a test's stream), measured; `close` stops the providers' watch. */
async function modelClient(
  runtime: Runtime,
  testStream: AgentWorkerOptions['stream'],
  usage: UsageRecorder,
  budgets: TokenBudgets,
): Promise<{ stream: MeasuredStream; modelInfo: (req: { provider?: string; model?: string }) => Promise<ModelInfo | undefined>; close: () => Promise<void> }> {
  let providers: ModelProviders | undefined;
  if (!testStream) {
    const r = runtime.config.current.reliability;
    providers = new ModelProviders({
      db: runtime.db.db,
      secrets: runtime.secrets,
      config: () => runtime.config.current,
      bus: runtime.bus,
      logger: runtime.logger,
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
  const stream = measuredStream(
    testStream ?? ((req: ModelCallRequest) => providers!.stream(req)),
    runtime.metrics,
    usage,
    () => runtime.config.current.models.default_provider,
    { budgets, answerTokens: () => runtime.config.current.security.budgetReserveTokens },
    () => runtime.config.current.metrics.agent_label,
  );
  // Context windows come from the providers' cached rows; a test's stream has no cache, so the rows are read.
  const modelInfo = (req: { provider?: string; model?: string }) =>
    providers ? providers.modelInfo(req) : modelInfoFromDb(runtime.db.db, runtime.config.current.models.default_provider, req);
  return { stream, modelInfo, close: async () => providers?.close() };
}

/** A model call on behalf of a run (its agent labels the token counts; its usage is recorded). */
type MeasuredStream = (req: ModelCallRequest, run: UsageRun) => AsyncIterable<ModelEvent>;

/**
 * The model client with provider metrics: calls by outcome and time to the first event, labelled
 * with the provider asked for (failover inside the call is the provider layer's business), and
 * the tokens of the answer's usage, labelled with the provider that answered (the one that bills),
 * which are also recorded per call (`run_usage`, tagged `compaction` for a session summary). Each
 * call of a principal with a `tokensPerDay` first reserves its estimate on the day's counter
 * (refused with the budget's 429 when the day is spent), settled to the reported usage after
 * the call, given back when it fails (TokenBudgets).
 */
function measuredStream(
  inner: (req: ModelCallRequest) => AsyncIterable<ModelEvent>,
  metrics: Registry,
  usage: UsageRecorder,
  defaultProvider: () => string,
  budget: { budgets: TokenBudgets; answerTokens: () => number },
  /** metrics.agent_label: the agent id as a label only when an operator asked (ids are users' choice, an unbounded set). */
  agentLabel: () => boolean,
): MeasuredStream {
  const calls = serviceMetrics.providerCalls(metrics);
  const ttft = serviceMetrics.providerTtft(metrics);
  const tokens = serviceMetrics.tokens(metrics);
  return async function* (req, run) {
    const agent = agentLabel() ? run.agentId : '';
    const provider = req.provider || defaultProvider() || 'default';
    const reservation = await budget.budgets.reserve(run.principal, estimateCallTokens(req, budget.answerTokens()));
    let settled = false;
    const started = Date.now();
    let first = true;
    // A traced run's model call is a span (none untraced): what was asked, what answered, tokens and TTFT.
    const span = startChildSpan(`chat ${req.model ?? provider}`, { 'gen_ai.operation.name': 'chat', 'gen_ai.system': provider, 'gen_ai.request.model': req.model ?? '' });
    try {
      for await (const event of inner(req)) {
        // A retry notice is no token: the time to first token is the answer's.
        if (first && event.type !== 'retry') {
          first = false;
          ttft.observe({ provider }, (Date.now() - started) / 1000);
          span?.setAttribute('agentry.ttft_ms', Date.now() - started);
        }
        if (span && event.type === 'done') spanDone(span, event);
        if (event.type === 'done' && event.usage) {
          // A provider's usage is read off its wire: a missing or odd count is skipped (prom-client throws on a negative one).
          const { promptTokens, completionTokens } = event.usage;
          if (promptTokens >= 0) tokens.inc({ agent, provider: event.provider, kind: 'prompt' }, promptTokens);
          if (completionTokens >= 0) tokens.inc({ agent, provider: event.provider, kind: 'completion' }, completionTokens);
        }
        if (event.type === 'done') {
          usage.record(run, event, req.purpose ?? 'chat');
          settled = true;
          await reservation.settle((event.usage?.promptTokens ?? 0) + (event.usage?.completionTokens ?? 0));
        }
        yield event;
      }
      calls.inc({ provider, outcome: 'ok' });
    } catch (err) {
      calls.inc({ provider, outcome: 'error' });
      if (span) markSpanFailed(span, err);
      throw err;
    } finally {
      span?.end();
      // Failed, cancelled, or left before its end without a usage: the reservation goes back.
      if (!settled) await reservation.release();
    }
  };
}

/** The answer's provider, model and token counts on the model call's span. */
function spanDone(span: Span, event: Extract<ModelEvent, { type: 'done' }>): void {
  span.setAttributes({ 'gen_ai.response.model': event.model, 'agentry.provider': event.provider, 'gen_ai.response.finish_reasons': [event.finishReason] });
  if (event.usage) span.setAttributes({ 'gen_ai.usage.input_tokens': event.usage.promptTokens, 'gen_ai.usage.output_tokens': event.usage.completionTokens });
}
