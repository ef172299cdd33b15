/**
 * Issue 39: what the logger costs a request, in one process, no I/O (lines go to a no-op
 * stream): a child logger (fastify makes one per request, the worker one per run) and one line
 * as fastify writes per request at `info` ("incoming request"). `createLogger` as it is, against
 * pino with the redact paths it had before (2026-11-29: pino's `redact` with `*.<name>` and
 * `*.*.<name>` wildcard paths). Alternates the two, several rounds; prints the median ns of each.
 *
 *   npx tsx --conditions=@agentry/source bench/log-cost.ts [--n=100000] [--rounds=5]
 */
import pino from 'pino';
import { createLogger } from '@agentry/runtime';

const argv = process.argv.slice(2);
const option = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const N = Number(option('n') ?? 100_000);
const ROUNDS = Number(option('rounds') ?? 5);

/** The paths `createLogger` gave pino's `redact` before issue 39's change. */
const BEFORE_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'headers.authorization',
  ...['password', 'api_key', 'apiKey', 'app_secret', 'appSecret', 'token', 'secret', 'jwtSecret', 'newPassword', 'oldPassword'].flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
];

const sink = { write: (_line: string) => undefined };
const loggers = {
  before: pino({ level: 'info', base: { service: 'gateway' }, redact: { paths: BEFORE_PATHS, censor: '[redacted]' } }, sink),
  now: createLogger({ service: 'gateway', level: 'info', destination: sink }),
};
/** What fastify's request serializer hands pino for "incoming request". */
const req = { method: 'POST', url: '/api/v1/chat/completions', host: '127.0.0.1:9527', remoteAddress: '127.0.0.1', remotePort: 50412 };

function nsPer(fn: (i: number) => void): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn(i);
  return Number(process.hrtime.bigint() - t) / N;
}

const results: Record<string, { child: number[]; line: number[] }> = { before: { child: [], line: [] }, now: { child: [], line: [] } };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, logger] of Object.entries(loggers)) {
    results[name]!.child.push(nsPer((i) => void logger.child({ reqId: `req-${i}` })));
    const child = logger.child({ reqId: 'req-1' });
    results[name]!.line.push(nsPer(() => child.info({ req }, 'incoming request')));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`| logger | ns per child() | ns per request line |\n|---|---:|---:|`);
for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${median(r.child).toFixed(0)} | ${median(r.line).toFixed(0)} |`);
