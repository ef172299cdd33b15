/**
 * The fake model on its own, for benchmarks and manual tries:
 *   PORT=18080 FAKE_TOKENS=50 FAKE_CHUNK_DELAY_MS=0 npx tsx --conditions=@agentry/source libs/testing/src/fake-model-cli.ts
 * Binds 127.0.0.1 only; every chat request gets the same canned reply (FAKE_TOKENS deltas).
 */
import { startFakeModel } from './fake-model.js';

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`${name} must be a non-negative integer, got "${raw}"`);
    process.exit(1);
  }
  return n;
}

const port = intEnv('PORT', 18080);
const tokens = intEnv('FAKE_TOKENS', 50);
const chunkDelayMs = intEnv('FAKE_CHUNK_DELAY_MS', 0);
const text = Array.from({ length: tokens }, (_, i) => `tok${i} `);

const fake = await startFakeModel({ port, defaultReply: { text, chunkDelayMs } });
console.log(`fake model listening on ${fake.url} (${tokens} deltas, ${chunkDelayMs} ms apart)`);

const stop = () => {
  void fake.close().then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
