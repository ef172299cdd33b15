import Type, { type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { PLATFORMS, type Platform } from '@agentry/contracts';

export { PLATFORMS, type Platform };

/**
 * The one configuration schema. Every field carries a comment (its `description`, which the
 * README's reference mirrors). Keys follow the spec: snake_case, except under `security`,
 * where the spec writes `requireAuth`.
 */

const ModelEntry = Type.Object(
  {
    /** Model name as the provider knows it. */
    name: Type.String({ minLength: 1, description: 'model name at the provider' }),
    /** `default` marks the provider's default model. */
    alias: Type.Optional(Type.String({ description: 'alias; `default` marks the default model' })),
    context_window: Type.Optional(Type.Integer({ minimum: 1, description: 'context window in tokens' })),
  },
  { additionalProperties: false },
);

const Provider = Type.Object(
  {
    name: Type.Optional(Type.String({ description: 'display name' })),
    base_url: Type.String({ pattern: '^https?://', description: 'URL of the OpenAI-compatible API' }),
    api_key: Type.Optional(Type.String({ description: 'secret; write-only, never returned' })),
    model: Type.Optional(Type.String({ description: 'default model name' })),
    models: Type.Optional(Type.Array(ModelEntry, { description: 'known models' })),
  },
  { additionalProperties: false },
);


/** Account fields that are secrets: sealed at rest, never returned, never logged. */
export const ACCOUNT_SECRET_FIELDS = [
  'api_key',
  'app_secret',
  'encrypt_key',
  'verifier',
  'token',
  'aes_key',
  'encoding_aes_key',
  'bot_token',
  'secret',
  'signing_secret',
] as const;

/** What chat may spend: of an api account, or of a user (the object form of a `security.users` entry). */
const BudgetSchema = Type.Object(
  {
    tokensPerDay: Type.Optional(Type.Integer({ minimum: 0, description: 'prompt + completion tokens per UTC day; 0: no limit' })),
    requestsPerMinute: Type.Optional(Type.Integer({ minimum: 0, description: 'chat and responses requests per minute; 0: no limit' })),
  },
  { additionalProperties: false },
);

/** The object form of a `security.users` entry: the string form's parts, and a budget. */
const UserEntry = Type.Object(
  {
    password: Type.String({ minLength: 1, description: 'secret' }),
    api_key: Type.Optional(Type.String({ minLength: 16, description: 'secret; the key the user may chat with' })),
    budget: Type.Optional(BudgetSchema),
  },
  { additionalProperties: false },
);

const ChannelAccount = Type.Object(
  {
    name: Type.Optional(Type.String({ description: 'display name' })),
    // Optional rather than defaulted: TypeBox does not fill defaults inside record values.
    enabled: Type.Optional(Type.Boolean({ description: 'default true; a disabled account neither receives nor sends' })),
    description: Type.Optional(Type.String()),
    api_key: Type.Optional(Type.String({ minLength: 16, description: 'platform `api`: the key clients send as Bearer token' })),
    app_id: Type.Optional(Type.String({ description: 'platform credential id' })),
    app_secret: Type.Optional(Type.String({ description: 'platform credential secret; write-only' })),
    dm_policy: Type.Optional(Type.String({ description: 'private chats: allow | allowlist | disabled' })),
    group_policy: Type.Optional(Type.String({ description: 'group chats: allow | allowlist | disabled' })),
    allow_from: Type.Optional(Type.Array(Type.String(), { description: 'peers admitted by an allowlist policy' })),
    budget: Type.Optional(Type.Object(BudgetSchema.properties, { additionalProperties: false, description: 'platform `api`: what the account may spend on chat' })),
  },
  // Platforms have fields of their own (encrypt_key, bot_token, api_base, ...).
  { additionalProperties: true },
);

const ChannelPlatform = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean({ description: 'default true; switches every account of the platform' })),
    accounts: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }), ChannelAccount)),
  },
  { additionalProperties: true },
);

