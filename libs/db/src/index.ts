export type { Database, JsonColumn, JsonValue, SettingsTable, TimestampDefaultNow } from './tables.js';
export type { Db, DbHandle } from './handle.js';
export type { DbLogger } from './logger.js';
export { openPostgres, type OpenPostgresOptions } from './postgres.js';
export { openPglite, dumpPglite, type OpenPgliteOptions } from './pglite.js';
export { migrateToLatest, migrationNames, MigrationError } from './migrate.js';
export { getSetting, setSetting, deleteSetting, listSettings, type Setting } from './repositories/settings.js';
