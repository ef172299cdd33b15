/**
 * The three messaging ports every service uses. Each has two adapters: Redis (BullMQ and
 * ioredis; cluster mode) and in-process (embedded mode). Service code sees only these types
 * and never knows which adapter it has.
 */

import type { PubSubMessages, QueuePayloads } from '@agentry/contracts';

/**
 * Which payload each queue (or message each channel) carries: an object type keyed by name.
 * The queue and pub/sub ports are generic over one so that services get the maps of
 * `@agentry/contracts` by default while the bus's own tests bring theirs; the adapters never
 * look inside a payload.
 */
export type PayloadMap = object;
/** The names a map allows (a template literal index signature allows a whole family). */
export type NameOf<M extends PayloadMap> = keyof M & string;

export interface JobOptions {
  /**
   * The job's id (`enqueue` answers it): enqueueing an id that is still waiting, delayed or
   * running adds nothing. A job with an id is forgotten once it finishes (not kept, not counted as
   * completed or failed), so the id is free again at once: a run enqueued again after its job
   * failed for good gets a new job. Not a decimal integer (the queue's own ids) and no `:`.
   */
  jobId?: string;
  /** Total tries including the first (default 1: no retry). */
  attempts?: number;
  /** Base of the exponential backoff between tries, in ms (default 1000). */
  backoffMs?: number;
  /** Run no earlier than this many ms from now. */
  delayMs?: number;
}

export interface Job<T> {
  id: string;
  queue: string;
  data: T;
  /** Tries made before this one (0 on the first). */
  attemptsMade: number;
  /** Total tries allowed. */
  attempts: number;
}

/**
 * A handler resolves to complete the job, throws to fail this try (retried while tries are
 * left), or throws UnrecoverableJobError to fail it for good. The signal aborts when the
 * consumer is closing past its deadline.
 */
export type JobHandler<T> = (job: Job<T>, signal: AbortSignal) => Promise<void>;

export interface ConsumerOptions {
  concurrency: number;
  /**
   * How long a job whose process died stays claimed before another consumer takes it over
   * (Redis: the lock duration and the stalled-check interval; default 30 s). In-process: unused.
   */
  stallMs?: number;
  /** Called once per try that failed (for logs and metrics). */
  onFailed?: (job: Job<unknown>, err: Error, willRetry: boolean) => void;
}

export interface Consumer {
  /** Stop taking jobs, wait for running ones up to the deadline, then abort them. */
  close(deadlineMs?: number): Promise<void>;
}

export interface JobQueue<M extends PayloadMap = QueuePayloads> {
  enqueue<Q extends NameOf<M>>(queue: Q, data: M[Q], opts?: JobOptions): Promise<string>;
  consume<Q extends NameOf<M>>(queue: Q, handler: JobHandler<M[Q]>, opts: ConsumerOptions): Consumer;
  /** Jobs waiting, delayed or running, and the finished ones kept (jobs enqueued without an id; for health, metrics and tests). */
  counts(queue: NameOf<M>): Promise<{ waiting: number; active: number; delayed: number; failed: number; completed: number }>;
}

export type Unsubscribe = () => Promise<void>;

/**
 * Where a published message is also kept, for a subscriber that comes late (a client resuming a
 * stream on another replica): appended to the log `log`, which holds the last `maxLen` messages
 * and is forgotten `ttlMs` after its last append.
 */
export interface KeepOptions {
  log: string;
  maxLen: number;
  ttlMs: number;
}

export interface PubSub<M extends PayloadMap = PubSubMessages> {
  /**
   * Publishes a JSON-serialisable message; resolves once the broker has it. With `keep`, the
   * message is appended to that log in the same step (Redis: one script, one round trip), so a
   * reader that subscribes and then reads the log misses nothing.
   */
  publish<C extends NameOf<M>>(channel: C, message: M[C], keep?: KeepOptions): Promise<void>;
  /** The messages kept in `log`, oldest first ([] once it has expired or was never written). */
  kept(log: string): Promise<unknown[]>;
  /** Empties `log` (a run starting again must not leave its first try's messages to a late reader). */
  clearKept(log: string): Promise<void>;
  /** Resolves once the subscription is active, so a publish after it is never missed. */
  subscribe<C extends NameOf<M>>(channel: C, handler: (message: M[C]) => void): Promise<Unsubscribe>;
  /**
   * How many subscriptions each channel has right now, across every process on the broker
   * (Redis: `PUBSUB NUMSUB`, one per subscribed connection; in-process: the handlers), in the
   * order asked. Throws when the broker is unreachable: no answer is not "nobody listens".
   */
  listeners(channels: readonly NameOf<M>[]): Promise<number[]>;
}

export interface CronSpec {
  /** Six fields: second minute hour day month weekday. */
  pattern: string;
  /** IANA time zone (default UTC). */
  timezone?: string;
}

export interface CronFire<T> {
  id: string;
  /** The tick this fire belongs to (not when the handler started). */
  scheduledAt: Date;
  data: T;
}

