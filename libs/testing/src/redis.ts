import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/**
 * A fresh key and channel prefix per test, so that tests share one Redis (and may run in
 * parallel) without seeing each other's queues, schedulers or messages.
 */
export function uniqueRedisPrefix(): string {
  return `t-${randomBytes(6).toString('hex')}`;
}

/** Deletes every key under `<prefix>:`; SCAN rather than KEYS so a busy server is not blocked. */
export async function cleanupRedisPrefix(url: string, prefix: string): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectionName: `${prefix}:cleanup` });
  // Reported by the awaited commands; the listener only keeps ioredis from printing it twice.
  client.on('error', () => {});
  try {
    await client.connect();
    const match = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`;
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', match, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await client.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

/** Deletes these exact keys: a test playing Redis losing (or expiring) what a service kept. */
export async function deleteRedisKeys(url: string, keys: string[]): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectionName: 'test:delete-keys' });
  client.on('error', () => {});
  try {
    await client.connect();
    return keys.length > 0 ? await client.del(...keys) : 0;
  } finally {
    client.disconnect();
  }
}
