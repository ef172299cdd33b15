import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import { describeError } from './describe-error.js';
import type { Db } from './handle.js';
import type { DbLogger } from './logger.js';
import { migrations } from './migrations/index.js';

export class MigrationError extends Error {
  /** The migration that failed, when the failure was inside one. */
  readonly migration: string | undefined;

  constructor(message: string, migration: string | undefined, cause: unknown) {
    super(message, { cause });
    this.name = 'MigrationError';
    this.migration = migration;
  }
}

/** Names of all migrations, in the order they run. */
export function migrationNames(): string[] {
  return Object.keys(migrations).sort();
}

/**
 * Applies every pending migration. Safe to call from several processes at once: kysely's
 * Migrator takes an advisory lock, and runs the whole batch in one transaction, so a failure
 * leaves the schema as it was.
 */
export async function migrateToLatest(db: Db, logger?: DbLogger): Promise<{ applied: string[] }> {
  return runMigrations(db, migrations, logger);
}

/**
 * Migrations this database has not applied yet, in order (all of them on an empty database).
 * Reads only: creates nothing, takes no lock.
 */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations) };
  const migrator = new Migrator({ db: db as unknown as Kysely<unknown>, provider });
  const known = await migrator.getMigrations();
  return known.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/** The migrations this database has applied (kysely's own table), or null before its first. */
async function appliedNames(db: Kysely<unknown> | Db): Promise<string[] | null> {
  const { rows } = await sql<{ table: string | null }>`select to_regclass('kysely_migration')::text as table`.execute(db);
  if (rows[0]?.table == null) return null;
  return (await sql<{ name: string }>`select name from kysely_migration`.execute(db)).rows.map((r) => r.name);
}

/** migrateToLatest over a given set; exists so tests can feed it a failing migration. */
export async function runMigrations(
  db: Kysely<unknown> | Db,
  set: Record<string, Migration>,
  logger?: DbLogger,
): Promise<{ applied: string[] }> {
  // Every start of the embedded server comes here, nearly always with nothing to apply. Two reads
  // say so; kysely's Migrator first makes sure of its tables and takes its lock, ~10 statements
  // that cost an embedded restart 50-200 ms on PGlite's cold catalog (docs/benchmarks.md, "Issue
  // 39: start-up phases"). Anything else (a pending migration, or one applied that this code does
  // not know, which the Migrator refuses) goes to the Migrator as before.
  const done = await appliedNames(db);
  const names = Object.keys(set);
  if (done !== null && done.length === names.length && names.every((n) => done.includes(n))) return { applied: [] };
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(set) };
  const migrator = new Migrator({ db: db as Kysely<unknown>, provider });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((r) => r.status === 'Error')?.migrationName;
    const message = failed
      ? `migration ${failed} failed, none of this run was applied: ${describeError(error)}`
      : `migrations failed: ${describeError(error)}`;
    logger?.error({ err: error, migration: failed }, message);
    throw new MigrationError(message, failed, error);
  }
  const applied = results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
  // Debug: a first start applies every migration, and the caller's one summary line names them all.
  for (const name of applied) logger?.debug({ migration: name }, 'migration applied');
  return { applied };
}
