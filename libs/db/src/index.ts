export type { Database, JsonColumn, JsonValue, SettingsTable, TimestampDefaultNow, UsersTable, ChannelAccountsTable, ModelProvidersTable, UsageKind } from './tables.js';
export type { Db, DbHandle } from './handle.js';
export type { RuleChainsTable, SkillsTable, WorkspaceEntriesTable, SessionMessageStatus } from './tables.js';
export { inLockedTransaction, inTransaction, isForeignKeyViolation, isUniqueViolation } from './transaction.js';
export {
  ACTIVE_RUN_STATUSES,
  FINAL_RUN_STATUSES,
  isActiveRunStatus,
  isFinalRunStatus,
  type ActiveRunStatus,
  type FinalRunStatus,
  type RunStatus,
  type RunSource,
  type CronRunStatus,
  type CronDeliveryStatus,
  type OutboundStatus,
} from './tables.js';
export { isDatabaseUnavailable } from './describe-error.js';
export * from './repositories/rule-chains.js';
export * from './repositories/skills.js';
export * from './repositories/workspace.js';
export type { DbLogger } from './logger.js';
// Postgres is `@agentry/db/postgres`: embedded mode never loads node-postgres.
export { openPglite, dumpPglite, type OpenPgliteOptions } from './pglite.js';
export { migrateToLatest, migrationNames, pendingMigrations, MigrationError } from './migrate.js';
export { getSetting, setSetting, setSettingIfAbsent, deleteSetting, listSettings, type Setting } from './repositories/settings.js';
export * from './repositories/users.js';
export * from './repositories/channel-accounts.js';
export * from './repositories/runs.js';
export * from './repositories/sessions.js';
export * from './repositories/providers.js';
export type { CronJobsTable, CronRunsTable } from './tables.js';
export * from './repositories/cron.js';
export type { BindingsTable, OutboundMessagesTable, InboundEventsTable } from './tables.js';
export * from './repositories/channels.js';
export * from './repositories/retention.js';
export * from './repositories/usage.js';
export { withFileSecrets, FILE_SECRET_VARIABLES } from './env-files.js';
