import net from 'node:net';

/** Where the integration suites find their servers; `null` with a reason when absent. */
export interface TestServers {
  postgresUrl: string | null;
  postgresReason: string;
  redisUrl: string | null;
  redisReason: string;
}

const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/postgres';
const DEFAULT_REDIS = 'redis://127.0.0.1:6379';

/** Whether something accepts TCP connections at the URL's host and port (1 s at most). */
export function reachable(url: string, defaultPort: number): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname || '127.0.0.1', port: Number(u.port || defaultPort) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export async function resolveTestServers(): Promise<{ servers: TestServers; stop: () => Promise<void> }> {
  const stops: Array<() => Promise<unknown>> = [];
  const servers: TestServers = { postgresUrl: null, postgresReason: '', redisUrl: null, redisReason: '' };

  const pg = process.env.DATABASE_URL ?? DEFAULT_PG;
  if (await reachable(pg, 5432)) servers.postgresUrl = pg;
  const redis = process.env.REDIS_URL ?? DEFAULT_REDIS;
  if (await reachable(redis, 6379)) servers.redisUrl = redis;

  if (!servers.postgresUrl || !servers.redisUrl) {
    // Docker hosts: fall back to throwaway containers. Imported lazily so that runs with
    // local servers do not pay for it. Fails within milliseconds where no Docker runs.
    try {
      if (!servers.postgresUrl) {
        const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
        const c = await new PostgreSqlContainer('postgres:16-alpine').start();
        stops.push(() => c.stop());
        servers.postgresUrl = c.getConnectionUri();
      }
      if (!servers.redisUrl) {
        const { RedisContainer } = await import('@testcontainers/redis');
        const c = await new RedisContainer('redis:7-alpine').start();
        stops.push(() => c.stop());
        servers.redisUrl = c.getConnectionUrl();
      }
    } catch (err) {
      const why = `not reachable at ${servers.postgresUrl ? redis : pg} and testcontainers failed: ${(err as Error).message}`;
      if (!servers.postgresUrl) servers.postgresReason = `Postgres ${why}`;
      if (!servers.redisUrl) servers.redisReason = `Redis ${why}`;
    }
  }
  return {
    servers,
    stop: async () => {
      for (const stop of stops.reverse()) await stop();
    },
  };
}
