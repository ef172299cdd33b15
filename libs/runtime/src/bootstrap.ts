import path from 'node:path';
import type { DestinationStream, Logger } from 'pino';
import type { Registry } from 'prom-client';
import { Errors } from '@agentry/errors';
import { withFileSecrets, openPglite, migrateToLatest, pendingMigrations, listSettings, setSetting, deleteSetting, type DbHandle, type JsonValue } from '@agentry/db';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { loadConfig, type LoadedConfig } from './config.js';
import { LiveConfig } from './live-config.js';
import { createLogger, PrettyDestination, resolveLogFormat } from './logger.js';
import { Lifecycle } from './lifecycle.js';
import { stopTracing, tracingEnabled } from './tracing.js';
import { HealthRegistry } from './health.js';
import { createMetricsRegistry, pgliteMemoryGauge } from './metrics.js';
import { Sealer, loadMasterKey } from './secrets.js';

/** Everything a service is built from. Services receive this; they never open resources. */
export interface Runtime {
  mode: 'embedded' | 'cluster';
  loaded: LoadedConfig;
  config: LiveConfig;
  logger: Logger;
  db: DbHandle;
  bus: Bus;
  lifecycle: Lifecycle;
  health: HealthRegistry;
  metrics: Registry;
  /** Seals and opens secrets at rest with the master key. */
  secrets: Sealer;
  /**
   * Set when log lines go to a person's terminal (`logging.format` pretty, or auto on a TTY): the
   * standalone prints its start-up banner there, then quiets it to warnings.
   */
  terminal?: PrettyDestination;
}

export interface BootstrapOptions {
  /** Names the process in logs and metrics (`gateway`, `standalone`, ...). */
  service: string;
  /** embedded: PGlite and in-process bus unless DATABASE_URL / REDIS_URL are given. */
  mode: 'embedded' | 'cluster';
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** Tests: capture log lines. */
  logDestination?: DestinationStream;
  /** Tests: bring an already open database or bus instead of the ones the mode implies. */
  openDb?: (logger: Logger) => Promise<DbHandle>;
  openBus?: (logger: Logger) => Bus;
}

/** Cluster services need both backends: say which variable is missing before opening anything. */
function requireEnv(opts: BootstrapOptions): { databaseUrl?: string; redisUrl?: string } {
  const databaseUrl = opts.env.DATABASE_URL || undefined;
  const redisUrl = opts.env.REDIS_URL || undefined;
  if (opts.mode === 'cluster') {
    const missing = [!databaseUrl && 'DATABASE_URL', !redisUrl && 'REDIS_URL', !opts.env.AGENTRY_SECRET_KEY && 'AGENTRY_SECRET_KEY'].filter(
      (m): m is string => Boolean(m),
    );
    if (missing.length > 0) {
      const list = missing.length > 1 ? `${missing.slice(0, -1).join(', ')} and ${missing.at(-1)} are` : `${missing[0]} is`;
      throw new Errors.CONFIG(
        `${list} not set: the ${opts.service} service needs Postgres, Redis and the master key in cluster mode (run \`npm start\` for embedded mode)`,
      );
    }
  }
  return { databaseUrl, redisUrl };
}

