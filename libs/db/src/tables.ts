import type { Platform } from '@agentry/contracts';
import type { ColumnType, Generated } from 'kysely';

/**
 * Row shapes as the database sees them, kept apart from the API types (kysely's recommended
 * style). A later issue adds a table by adding its interface here and one line to `Database`.
 */
export interface Database {
  settings: SettingsTable;
  rule_chains: RuleChainsTable;
  skills: SkillsTable;
  workspace_entries: WorkspaceEntriesTable;
  users: UsersTable;
  channel_accounts: ChannelAccountsTable;
  sessions: SessionsTable;
  session_messages: SessionMessagesTable;
  session_summaries: SessionSummariesTable;
  runs: RunsTable;
  model_providers: ModelProvidersTable;
  cron_jobs: CronJobsTable;
  cron_runs: CronRunsTable;
  bindings: BindingsTable;
  outbound_messages: OutboundMessagesTable;
  inbound_events: InboundEventsTable;
  run_usage: RunUsageTable;
}

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * JSON columns are written as JSON text: pg would turn a top-level JS array into a Postgres
 * array literal, so serialising ourselves is what makes both drivers store the same value.
 */
export type JsonColumn<T extends JsonValue = JsonValue> = ColumnType<T, string, string>;

/** A timestamptz with a `now()` default: optional on insert, always a Date on read. */
export type TimestampDefaultNow = ColumnType<Date, Date | string | undefined, Date | string>;

/**
 * The states of a run, as the `runs.status` check constraint allows them. The two lists are the
 * one place that says which states are still going and which are an end: queries, the worker's
 * take-over, relays and watchers all ask these rather than spelling the states again.
 */
export const ACTIVE_RUN_STATUSES = ['queued', 'running'] as const;
export const FINAL_RUN_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
export type ActiveRunStatus = (typeof ACTIVE_RUN_STATUSES)[number];
export type FinalRunStatus = (typeof FINAL_RUN_STATUSES)[number];
export type RunStatus = ActiveRunStatus | FinalRunStatus;

export function isActiveRunStatus(status: RunStatus): status is ActiveRunStatus {
  return (ACTIVE_RUN_STATUSES as readonly RunStatus[]).includes(status);
}

export function isFinalRunStatus(status: RunStatus): status is FinalRunStatus {
  return (FINAL_RUN_STATUSES as readonly RunStatus[]).includes(status);
}

/** Who started a run: a chat completion (`api`), a cron fire, an agent's heartbeat, or a message on a channel platform. */
export type RunSource = 'cron' | 'heartbeat' | Platform;

/**
 * A cron fire (`cron_runs.status`, mirrored in `cron_jobs.last_status`); `skipped` started no
 * run (its agent is disabled) and says why in `error`.
 */
export type CronRunStatus = 'running' | 'succeeded' | 'failed' | 'skipped';

/**
 * How a fire's answer was delivered: `queued` (handed to the outbound queue, not sent yet),
 * `sent`, `failed`, or `skipped` (no answer to send). Null when the job delivers nowhere.
 */
export type CronDeliveryStatus = 'queued' | 'sent' | 'failed' | 'skipped';

/** An outbound message, as the `outbound_messages.status` check constraint allows it. */
export type OutboundStatus = 'queued' | 'sending' | 'sent' | 'failed';

export interface SettingsTable {
  key: string;
  value: JsonColumn;
  updated_at: TimestampDefaultNow;
}