export const ConfigSchema = Type.Object(
  {
    server: Type.Object(
      {
        host: Type.String({ minLength: 1, default: '0.0.0.0', description: 'listen address (env HOST overrides)' }),
        port: Type.Integer({ minimum: 0, maximum: 65535, default: 9527, description: 'listen port (env PORT overrides)' }),
        body_limit: Type.Integer({
          minimum: 1024,
          default: 16 * 1024 * 1024,
          description: 'largest accepted request body in bytes; larger bodies get 413',
        }),
        request_timeout_ms: Type.Integer({
          minimum: 100,
          default: 60_000,
          description:
            'longest a client may take to send a request, headers and body; then 408 and the connection closes (a trickled body would otherwise hold its connection forever). A chat stream is not cut: the timeout ends with the request, before the answer streams',
        }),
        max_connections_per_address: Type.Integer({
          minimum: 0,
          default: 256,
          description:
            'open connections one client address may hold; more are closed at once (0: no cap). Counted on the TCP peer: behind a proxy every client shares its address, so raise it or let the proxy cap',
        }),
        shutdown_timeout_ms: Type.Integer({
          minimum: 100,
          default: 10_000,
          description: 'how long a stopping service waits for running work before it aborts it',
        }),
        trust_proxy: Type.Union([Type.Boolean(), Type.Integer({ minimum: 1 }), Type.String({ minLength: 1 })], {
          default: false,
          description:
            'behind an ingress or load balancer: true, the number of proxy hops, or comma-separated proxy addresses/CIDRs whose X-Forwarded-For is believed (client addresses for rate limits and logs)',
        }),
        stream_headers_after_ms: Type.Integer({
          minimum: 0,
          default: 5000,
          description:
            'a streamed chat holds its 200 and headers back until the run says something, so a failure before that is an HTTP error (status and {error}) that clients can see and retry; after this long without a word they go out anyway, with keep-alive comments, so proxies do not cut a slow model as idle (0: at once)',
        }),
        cors_origins: Type.Array(Type.String({ pattern: '^(\\*|https?://[^/\\s]+)$' }), {
          default: [],
          description:
            'origins (scheme://host[:port]) whose browser pages may call the API cross-origin; empty (default): none, "*": any (no cookies are involved: credentials are Bearer tokens)',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    data: Type.Object(
      {
        root_dir: Type.String({ minLength: 1, default: './data', description: 'embedded database, keys and logs live here' }),
        logs_dir: Type.Optional(Type.String({ minLength: 1, description: 'log files (embedded mode); default <root_dir>/logs' })),
      },
      { additionalProperties: false, default: {} },
    ),
    workspace: Type.Object(
      {
        max_file_bytes: Type.Integer({
          minimum: 1,
          default: 10 * 1024 * 1024,
          description: 'largest file in an agent workspace, in bytes; larger writes get 413',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    logging: Type.Object(
      {
        level: Type.Union(
          [
            Type.Literal('fatal'),
            Type.Literal('error'),
            Type.Literal('warn'),
            Type.Literal('info'),
            Type.Literal('debug'),
            Type.Literal('trace'),
            Type.Literal('silent'),
          ],
          { default: 'info', description: 'pino log level' },
        ),
        // A person at a terminal reads lines, a collector parses JSON: `auto` picks by whether stdout is a TTY.
        format: Type.Union([Type.Literal('auto'), Type.Literal('json'), Type.Literal('pretty')], {
          default: 'auto',
          description: 'log lines on stdout: auto (human lines on a terminal, JSON otherwise), json or pretty; env AGENTRY_LOG_FORMAT overrides; read at start',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    // `/metrics` on every service (the gateway's port, the others' HEALTH_PORT). It was public and
    // labelled tokens by agent id: who may read it, and whether users' agent ids become labels.
    metrics: Type.Object(
      {
        token: Type.Union([Type.Literal(''), Type.String({ minLength: 16 })], {
          default: '',
          description:
            'secret; when set (16+ characters), /metrics answers only requests with "Authorization: Bearer <token>" (401 otherwise), from any address; empty: /metrics follows security.allowFrom.management (every address when that is empty)',
        }),
        agent_label: Type.Boolean({
          default: false,
          description:
            'label agentry_tokens_total by agent id (agent="<id>"); off, every series has agent="" (agent ids are chosen by users: one series per agent is an unbounded label set)',
        }),
      },
      { additionalProperties: false, default: {}, description: 'who may read /metrics, and its labels' },
    ),
    models: Type.Object(
      {
        default_provider: Type.String({ default: '', description: 'provider id used when an agent names none' }),
        providers: Type.Record(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }), Provider, {
          default: {},
          description: 'OpenAI-compatible model providers keyed by id',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    security: Type.Object(
      {
        requireAuth: Type.Boolean({ default: false, description: 'management routes need a JWT when true' }),
        users: Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.@-]{1,64}$' }), Type.Union([Type.String(), UserEntry]), {
          default: {},
          description: 'username -> "<password>" or "<password>:<API_KEY>", or {password, api_key, budget}',
        }),
        jwtSecret: Type.Optional(Type.String({ minLength: 16, description: 'JWT signing secret; generated and shared through Postgres when unset' })),
        jwtExpireHours: Type.Number({ exclusiveMinimum: 0, default: 24, description: 'JWT lifetime in hours' }),
        // A plain user's cron jobs through the REST API, held as the agent's own `cron` tool holds
        // an agent's: without them one user filled the scheduler with a job every second.
        cronMinIntervalSeconds: Type.Integer({
          minimum: 1,
          default: 60,
          description: 'shortest time between two ticks of a cron job a non-admin creates or changes through the API',
        }),
        cronMaxJobsPerUser: Type.Integer({ minimum: 0, default: 100, description: 'most cron jobs a non-admin user may own (admins: no limit)' }),
        budgetReserveTokens: Type.Integer({
          minimum: 0,
          default: 1024,
          description:
            'tokens a model call of a principal with a tokensPerDay budget reserves for its answer when it sets no max_tokens (its prompt is estimated and reserved too); settled to what the provider reports once the call is done',
        }),
        // Budgets of principals that have no entry to carry one: anyone who can write to a bound
        // chat account is a principal of their own, and each of them spent without end.
        budgets: Type.Object(
          {
            channelPeerTokensPerDay: Type.Integer({
              minimum: 0,
              default: 200_000,
              description:
                'tokens each channel peer (one sender on one chat account) may spend a UTC day through the agents bound to that account, reserved at every model call as for a user; 0: no limit',
            }),
            // Per sender alone, many senders (or one with many ids) spend without end: the account's
            // day holds them all together. Generous, so that it only stops a flood.
            channelAccountTokensPerDay: Type.Integer({
              minimum: 0,
              default: 2_000_000,
              description:
                'tokens all the senders of one chat account may spend together a UTC day, reserved at every model call beside each sender\'s own day; past it every sender of that account is refused until midnight UTC; 0: no limit',
            }),
          },
          { additionalProperties: false, default: {}, description: 'token budgets of principals without a user or api account entry' },
        ),
        // What one plain user may hold (admins and open servers: no limit). A user's cron jobs are
        // held by cronMaxJobsPerUser above. Over one: 409 "Limit reached: ..." naming the setting.
        quotas: Type.Object(
          {
            agentsPerUser: Type.Integer({ minimum: 0, default: 100, description: 'most agents a non-admin user may own; 0: none' }),
            sessionsPerUser: Type.Integer({
              minimum: 0,
              default: 1000,
              description: "most chat sessions a non-admin user may own over every agent (a chat naming a new sessionId, or a stored response, opens one); 0: none",
            }),
            workspaceBytesPerAgent: Type.Integer({
              minimum: 0,
              default: 104_857_600,
              description: "most bytes of files in the workspace of an agent a non-admin user owns (REST writes and the agent's own tools alike); 0: no files",
            }),
          },
          { additionalProperties: false, default: {}, description: 'per-user quotas; admins are not held' },
        ),
        allowUnsandboxedBash: Type.Boolean({
          default: false,
          description:
            'let an agent\'s bash tool run with sandbox: none (as the service user, seeing its files, processes and network); off, such a call is refused',
        }),
        allowFrom: Type.Object(
          {
            management: Type.Array(Type.String(), {
              default: [],
              description:
                'CIDRs (or single addresses) that may call every route but chat, the probes (/health, /ready, /metrics), the web UI\'s files and platform webhooks; login included. Empty: every address',
            }),
            chat: Type.Array(Type.String(), {
              default: [],
              description: 'CIDRs (or single addresses) that may call /chat/completions, /responses, /models and /models/{id}. Empty: every address',
            }),
          },
          {
            additionalProperties: false,
            default: {},
            description: 'client-address allow-lists, checked on the address server.trust_proxy gives; a refused address gets 403. Editable through PUT /config',
          },
        ),
        rateLimit: Type.Object(
          {
            chat: Type.Object(
              {
                requests: Type.Integer({
                  minimum: 0,
                  default: 600,
                  description: 'chat requests per window and credential (API key, account or user; anonymous callers by address); 0 disables the limit',
                }),
                windowSeconds: Type.Integer({ minimum: 1, default: 60, description: 'the window `requests` is counted over, in seconds' }),
                burst: Type.Integer({
                  minimum: 0,
                  default: 0,
                  description: 'requests a credential may send at once before the window rate applies; 0 (default): as many as `requests`',
                }),
              },
              { additionalProperties: false, default: {}, description: 'POST /chat/completions; over the limit: 429 with Retry-After; shared by every gateway replica (Redis)' },
            ),
          },
          { additionalProperties: false, default: {}, description: 'per-credential request limits' },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    channels: Type.Object(Object.fromEntries(PLATFORMS.map((p) => [p, Type.Optional(ChannelPlatform)])) as Record<Platform, ReturnType<typeof Type.Optional<typeof ChannelPlatform>>>, {
      additionalProperties: false,
      default: {},
      description: 'messaging-platform accounts by platform id',
    }),
    bindings: Type.Optional(
      Type.Array(
        Type.Object(
          {
            agent_id: Type.String({ minLength: 1, description: 'the agent that answers' }),
            match: Type.Object(
              {
                default: Type.Optional(Type.Boolean({ description: 'the binding for accounts no other binding matches' })),
                channel: Type.Optional(Type.String({ description: 'platform id' })),
                account_id: Type.Optional(Type.String({ description: 'account id on that platform' })),
              },
              { additionalProperties: false },
            ),
          },
          { additionalProperties: false },
        ),
        { description: 'account -> agent bindings, most specific first wins (account, then platform, then default)' },
      ),
    ),
    worker: Type.Object(
      {
        concurrency: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'runs one agent-worker process executes at once' }),
        script_workers: Type.Integer({
          minimum: 1,
          maximum: 64,
          default: 2,
          description:
            'threads of one agent-worker process that run rule-chain scripts (jsFilter, jsTransform, jsSwitch, log); a free thread goes to the agent with the fewest scripts running, so one busy agent cannot starve the others',
        }),
        stall_timeout_ms: Type.Integer({
          minimum: 1000,
          default: 30_000,
          description: 'cluster mode: how long the run of a dead worker stays claimed before another worker takes it over',
        }),
        // Bounds of one run (docs/reliability.md, "Bounds of a run"): whatever its definitions say,
        // a run ends, with a human error, when it passes one; its nested agents and chains end with it.
        max_call_depth: Type.Integer({
          minimum: 1,
          maximum: 64,
          default: 8,
          description: 'deepest nesting of rule-chain tools, flow nodes and sub-agents together in one run; calling a chain or agent already on the way in is refused as a cycle',
        }),
        max_run_ms: Type.Integer({ minimum: 1000, default: 900_000, description: 'longest wall time of one run, its nested agents and chains included; then it fails' }),
        max_model_calls_per_run: Type.Integer({ minimum: 1, default: 200, description: 'model calls one run may make (every agent, sub-agent, ai/llm node and chain of it together); the next one fails the run' }),
        max_tool_calls_per_run: Type.Integer({ minimum: 1, default: 500, description: 'tool calls one run may make (nested agents included); the next one fails the run' }),
        max_tool_timeout_ms: Type.Integer({ minimum: 1000, default: 600_000, description: 'ceiling of an agent\'s tools[].timeout: a longer one is cut to this' }),
        /** RuleGo's global properties: rule chains read them as `${global.x}` in node configurations. */
        chain_globals: Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' }), Type.String(), {
          default: {},
          description: 'values rule-chain node configurations read as ${global.<name>} (RuleGo global properties); not for secrets, which belong sealed in the node configuration',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    // Everything that bounds how long a failure can hold a run or a client (docs/reliability.md).
    reliability: Type.Object(
      {
        provider_connect_ms: Type.Integer({ minimum: 100, default: 10_000, description: 'model provider: longest wait for the TCP/TLS connection' }),
        provider_first_token_ms: Type.Integer({
          minimum: 100,
          default: 60_000,
          description: 'model provider: longest wait for the first token, and longest silence between two chunks; then the call is retried or fails over',
        }),
        provider_total_ms: Type.Integer({ minimum: 1000, default: 600_000, description: 'model provider: longest model call, retries and failover included' }),
        provider_retries: Type.Integer({ minimum: 0, maximum: 10, default: 2, description: 'model provider: retries of a failed call before its first token (then failover)' }),
        provider_backoff_ms: Type.Integer({ minimum: 0, default: 500, description: 'model provider: first backoff between retries, doubled each time' }),
        listener_check_ms: Type.Integer({
          minimum: 0,
          default: 1000,
          description:
            'agent-worker: how often a chat run checks that a gateway still listens for it; 3 checks in a row without one cancel it (gateway died); 0 turns the check off (Redis Cluster, where PUBSUB NUMSUB sees one node only)',
        }),
        run_sweep_ms: Type.Integer({
          minimum: 500,
          default: 30_000,
          description: 'agent-worker: how often runs still queued or running (older than worker.stall_timeout_ms) are enqueued again; a run whose job exists is left alone',
        }),
        resume_grace_ms: Type.Integer({
          minimum: 0,
          default: 5_000,
          description:
            'a streamed chat whose client went away (or whose gateway died) keeps running this long for the client to resume it (Last-Event-ID, to any gateway); then it is cancelled; 0 cancels at once',
        }),
        resume_retain_ms: Type.Integer({
          minimum: 1_000,
          default: 300_000,
          description: "how long a chat run's events are kept (in Redis, or in memory in embedded mode) after its last one, for a client resuming its stream; after that a resume of a finished run gets its stored answer",
        }),
        resume_max_events: Type.Integer({
          minimum: 16,
          default: 10_000,
          description: "most events kept per chat run for resuming (text deltas are coalesced, so a long answer is a few hundred); a resume from before the oldest kept one is refused with 410",
        }),
        relay_check_ms: Type.Integer({
          minimum: 100,
          default: 10_000,
          description: 'gateway: after this long without an event, a chat relay reads its run and ends with the stored outcome if the run has ended',
        }),
        rolling_upgrade: Type.Boolean({
          default: false,
          description:
            'cluster mode, only while this release rolls out over pods of a release from before 2026-11-29: gateways write agent-run jobs without their reply channel (v1/v2, which older workers read) and workers publish run events one message a PUBLISH (older gateways read no batched frames); unset it once every pod runs this release (restart to change)',
        }),
        run_lease_ms: Type.Integer({
          minimum: 0,
          default: 3_000,
          description:
            "cluster mode: the agent-worker running a run renews a lease on it every third of this; a gateway relaying the run that sees the lease lapse (the worker died) ends the client's stream with an error, or has the run re-run at once when nothing was streamed yet; 0 turns leases off (then only worker.stall_timeout_ms notices a dead worker)",
        }),
      },
      { additionalProperties: false, default: {}, description: 'timeouts and checks that bound how long a failure holds a run or a client' },
    ),
    // What is kept, and for how long; the scheduler deletes the rest (docs/operations.md).
    retention: Type.Object(
      {
        sessions_days: Type.Integer({
          minimum: 0,
          default: 30,
          description: 'sessions without a turn for this many days are deleted with their messages and runs (TpClaw: session ttl 720h); 0 keeps them',
        }),
        runs_days: Type.Integer({ minimum: 0, default: 30, description: 'finished runs (request, answer, usage) are deleted after this many days; 0 keeps them' }),
        cron_runs_days: Type.Integer({ minimum: 0, default: 30, description: 'the fire history of cron jobs is kept this many days; 0 keeps it' }),
        outbound_days: Type.Integer({ minimum: 0, default: 30, description: 'channel messages that ended sent or failed are kept this many days; 0 keeps them' }),
        inbound_events_days: Type.Integer({
          minimum: 0,
          default: 7,
          description: 'ids of received platform events, kept to drop redeliveries, are forgotten after this many days; 0 keeps them',
        }),
        sweep_minutes: Type.Integer({ minimum: 1, default: 60, description: 'how often the scheduler deletes what expired' }),
      },
      { additionalProperties: false, default: {}, description: 'how long history is kept; the scheduler deletes older rows in small batches' },
    ),
    agents: Type.Object(
      {
        defaults: Type.Object(
          {
            session: Type.Object(
              {
                max_messages: Type.Integer({ minimum: 1, default: 100, description: 'history window: stored messages sent with each turn' }),
                compaction: Type.Object(
                  {
                    mode: Type.Union([Type.Literal('off'), Type.Literal('auto')], {
                      default: 'auto',
                      description: "auto: before a turn whose context would pass the budget, older turns are compacted; off: only max_messages bounds the context",
                    }),
                    strategy: Type.Union([Type.Literal('summary'), Type.Literal('sliding_window')], {
                      default: 'summary',
                      description: "summary: the agent's model summarises the older turns into a stored summary sent in their place (a failed call falls back to sliding_window); sliding_window: the oldest turns are left out of that turn",
                    }),
                    keep_recent_count: Type.Integer({ minimum: 1, default: 10, description: 'newest stored messages always sent as they are (never summarised)' }),
                    target_tokens_percent: Type.Integer({
                      minimum: 1,
                      maximum: 100,
                      default: 70,
                      description: "the budget: this percent of the model's context_window (models without one are never compacted)",
                    }),
                    min_messages_to_compact: Type.Integer({
                      minimum: 1,
                      default: 20,
                      description: 'a session with fewer stored messages in its context is not summarised (a turn over budget drops its oldest instead)',
                    }),
                  },
                  { additionalProperties: false, default: {}, description: 'context compaction (TpClaw shape); agents override any field in their ai/agent node' },
                ),
              },
              { additionalProperties: true, default: {} },
            ),
          },
          { additionalProperties: true, default: {} },
        ),
      },
      { additionalProperties: true, default: {}, description: 'agent defaults' },
    ),
  },
  { additionalProperties: false },
);

export type AgentryConfig = Static<typeof ConfigSchema>;

/**
 * Turns TypeBox errors into short messages that name the key: `server.port: must be integer`,
 * `unknown key server.foo`. Only the most specific errors are kept.
 */
export function describeErrors(schema: TSchema, value: unknown, root = ''): string[] {
  const out: string[] = [];
  for (const e of Value.Errors(schema, value)) {
    const path = pointerToPath(root, e.instancePath);
    if (e.keyword === 'boolean') continue; // duplicate of the additionalProperties error
    if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperties?: string[] }).additionalProperties ?? [];
      for (const key of extra) out.push(`unknown key ${path ? `${path}.` : ''}${key}`);
      continue;
    }
    if (e.keyword === 'anyOf' && out.some((m) => m.startsWith(`${path}:`))) continue;
    out.push(`${path || '(root)'}: ${e.message}`);
  }
  return [...new Set(out)];
}

function pointerToPath(root: string, pointer: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return [root, ...parts].filter(Boolean).join('.');
}
