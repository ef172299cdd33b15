import type { UserRole } from '@agentry/contracts';

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

/*
 * The answers of agents, rules, sessions, users, auth, config, tools and models: the gateway's
 * response schemas (`@agentry/contracts`), the ones it serializes with, so the client cannot
 * drift from them. Types only: the client takes no runtime dependency.
 */
export type {
  SuccessBody as Success,
  RuleChainDocument as RuleChainDsl,
  AgentListItem,
  AgentTemplate,
  RuleListItem,
  Session,
  SessionMessage,
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
} from '@agentry/contracts';

export type SkillScope = 'global' | 'local';

export interface Skill {
  name: string;
  description: string;
  /** Left out of lists. */
  content?: string;
  scope: SkillScope;
  agentId?: string;
  status: 'active' | 'draft';
  createdAt: string;
  updatedAt: string;
}

export interface SkillUploadResult {
  created: string[];
  updated: string[];
  skipped: Array<{ entry: string; reason: string }>;
}

export interface WorkspaceEntry {
  name: string;
  isDir: boolean;
  size?: number;
  modTime?: string;
}

/** A written entry: the listed fields plus its normalised path. */
export interface WorkspaceWritten extends WorkspaceEntry {
  path: string;
}

/** A file's content: text as it is, bytes that are not UTF-8 as base64. */
export interface WorkspaceFile {
  content: string;
  encoding?: 'base64';
}

export interface CronDeliver {
  platform: string;
  accountId: string;
  chatId: string;
}

export interface CronJob {
  id: string;
  name: string;
  schedule: string;
  message: string;
  target: string;
  disabled: boolean;
  timezone: string;
  deliver: CronDeliver | null;
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastStatus: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewCronJob {
  name: string;
  schedule: string;
  message: string;
  target: string;
  timezone?: string;
  disabled?: boolean;
  deliver?: CronDeliver | null;
}

export interface CronRun {
  id: string;
  cronJobId: string;
  scheduledAt: string;
  runId: string | null;
  startedAt: string;
  finishedAt: string | null;
  status: string;
  outputExcerpt: string | null;
  error: string | null;
  deliveryStatus: string | null;
  deliveryError: string | null;
}

/** `POST /sessions/clear`: omitted fields match any session. */
export interface SessionFilter {
  agentId?: string;
  sessionKey?: string;
  channel?: string;
  scope?: string;
}

/** A channel account as read (camelCase; secrets only as `hasSecret`). */
export interface ChannelAccount {
  id: string;
  name?: string;
  enabled?: boolean;
  dmPolicy?: string;
  groupPolicy?: string;
  appId?: string;
  hasSecret?: boolean;
  [extra: string]: unknown;
}

export interface ChannelPlatformView {
  enabled: boolean;
  accounts: Record<string, ChannelAccount>;
}

export interface ChannelsView {
  platforms: Record<string, ChannelPlatformView>;
}

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