export async function bootstrap(given: BootstrapOptions): Promise<Runtime> {
  // Secrets from files (`AGENTRY_SECRET_KEY_FILE`, `DATABASE_PASSWORD_FILE`, ...) before anything reads the environment.
  const opts = { ...given, env: withFileSecrets(given.env) };
  const { databaseUrl, redisUrl } = requireEnv(opts);
  const loaded = loadConfig(opts);
  const { config } = loaded;
  const secrets = new Sealer(loadMasterKey({ envKey: opts.env.AGENTRY_SECRET_KEY, mode: opts.mode, rootDir: loaded.paths.rootDir }));
  // A test's capture stays JSON: only the real stdout may turn into human lines.
  const terminal =
    !opts.logDestination && resolveLogFormat(config.logging.format, process.stdout.isTTY === true) === 'pretty' ? new PrettyDestination(process.stdout) : undefined;
  const logger = createLogger({
    service: opts.service,
    level: config.logging.level,
    file: opts.mode === 'embedded' && !opts.logDestination ? path.join(loaded.paths.logsDir, 'agentry.log') : undefined,
    destination: opts.logDestination ?? terminal,
  });
  const lifecycle = new Lifecycle(logger, config.server.shutdown_timeout_ms);
  const health = new HealthRegistry();
  const metrics = createMetricsRegistry({ service: opts.service });
  lifecycle.add('logger', async () => {
    logger.flush();
  });
  // Closed after everything else (closers run in reverse): the last spans are those of the shutdown.
  if (tracingEnabled()) lifecycle.add('tracing', (remainingMs) => stopTracing(remainingMs));

  try {
    const db = opts.openDb
      ? await opts.openDb(logger)
      : databaseUrl
        ? // Imported here so that embedded mode never loads node-postgres.
          (await import('@agentry/db/postgres')).openPostgres({ url: databaseUrl, logger, prepare: opts.env.AGENTRY_PG_PREPARE !== 'false' })
        : await openPglite({ dataDir: path.join(loaded.paths.rootDir, 'pgdata'), logger });
    lifecycle.add('database', () => db.close());
    if (db.memoryBytes) pgliteMemoryGauge(metrics, db.memoryBytes);
    health.register('database', () => db.ping());
    // Embedded mode owns its database. In cluster mode migrations run once per rollout (the
    // `migrate` command or job), never on every replica's start: a replica waits for them.
    if (opts.mode === 'embedded' || opts.env.AGENTRY_MIGRATE_ON_START === 'true') {
      const { applied } = await migrateToLatest(db.db, logger);
      if (applied.length > 0) logger.info({ applied }, `database migrated (${applied.length} migration${applied.length === 1 ? '' : 's'} applied)`);
    } else {
      await waitForSchema(db.db, logger, Number(opts.env.AGENTRY_MIGRATION_WAIT_MS ?? 120_000));
    }

    const bus = opts.openBus
      ? opts.openBus(logger)
      : redisUrl
        ? // Imported here so that embedded mode never loads BullMQ and ioredis.
          (await import('@agentry/bus/redis')).createRedisBus({ url: redisUrl, prefix: opts.env.REDIS_PREFIX || 'agentry', logger, batchFrames: !config.reliability.rolling_upgrade })
      : createMemoryBus({ logger });
    lifecycle.add('bus', () => bus.close());
    if (bus.kind === 'redis') health.register('redis', () => bus.ping());

    const live = await LiveConfig.open({
      loaded,
      logger,
      bus: bus.pubsub,
      settings: {
        list: (prefix) => listSettings(db.db, prefix),
        // Config values are plain JSON by construction (validated by the schema).
        set: async (key, value) => void (await setSetting(db.db, key, value as JsonValue)),
        delete: async (key) => void (await deleteSetting(db.db, key)),
      },
    });
    lifecycle.add('config', () => live.close());
    live.onChange((c) => {
      logger.level = c.logging.level;
    });
    logger.info(
      { mode: opts.mode, config: loaded.source ?? 'built-in defaults', database: db.dialect, bus: bus.kind },
      `${opts.service} starting`,
    );
    return { mode: opts.mode, loaded, config: live, logger, db, bus, lifecycle, health, metrics, secrets, terminal };
  } catch (err) {
    await lifecycle.shutdown('start-up failed');
    throw err;
  }
}

/**
 * Waits until the database has every migration this build knows (the migrate job may be running
 * right now during a rollout), polling every 2 s; fails with what to do after `timeoutMs`.
 */
async function waitForSchema(db: DbHandle['db'], logger: Logger, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let said = false;
  for (;;) {
    const pending = await pendingMigrations(db);
    if (pending.length === 0) return;
    if (Date.now() >= deadline) {
      throw new Errors.CONFIG(
        `the database schema is behind this build: ${pending.length} migration(s) pending (first: ${pending[0]}). ` +
          'Run the migrations once (`npm run migrate`, or the image command `migrate`), or set AGENTRY_MIGRATE_ON_START=true',
      );
    }
    if (!said) logger.info({ pending }, 'waiting for database migrations (run `npm run migrate`)');
    said = true;
    await new Promise((resolve) => setTimeout(resolve, Math.min(2000, Math.max(0, deadline - Date.now()))));
  }
}
