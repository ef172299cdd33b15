import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { LeaseKeeper, LeaseKeeperOptions } from '../ports.js';
import { LEASE_SCRIPT } from './scripts.js';

/**
 * The renewal loop of `Bus.keepLeases` on Redis, as the text of a worker thread (run with
 * `eval: true`, as the sandbox's is: a `.ts` worker entry does not load under tsx on Node 20,
 * and tsc copies no `.js` to dist). Its own connection and its own event loop: a main thread
 * busy for seconds (a large JSON parse, a slow synchronous tool) still renews, so a live worker
 * is not taken for dead; a process that dies takes the thread with it, so its leases lapse.
 * The main thread beats into shared memory; past `maxStallMs` without a beat (a loop stuck for
 * good) the thread stops renewing, and the run goes to another worker.
 *
 * Messages in: {type:'hold', key, ttlMs} | {type:'release', key} | {type:'stop'}.
 * Messages out: {type:'ready'} (connected) | {type:'lost', key} (another holder has it) | {type:'error', message} (at most one per failure streak).
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ioredis = require(workerData.ioredisPath);
const Redis = ioredis.Redis || ioredis.default || ioredis;
const conn = new Redis(workerData.url, {
  connectionName: workerData.connectionName,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  lazyConnect: false,
});
conn.on('error', () => {});
conn.once('ready', () => parentPort.postMessage({ type: 'ready' }));
conn.defineCommand('agentryLease', { numberOfKeys: 1, lua: workerData.lua });
const beat = new Int32Array(workerData.beat);
const started = workerData.started;
const held = new Map();
let failing = false;
let stopping = false;
let timer;
function mainAgeMs() {
  return Date.now() - started - Atomics.load(beat, 0) * 10;
}
async function renew() {
  if (held.size === 0 || mainAgeMs() > workerData.maxStallMs) return;
  await Promise.all([...held].map(async ([key, ttlMs]) => {
    try {
      const ok = await conn.agentryLease(key, workerData.owner, ttlMs);
      failing = false;
      if (ok === 1 || !held.has(key)) return;
      held.delete(key);
      parentPort.postMessage({ type: 'lost', key });
    } catch (err) {
      if (!failing) parentPort.postMessage({ type: 'error', message: String(err && err.message || err) });
      failing = true;
    }
  }));
}
// One renewal loop, every third of the shortest lease held. A hold that shortens the period
// restarts it (a new generation; an older loop's next turn ends it). A new key is not renewed at
// once: it was taken a moment ago, and renewing all held keys on every hold cost a command per
// run in hand for each new run.
let generation = 0;
let period = Infinity;
function periodNow() {
  let shortest = 3000;
  for (const ttl of held.values()) shortest = Math.min(shortest, ttl);
  return Math.max(50, Math.floor(shortest / 3));
}
function schedule(gen) {
  if (stopping || gen !== generation) return;
  period = periodNow();
  timer = setTimeout(() => renew().finally(() => schedule(gen)), period);
}
parentPort.on('message', (m) => {
  if (m.type === 'hold') {
    held.set(m.key, m.ttlMs);
    if (periodNow() < period) {
      clearTimeout(timer);
      schedule(++generation);
    }
  }
  else if (m.type === 'release') {
    held.delete(m.key);
    conn.agentryLease(m.key, workerData.owner, 1).catch(() => {});
  } else if (m.type === 'stop') {
    stopping = true;
    clearTimeout(timer);
    conn.quit().catch(() => conn.disconnect()).finally(() => parentPort.close());
  }
});
schedule(generation);
`;

/** The Redis adapter's `keepLeases`: one thread per keeper. */
export function startLeaseKeeper(url: string, leaseKey: (key: string) => string, logger: Logger, opts: LeaseKeeperOptions & { connectionName: string }): LeaseKeeper {
  const beat = new SharedArrayBuffer(4);
  const beats = new Int32Array(beat);
  const started = Date.now();
  // Tens of milliseconds since start fit an Int32 for 248 days: plenty for a beat's age.
  const tick = () => Atomics.store(beats, 0, Math.floor((Date.now() - started) / 10));
  tick();
  const beater = setInterval(tick, 100);
  beater.unref();
  const worker = new Worker(THREAD_SOURCE, {
    eval: true,
    workerData: {
      url,
      owner: opts.owner,
      lua: LEASE_SCRIPT,
      ioredisPath: createRequire(import.meta.url).resolve('ioredis'),
      beat,
      started,
      maxStallMs: opts.maxStallMs,
      connectionName: `${opts.connectionName}:lease-keeper`,
    },
  });
  worker.unref();
  const onLost = new Map<string, () => void>();
  let ready = false;
  worker.on('message', (m: { type: 'ready' } | { type: 'lost'; key: string } | { type: 'error'; message: string }) => {
    if (m.type === 'ready') {
      ready = true;
      return;
    }
    if (m.type === 'error') {
      logger.debug({ err: m.message }, 'lease renewal failed; the next renewal tries again');
      return;
    }
    const lost = onLost.get(m.key);
    onLost.delete(m.key);
    lost?.();
  });
  worker.on('error', (err) => {
    ready = false;
    logger.error({ err: err.message }, 'the lease keeper thread failed; the main thread renews the leases again');
  });
  worker.on('exit', () => (ready = false));
  let closed: Promise<void> | undefined;
  return {
    get ready() {
      return ready;
    },
    hold(key, ttlMs, lost) {
      onLost.set(leaseKey(key), lost);
      worker.postMessage({ type: 'hold', key: leaseKey(key), ttlMs: Math.max(1, Math.round(ttlMs)) });
    },
    release(key) {
      onLost.delete(leaseKey(key));
      worker.postMessage({ type: 'release', key: leaseKey(key) });
    },
    close() {
      closed ??= (async () => {
        clearInterval(beater);
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        worker.postMessage({ type: 'stop' });
        const timer = setTimeout(() => void worker.terminate(), 2_000);
        await exited;
        clearTimeout(timer);
      })();
      return closed;
    },
  };
}
