/**
 * Shapes of the REST API as the gateway answers them (the spec's names; fields the spec leaves
 * open follow the gateway). Unknown extra fields are kept: the client never strips a response.
 */

/** A paged list (`page` >= 1, `size` 1..100). */
export interface Page<T> {
  data: T[];
  total: number;
  page: number;
  size: number;
}

export interface PageQuery {
  page?: number;
  size?: number;
}

export interface Success {
  success: boolean;
  message?: string;
}

/** An agent or rule chain in RuleGo's DSL. */
export interface RuleChainDsl {
  ruleChain: { id: string; name: string; root?: boolean; debugMode?: boolean; additionalInfo?: Record<string, unknown>; configuration?: Record<string, unknown> };
  metadata: {
    firstNodeIndex?: number;
    nodes: Array<{ id: string; type: string; name?: string; configuration?: Record<string, unknown> }>;
    connections: Array<{ fromId: string; toId: string; type: string }>;
  };
  [extra: string]: unknown;
}

export interface AgentListItem {
  ruleChain: { id: string; name: string };
}

export interface AgentTemplate extends RuleChainDsl {
  workspaceFiles: Array<{ path: string; content: string }>;
}

/** A rule chain as `GET /rules` lists it: the DSL plus where it belongs and whether it loads. */
export interface RuleListItem {
  ruleChain: RuleChainDsl['ruleChain'];
  metadata: RuleChainDsl['metadata'];
  kind: 'agent' | 'rule';
  agentId?: string;
  loaded: boolean;
  error?: string;
}

// Skills, workspace files and cron jobs: the gateway's response schemas are their one definition.
export type { Skill, SkillScope, SkillUploadResult, WorkspaceEntry, WorkspaceFile, WorkspaceWritten, CronDeliver, CronJob, CronRun } from '@agentry/contracts';
import type { CronDeliver } from '@agentry/contracts';

export interface NewCronJob {
  name: string;
  schedule: string;
  message: string;
  target: string;
  timezone?: string;
  disabled?: boolean;
  deliver?: CronDeliver | null;
}

export interface Session {
  id: string;
  agentId: string;
  sessionKey: string;
  channel: string;
  scope: string;
  title: string | null;
  messageCount: number;
  createdAt: string;
  updatedAt: string;
}

export interface SessionMessage {
  role: string;
  content: string | null;
  toolCalls?: unknown;
  toolCallId?: string;
  name?: string;
  runId: string | null;
  createdAt: string;
}

/** `POST /sessions/clear`: omitted fields match any session. */
export interface SessionFilter {
  agentId?: string;
  sessionKey?: string;
  channel?: string;
  scope?: string;
}

// Channel accounts as read (secrets only as `hasSecret`) and platform views, from the response schemas.
export type { ChannelAccount, ChannelPlatformView, ChannelsView } from '@agentry/contracts';

/** `POST /channels/{platform}/send`: all strings; `accountId` picks the sending account. */
export interface SendMessage {
  chatId: string;
  message: string;
  accountId?: string;
}

/** `GET /config`: the live configuration, secrets hidden. */
export interface ConfigView {
  server: { host: string; port: number };
  data: { root_dir: string; logs_dir: string };
  models: { default_provider: string; providers: Record<string, unknown> };
  security: { requireAuth: boolean; users: Record<string, boolean> };
  [extra: string]: unknown;
}

export interface LoginResult {
  token: string;
  /** ISO 8601. */
  expireAt: string;
}

export type UserRole = 'admin' | 'user';

/** A user as an admin sees it (`GET /users`): never a password hash or a key. */
export interface User {
  username: string;
  role: UserRole;
  disabled: boolean;
  hasApiKey: boolean;
  /** `file`: seeded from `security.users` of the configuration file; `api`: created through the API. */
  source: 'file' | 'api';
  /** ISO 8601. */
  createdAt: string;
  updatedAt: string;
}

/** What an admin may change of a user; a new password or a disable revokes the user's tokens. */
export interface UserChange {
  role?: UserRole;
  disabled?: boolean;
  password?: string;
}

export interface PasswordChanged extends LoginResult {
  success: boolean;
  message: string;
}

export interface ModelList {
  object: 'list';
  data: Array<{ id: string; object: 'model'; created: number; owned_by: string }>;
}

export interface ToolInfo {
  name: string;
  description: string;
  parameters: unknown;
  optIn: boolean;
}

// ---------------------------------------------------------------------------------------------
// Shapes the web UI reads that the declarations above do not name. Appended as one block (the
// declarations above are being derived from the gateway's schemas; keep additions here).
// ---------------------------------------------------------------------------------------------

/** `GET /auth/status`: what a login screen needs before anyone logs in. */
export interface AuthStatus {
  requireAuth: boolean;
  user: { username: string; role: string } | null;
  /** Told only to the admin: the admin user still has the default password. */
  defaultPassword?: boolean;
}

/** One node of a rule chain's DSL. */
export type DslNode = RuleChainDsl['metadata']['nodes'][number];

/** One entry of a stored assistant message's `toolCalls`. */
export interface StoredToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** A tool as `GET /tools/forms` describes it for a form. */
export interface ToolForm {
  name: string;
  description: string;
  optIn: boolean;
  parameters: unknown;
  config: unknown;
}

/** `GET /tools/forms`: what the agent editor builds its forms from. */
export interface ToolForms {
  /** Each node type with the JSON schema of its `configuration`. */
  nodes: Array<{ type: string; description: string; configuration: unknown }>;
  tools: ToolForm[];
  toolKinds: string[];
  /** The JSON schema of one entry of an `ai/agent` node's `tools` (absent from older servers). */
  toolEntry?: unknown;
}

/** Which agent answers a channel's messages (`GET /bindings`). */
export interface Binding {
  agentId: string;
  match: { default?: boolean; channel?: string; accountId?: string };
}

export interface ProviderModel {
  name: string;
  alias?: string;
  context_window?: number;
}

/** A model provider as read (the API key only as `hasApiKey`). */
export interface Provider {
  id: string;
  name: string;
  base_url: string;
  model: string;
  models: ProviderModel[];
  hasApiKey: boolean;
}

/** `POST /config/models/providers/{id}/test`. */
export interface ProviderTest {
  ok: boolean;
  latencyMs: number;
  method: 'models' | 'chat';
  models?: string[];
  error?: string;
}
