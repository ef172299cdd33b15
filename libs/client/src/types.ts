import type { UserRole } from '@agentry/contracts';

/**
 * Shapes of the REST API as the gateway answers them (the spec's names; fields the spec leaves
 * open follow the gateway). Unknown extra fields are kept: the client never strips a response.
 */

/**
 * `?fieldValidation=` of a chain write: unknown node-configuration fields are refused (`Strict`),
 * kept and reported as `Warning` headers (`Warn`, the server's default: see `onWarning`) or kept
 * silently (`Ignore`).
 */
export interface ChainWriteOptions {
  fieldValidation?: 'Strict' | 'Warn' | 'Ignore';
}

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

/*
 * The answers of agents, rules, sessions, users, auth, config, tools and models: the gateway's
 * response schemas (`@agentry/contracts`), the ones it serializes with, so the client cannot
 * drift from them. Types only: the client takes no runtime dependency.
 */
export type {
  SuccessBody as Success,
  ReloadResult,
  RuleChainDocument as RuleChainDsl,
  AgentListItem,
  AgentTemplate,
  RuleListItem,
  Session,
  SessionMessage,
  SessionCompaction,
  ConfigDocument as ConfigView,
  LoginResult,
  UserRole,
  User,
  PasswordChanged,
  ModelList,
  ToolInfo,
  AuthStatus,
  ApiKeyAnswer,
  ApiKeyRegenerated,
  UserList,
  UsageReport,
  UsageRow,
  UsageGroupBy,
  Budget,
} from '@agentry/contracts';

import type { UsageGroupBy as UsageGroup } from '@agentry/contracts';

/** `GET /usage`: `from`/`to` ISO dates or times (a date as `to` takes in the whole day); `principal` for admins. */
export interface UsageQuery {
  groupBy?: UsageGroup;
  from?: string;
  to?: string;
  principal?: string;
}

// Skills, workspace files and cron jobs: the gateway's response schemas are their one definition.
export type { Skill, SkillScope, SkillUploadResult, WorkspaceEntry, WorkspaceFile, WorkspaceWritten, CronDeliver, CronJob, CronRun, AgentHeartbeat, HeartbeatSettings } from '@agentry/contracts';
export type { RunStep, RunSteps, RunSummary } from '@agentry/contracts';
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

/** What an admin may change of a user; a new password or a disable revokes the user's tokens. */
export interface UserChange {
  role?: UserRole;
  disabled?: boolean;
  password?: string;
}

// Shapes the web UI reads beyond the ones above, from the same schemas where the gateway has one.
export type {
  ToolForms,
  ChannelBinding as Binding,
  ProviderModel,
  ModelProvider as Provider,
  ProviderTestResult as ProviderTest,
} from '@agentry/contracts';
import type { RuleChainDocument, ToolForms as ToolFormsAnswer } from '@agentry/contracts';

/** One node of a rule chain's DSL. */
export type DslNode = RuleChainDocument['metadata']['nodes'][number];

/** One entry of a stored assistant message's `toolCalls`. */
export interface StoredToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** A tool as `GET /tools/forms` describes it for a form. */
export type ToolForm = ToolFormsAnswer['tools'][number];
