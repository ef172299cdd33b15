import type { ChannelAccount } from '@agentry/client';

/** Shapes of the gateway's API as the UI reads them (README, "Agents" and after). */

export interface Paged<T> {
  data: T[];
  total: number;
  page: number;
  size: number;
}

export interface AuthStatus {
  requireAuth: boolean;
  user: { username: string; role: string } | null;
  /** Told only to the admin: the admin user still has the default password. */
  defaultPassword?: boolean;
}

/** A user as an admin sees it (`GET /users`): never a password hash or a key. */
export interface User {
  username: string;
  role: 'admin' | 'user';
  disabled: boolean;
  hasApiKey: boolean;
  /** `file`: from security.users of the configuration file (deleted there); `api`: created here. */
  source: 'file' | 'api';
  createdAt: string;
  updatedAt: string;
}

export interface DslNode {
  id: string;
  type: string;
  name?: string;
  configuration?: Record<string, unknown>;
}

export interface RuleChainDsl {
  ruleChain: { id: string; name: string; root?: boolean; debugMode?: boolean; additionalInfo?: Record<string, unknown>; configuration?: Record<string, unknown> };
  metadata: { firstNodeIndex?: number; nodes: DslNode[]; connections: Array<{ fromId: string; toId: string; type: string }> };
}

export interface AgentTemplate extends RuleChainDsl {
  workspaceFiles?: Array<{ path: string; content: string }>;
}

export interface AgentListItem {
  ruleChain: { id: string; name: string };
}

export interface SessionItem {
  id: string;
  agentId: string;
  sessionKey: string;
  channel: string;
  scope: string;
  title: string;
  messageCount: number;
  createdAt: string;
  updatedAt: string;
}

export interface StoredToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

export interface SessionMessage {
  role: 'user' | 'assistant' | 'tool' | 'system';
  content: string;
  toolCalls?: StoredToolCall[];
  toolCallId?: string;
  name?: string;
  runId: string | null;
  createdAt: string;
}

export interface ToolForm {
  name: string;
  description: string;
  optIn: boolean;
  parameters: unknown;
  config: unknown;
}

export interface ToolForms {
  /** Each node type with the JSON schema of its `configuration`. */
  nodes: Array<{ type: string; description: string; configuration: unknown }>;
  tools: ToolForm[];
  toolKinds: string[];
  /** The JSON schema of one entry of an `ai/agent` node's `tools` (absent from older servers). */
  toolEntry?: unknown;
}

export interface PlatformView {
  enabled: boolean;
  accounts: Record<string, ChannelAccount>;
}

export interface Binding {
  agentId: string;
  match: { default?: boolean; channel?: string; accountId?: string };
}

export interface ProviderModel {
  name: string;
  alias?: string;
  context_window?: number;
}

export interface Provider {
  id: string;
  name: string;
  base_url: string;
  model: string;
  models: ProviderModel[];
  hasApiKey: boolean;
}

export interface ProviderTest {
  ok: boolean;
  latencyMs: number;
  method: 'models' | 'chat';
  models?: string[];
  error?: string;
}

export interface ServerConfig {
  server: { host: string; port: number };
  data: { root_dir: string; logs_dir: string };
  models: { default_provider: string; providers: Record<string, unknown> };
  security: { requireAuth: boolean; users: Record<string, boolean> };
}

// Shapes the typed REST client already defines (the same API), not written twice.
export type { ChannelAccount, CronDeliver, CronJob, CronRun, Skill, WorkspaceEntry } from '@agentry/client';
