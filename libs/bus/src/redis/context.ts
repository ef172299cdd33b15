import { Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { Errors } from '@agentry/errors';
import { defineScripts, type ScriptCommands } from './scripts.js';

/** Finished jobs kept for inspection; bounded so that Redis memory stays flat. */
export const KEEP_COMPLETED = { count: 1_000, age: 24 * 3600 };
export const KEEP_FAILED = { count: 5_000, age: 7 * 24 * 3600 };
/** Entries of a queue's BullMQ events stream kept (nothing reads them; see `queue()`). */
export const EVENTS_KEPT = 100;

/** Default longest wait for a connection that has never been up yet (start-up); afterwards, none. */
export const FIRST_CONNECT_MS = 5_000;

/**
 * Connections and lazily created BullMQ queues shared by the three Redis adapters of one bus.
 * Connection names carry the prefix so that `CLIENT LIST` shows who is who.
 */
export class RedisContext {
  readonly producer: Redis & ScriptCommands;
  readonly subscriber: Redis;
  private readonly everReady = new WeakSet<Redis>();
  private readonly queues = new Map<string, Queue<unknown>>();
  private readonly workerConnections = new Set<Redis>();
  closed = false;

  constructor(
    readonly url: string,
    readonly prefix: string,
    readonly logger: Logger,
    private readonly firstConnectMs: number = FIRST_CONNECT_MS,
  ) {
    // Producers fail fast: a request handler must get an error now rather than hang while Redis
    // is away, and no command may be queued to run minutes later.
    this.producer = defineScripts(this.connect('producer', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: firstConnectMs,
      // Commands issued in the same tick (many requests' enqueues, publishes and rate-limit
      // checks under load) leave in one write: on loopback a write costs more than the command.
      enableAutoPipelining: true,
    }));
    // Fails fast as well; ioredis re-subscribes its channels by itself after a reconnect.
    this.subscriber = this.connect('subscriber', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: firstConnectMs,
      autoResubscribe: true,
    });
  }

  /** Own connection per worker: BullMQ's production guide wants retries forever on these. */
  workerConnection(label: string): Redis {
    const conn = this.connect(`worker:${label}`, { maxRetriesPerRequest: null });
    this.workerConnections.add(conn);
    return conn;
  }

  async releaseWorkerConnection(conn: Redis, force: boolean): Promise<void> {
    this.workerConnections.delete(conn);
    await closeConnection(conn, force);
  }

  /** Throws NOT_READY unless the connection is up; waits only for the very first connect. */
  async ready(conn: Redis): Promise<void> {
    if (this.closed) throw new Errors.NOT_READY('the bus is closed');
    if (conn.status === 'ready') return;
    if (this.everReady.has(conn) || conn.status === 'end') throw notConnected();
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        conn.off('ready', onReady);
        conn.off('end', onEnd);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(notConnected());
      const timer = setTimeout(() => done(notConnected()), this.firstConnectMs);
      conn.once('ready', onReady);
      conn.once('end', onEnd);
    });
  }

  /**
   * Runs a command on a connection that must be up; a command cut off by the connection going
   * away fails as NOT_READY (callers answer 503 rather than 500), other errors stay as they are.
   */
  async command<T>(conn: Redis, fn: () => Promise<T>): Promise<T> {
    await this.ready(conn);
    try {
      return await fn();
    } catch (err) {
      if (conn.status !== 'ready' || isConnectionLoss(err)) throw new Errors.NOT_READY('Redis is not connected', { cause: err });
      throw err;
    }
  }

  async queue(name: string): Promise<Queue<unknown>> {
    // Checked before a Queue exists: BullMQ's first use of a shared connection would otherwise
    // wait for it to come up, however long that takes.
    await this.ready(this.producer);
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue<unknown>(name, {
        connection: this.producer,
        prefix: this.prefix,
        defaultJobOptions: { removeOnComplete: KEEP_COMPLETED, removeOnFail: KEEP_FAILED },
        // BullMQ appends every job's state changes to an events stream (4 XADDs a run) that only
        // a QueueEvents listener reads, and nothing here has one: keep it short (BullMQ's default
        // is 10 000 entries a queue) rather than hold what nobody reads. Its scripts still write it.
        streams: { events: { maxLen: EVENTS_KEPT } },
      });
      queue.on('error', (err) => this.logger.error({ err, queue: name }, 'queue error'));
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** Channel names get the prefix too, so that buses with different prefixes never hear each other. */
  channel(name: string): string {
    return `${this.prefix}:${name}`;
  }

  /** After the consumers: queues, then every connection this bus opened. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(
      [...this.queues.values()].map((q) => q.close().catch((err: unknown) => this.logger.warn({ err }, 'queue close failed'))),
    );
    this.queues.clear();
    await Promise.all([...this.workerConnections].map((c) => closeConnection(c, false)));
    this.workerConnections.clear();
    await Promise.all([closeConnection(this.subscriber, false), closeConnection(this.producer, false)]);
  }

  private connect(role: string, options: RedisOptions): Redis {
    const conn = new Redis(this.url, { ...options, connectionName: `${this.prefix}:${role}` });
    conn.on('ready', () => this.everReady.add(conn));
    // Without a listener ioredis prints every reconnect failure as an unhandled error event.
    conn.on('error', (err: Error) => this.logger.warn({ err, role }, 'redis connection error'));
    return conn;
  }
}

/** ioredis's errors for a command whose connection dropped (no reply will come). */
function isConnectionLoss(err: unknown): boolean {
  const e = err as { name?: unknown; message?: unknown; code?: unknown } | null;
  if (e?.name === 'MaxRetriesPerRequestError') return true;
  if (typeof e?.code === 'string' && ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(e.code)) return true;
  return typeof e?.message === 'string' && /Connection is closed|Stream isn't writeable|enableOfflineQueue/.test(e.message);
}

function notConnected(): Error {
  return new Errors.NOT_READY('Redis is not connected');
}

async function closeConnection(conn: Redis, force: boolean): Promise<void> {
  if (conn.status === 'end') return;
  if (force || conn.status !== 'ready') {
    conn.disconnect();
    return;
  }
  try {
    await conn.quit();
  } catch {
    conn.disconnect();
  }
}
