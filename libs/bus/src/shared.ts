import { Cron } from 'croner';
import { Errors } from '@agentry/errors';
import { UnrecoverableJobError, type CronSpec } from './ports.js';

/** How long a closing consumer lets aborted handlers settle before it stops waiting for them. */
export const ABORT_GRACE_MS = 2_000;
/** Used by Consumer.close() without an argument and by Bus.close(). */
export const DEFAULT_CLOSE_DEADLINE_MS = 10_000;
export const DEFAULT_BACKOFF_MS = 1_000;
/** The queue that carries cron fires, in both adapters. */
export const CRON_QUEUE = 'cron';

/** The reason a consumer aborts the signals of the jobs still running at its deadline. */
export class ConsumerClosingError extends Error {
  constructor() {
    super('consumer closed before the job finished');
    this.name = 'ConsumerClosingError';
  }
}

export function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** By name as well, so that an error class from a second copy of this module still counts. */
export function isUnrecoverable(err: Error): boolean {
  return err instanceof UnrecoverableJobError || err.name === 'UnrecoverableJobError';
}

/** JSON text of a message or payload; refuses what Redis could not carry either. */
export function encodeJson(value: unknown, what: string): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`${what} is not JSON-serialisable`);
  return text;
}

/**
 * Refuses a job id BullMQ would refuse (its own ids are decimal integers; `:` separates its keys),
 * in both adapters, so that an id accepted in embedded mode is accepted in cluster mode too.
 */
export function checkJobId(id: string): string {
  if (id === '' || id.includes(':') || String(parseInt(id, 10)) === id) {
    throw new TypeError(`job id ${JSON.stringify(id)}: must not be empty, a decimal integer or contain ':'`);
  }
  return id;
}

export function normaliseAttempts(attempts: number | undefined): number {
  return Math.max(1, Math.floor(attempts ?? 1));
}

/** Same curve as BullMQ's built-in `exponential` backoff, so both adapters retry alike. */
export function backoffDelay(baseMs: number, attemptsMade: number): number {
  return Math.round(2 ** (attemptsMade - 1) * baseMs);
}

/**
 * Rejects what either adapter would reject, so that a pattern accepted in embedded mode is also
 * accepted in cluster mode (croner and BullMQ's cron-parser differ on exotic syntax).
 */
export function validateCronSpec(spec: CronSpec): { pattern: string; timezone: string } {
  const pattern = spec.pattern.trim().replace(/\s+/g, ' ');
  const timezone = spec.timezone ?? 'UTC';
  try {
    new Cron(pattern, { mode: '6-part', timezone }).nextRun();
  } catch (err) {
    throw new Errors.VALIDATION(`cron pattern "${spec.pattern}" (${timezone}): ${toError(err).message}`);
  }
  return { pattern, timezone };
}

/** Resolves true when `promise` settles within `ms`, false otherwise; leaves no timer behind. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Calls a caller-supplied callback without letting its failure change the bus's behaviour. */
export function safeCall(fn: () => unknown, onError: (err: Error) => void): void {
  try {
    const result = fn();
    if (isThenable(result)) result.then(undefined, (err: unknown) => onError(toError(err)));
  } catch (err) {
    onError(toError(err));
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/** Node's timers overflow past ~24.8 days and then fire at once; yearly schedules need longer. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class LongTimer {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly fn: () => void,
    delayMs: number,
  ) {
    this.arm(Date.now() + delayMs);
  }

  clear(): void {
    clearTimeout(this.timer);
  }

  private arm(due: number): void {
    const left = Math.max(0, due - Date.now());
    this.timer = setTimeout(() => (left > MAX_TIMER_MS ? this.arm(due) : this.fn()), Math.min(left, MAX_TIMER_MS));
  }
}