export interface CronScheduler {
  /** Create or replace schedule `id`. Safe to call from several replicas at once. */
  upsert<T>(id: string, spec: CronSpec, data: T): Promise<void>;
  remove(id: string): Promise<void>;
  list(): Promise<Array<{ id: string; pattern: string; timezone: string; next: Date | null }>>;
  /** Handles fires; across all replicas, each tick of each schedule reaches one handler once. */
  consume<T>(handler: (fire: CronFire<T>) => Promise<void>, opts: { concurrency: number }): Consumer;
}

/** At most `limit` hits per `windowMs`, of which up to `burst` (default `limit`) may come at once. */
export interface RateLimitRule {
  limit: number;
  windowMs: number;
  burst?: number;
}

export interface RateLimitOptions {
  /** Answer whether a hit would be allowed now without counting one (a check before the work that is counted). */
  peek?: boolean;
}

export interface RateLimitResult {
  allowed: boolean;
  /** Hits still allowed right now after this one. */
  remaining: number;
  /** When refused: milliseconds until a hit would be allowed again (0 when allowed). */
  retryAfterMs: number;
}

export interface Bus<Q extends PayloadMap = QueuePayloads, C extends PayloadMap = PubSubMessages> {
  readonly kind: 'redis' | 'memory';
  readonly queue: JobQueue<Q>;
  readonly pubsub: PubSub<C>;
  readonly scheduler: CronScheduler;
  /** Throws when the backend is unreachable (readiness checks). */
  ping(): Promise<void>;
  /**
   * Counts one hit of `key` against `rule` (a token bucket: `burst` tokens, refilled at
   * `limit` per `windowMs`) and says whether it is allowed. A refused hit costs nothing. Every
   * bus on the same backend and prefix shares the count (Redis: one script on the server's clock),
   * so a limit holds across replicas. Throws when the backend is unreachable.
   */
  rateLimit(key: string, rule: RateLimitRule, opts?: RateLimitOptions): Promise<RateLimitResult>;
  /** Forgets `key`'s count: its bucket is full again (a login that succeeded clears its failures). */
  clearRateLimit(key: string): Promise<void>;
  /**
   * Adds `by` (0: only reads) to the counter `key` and answers its new value. The counter is
   * created at 0 with a lifetime of `ttlMs` by its first call and is gone after it: a fixed
   * window when the caller names the window in the key (`tokens:<who>:<day>`). Every bus on
   * the same backend and prefix shares it (Redis: INCRBY with PEXPIRE). Throws when the backend
   * is unreachable.
   */
  count(key: string, by: number, ttlMs: number): Promise<number>;
  /**
   * `count` with a ceiling, in one atomic step: adds `by` to the counter `key` only when the
   * sum stays at or under `max`, else adds nothing. Answers whether it was added and the value
   * now (the sum, or the unchanged count). The counter's lifetime is `count`'s. A budget's
   * reservation before the work it pays for: concurrent callers cannot all pass one check and
   * then all spend. Throws when the backend is unreachable.
   */
  reserve(key: string, by: number, max: number, ttlMs: number): Promise<{ granted: boolean; value: number }>;
  /**
   * Takes or renews the lease `key` for `owner` for `ttlMs`: true when `owner` holds it now
   * (it was free, lapsed or already `owner`'s), false when someone else holds it. Atomic on the
   * backend (Redis: one SET NX when free, else one script), shared by every bus on the same
   * backend and prefix. Throws when the backend is unreachable.
   */
  lease(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Who holds each lease, in the order asked (null: nobody, or it lapsed). One command however many. */
  leaseHolders(keys: readonly string[]): Promise<Array<string | null>>;
  /**
   * Keeps leases renewed off this process's event loop (Redis: a thread with its own
   * connection), so a main thread busy for seconds is not taken for dead, while a process that
   * dies loses its leases at once. Absent on the memory bus: one process has nobody to hand a
   * run to, and the caller renews on its own timer.
   */
  keepLeases?(opts: LeaseKeeperOptions): LeaseKeeper;
  /** Closes consumers first, then connections. */
  close(): Promise<void>;
}

export interface LeaseKeeperOptions {
  /** The holder the leases are taken for (`Bus.lease`'s owner). */
  owner: string;
  /** Past this long without the main thread running, renewals stop: a loop stuck for good lets its leases lapse. */
  maxStallMs: number;
}

export interface LeaseKeeper {
  /** Renewing (its thread is up and connected); until then, and should it fail, the caller renews itself. */
  readonly ready: boolean;
  /** Renews `key` (taken already with `Bus.lease`) every third of `ttlMs` until released; `lost` when another owner has it. */
  hold(key: string, ttlMs: number, lost: () => void): void;
  /** Stops renewing `key` and gives it up at once. */
  release(key: string): void;
  /** Stops renewing everything (the leases then lapse by themselves). */
  close(): Promise<void>;
}

/** Thrown by a job handler for input that no retry can fix. */
export class UnrecoverableJobError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnrecoverableJobError';
  }
}