export interface UsersTable {
  username: string;
  password_hash: string;
  role: string;
  api_key_hash: string | null;
  api_key_sealed: string | null;
  token_version: ColumnType<number, number | undefined, number>;
  file_hmac: string | null;
  disabled: ColumnType<boolean, boolean | undefined, boolean>;
  /** `{tokensPerDay, requestsPerMinute}`, null without a budget. */
  budget: JsonColumn | null;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

export interface ChannelAccountsTable {
  platform: string;
  id: string;
  name: string;
  enabled: boolean;
  settings: JsonColumn;
  secrets_sealed: string | null;
  api_key_hash: string | null;
  file_hmac: string | null;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

/** Agents (kind `agent`) and rule chains (kind `rule`; `agent_id` set for agent-level ones). */
export interface RuleChainsTable {
  id: string;
  kind: 'agent' | 'rule';
  agent_id: string | null;
  name: string;
  category: string | null;
  /** The DSL as written (a `json` column: key order is kept). */
  dsl: JsonColumn;
  /** Username of the creator; file imports and rows older than ownership: `admin`. */
  owner: ColumnType<string, string | undefined, string>;
  /** Agents: who may chat with it besides its owner and admins (`AgentAudience`); chains ignore it. */
  audience: ColumnType<JsonValue, string | undefined, string>;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

export interface SkillsTable {
  id: Generated<number>;
  scope: 'global' | 'local';
  /** Null exactly when scope is global. */
  agent_id: string | null;
  name: string;
  description: string;
  content: string;
  status: 'active' | 'draft';
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

export interface WorkspaceEntriesTable {
  agent_id: string;
  path: string;
  parent: string;
  is_dir: boolean;
  /** Buffer on pg, Uint8Array on PGlite: repositories hand out Buffers. */
  content: ColumnType<Uint8Array | null, Uint8Array | null | undefined, Uint8Array | null>;
  size: ColumnType<number, number | undefined, number>;
  mod_time: TimestampDefaultNow;
}

export interface SessionsTable {
  id: string;
  agent_id: string;
  session_key: string;
  channel: ColumnType<string, string | undefined, string>;
  scope: ColumnType<string, string | undefined, string>;
  title: ColumnType<string, string | undefined, string>;
  /** The principal that opened it (`user:<name>`, `api:<account>`), '' for channel and open-mode chats. */
  owner: ColumnType<string, string | undefined, string>;
  message_count: ColumnType<number, number | undefined, number>;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

export interface SessionMessagesTable {
  id: Generated<number>;
  session_id: string;
  role: string;
  content: string;
  tool_calls: JsonColumn | null;
  tool_call_id: string | null;
  name: string | null;
  run_id: string | null;
  /** `ok`: a completed turn; `failed` / `stopped`: kept to be shown, never sent to the model. */
  status: ColumnType<SessionMessageStatus, SessionMessageStatus | undefined, SessionMessageStatus>;
  error: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: TimestampDefaultNow;
  /** Set when a summary took this message's place in the model's context (the row stays for the UI). */
  compacted_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

/** A summary sent in place of a session's messages up to `through_message_id` (the newest one counts). */
export interface SessionSummariesTable {
  id: Generated<number>;
  session_id: string;
  content: string;
  through_message_id: number;
  created_at: TimestampDefaultNow;
}

/** A stored message's turn: completed, or ended by a failure or a stop (`session_messages.status`). */
export type SessionMessageStatus = 'ok' | 'failed' | 'stopped';

export interface RunsTable {
  id: string;
  seq: Generated<number>;
  agent_id: string;
  session_id: string | null;
  source: ColumnType<RunSource, RunSource | undefined, RunSource>;
  status: ColumnType<RunStatus, RunStatus | undefined, RunStatus>;
  request: JsonColumn;
  output: string | null;
  error: string | null;
  usage: JsonColumn | null;
  streamed: ColumnType<boolean, boolean | undefined, boolean>;
  attempts: ColumnType<number, number | undefined, number>;
  created_at: TimestampDefaultNow;
  started_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** The waiting gateway's reply channel id (`replies:<id>`); null: the run's own `run:<id>`. */
  reply_to: ColumnType<string | null, string | null | undefined, string | null>;
  /** Who asked (`user:<name>`, `api:<account>`, '' for channels, cron and open mode), for usage and budgets. */
  principal: ColumnType<string, string | undefined, string>;
  /** The chain's trace of a run whose agent runs as a chain (bounded); null for a lone ai/agent node. */
  steps: ColumnType<JsonValue | null, string | null | undefined, string | null>;
}

/** One model call's tokens; agent and principal copied from the run, so totals outlive run retention. */
export interface RunUsageTable {
  id: Generated<number>;
  run_id: string;
  agent_id: string;
  principal: ColumnType<string, string | undefined, string>;
  provider: string;
  model: ColumnType<string, string | undefined, string>;
  prompt_tokens: ColumnType<number, number | undefined, number>;
  completion_tokens: ColumnType<number, number | undefined, number>;
  /** What the call was for: `chat` (a run's own calls) or `compaction` (a session summary). */
  kind: ColumnType<UsageKind, UsageKind | undefined, UsageKind>;
  created_at: TimestampDefaultNow;
}

export type UsageKind = 'chat' | 'compaction';

/** OpenAI-compatible model providers; `api_key_sealed` is AES-GCM sealed, never clear text. */
export interface ModelProvidersTable {
  id: string;
  name: string;
  base_url: string;
  /** Default model name as written; empty: the `models` entry with alias `default`, else the first. */
  model: string;
  /** `[{name, alias?, context_window?}]`. */
  models: JsonColumn;
  api_key_sealed: string | null;
  file_hmac: string | null;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
}

/** Cron jobs of agents; `schedule` has six fields (second minute hour day month weekday). */
export interface CronJobsTable {
  id: string;
  agent_id: string;
  name: string;
  schedule: string;
  message: string;
  timezone: ColumnType<string, string | undefined, string>;
  disabled: ColumnType<boolean, boolean | undefined, boolean>;
  /** `{platform, accountId, chatId}` or null. */
  deliver: JsonColumn | null;
  /** Username of the creator (for a job made by an agent's cron tool: the agent's owner). */
  owner: ColumnType<string, string | undefined, string>;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
  last_run_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  last_status: CronRunStatus | null;
}

/** One row per fire; UNIQUE (cron_job_id, scheduled_at) makes a tick fire at most once. */
export interface CronRunsTable {
  id: Generated<number>;
  cron_job_id: string;
  scheduled_at: ColumnType<Date, Date | string, Date | string>;
  run_id: string | null;
  started_at: TimestampDefaultNow;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  status: ColumnType<CronRunStatus, CronRunStatus | undefined, CronRunStatus>;
  output_excerpt: string | null;
  error: string | null;
  delivery_status: CronDeliveryStatus | null;
  delivery_error: string | null;
}

export interface BindingsTable {
  position: number;
  agent_id: string;
  match_default: ColumnType<boolean, boolean | undefined, boolean>;
  match_channel: string | null;
  match_account_id: string | null;
}

export interface OutboundMessagesTable {
  id: string;
  platform: string;
  account_id: string;
  chat_id: string;
  kind: string;
  payload: JsonColumn;
  source: string;
  run_id: string | null;
  status: ColumnType<OutboundStatus, OutboundStatus | undefined, OutboundStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  parts_sent: ColumnType<number, number | undefined, number>;
  platform_message_id: string | null;
  error: string | null;
  next_attempt_at: TimestampDefaultNow;
  claimed_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  created_at: TimestampDefaultNow;
  updated_at: TimestampDefaultNow;
  finished_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export interface InboundEventsTable {
  platform: string;
  account_id: string;
  event_id: string;
  run_id: string | null;
  received_at: TimestampDefaultNow;
}
