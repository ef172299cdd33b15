import fs from 'node:fs';
import path from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';
import { traceLogFields, tracingEnabled } from './tracing.js';

export type { Logger } from 'pino';

/**
 * Paths pino blanks in every line. Secrets must never reach a log, whatever a caller logs:
 * request headers, and any field named like a credential at the first two levels.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'headers.authorization',
  ...['password', 'api_key', 'apiKey', 'app_secret', 'appSecret', 'token', 'secret', 'jwtSecret', 'newPassword', 'oldPassword'].flatMap((k) => [
    k,
    `*.${k}`,
    `*.*.${k}`,
  ]),
];

export interface LoggerOptions {
  service: string;
  level: string;
  /** Also append JSON lines to this file (embedded mode keeps logs under data.logs_dir). */
  file?: string;
  /** Where lines go instead of stdout (tests capture logs here). */
  destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  const base = { service: opts.service };
  // With tracing on, every line written inside a span names it (trace_id, span_id); off, no mixin runs.
  const mixin = tracingEnabled() ? { mixin: traceLogFields } : {};
  const common = { level: opts.level, base, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, ...mixin };
  const out = opts.destination ?? pino.destination({ dest: 1, sync: false });
  if (!opts.file) return pino(common, out);
  fs.mkdirSync(path.dirname(opts.file), { recursive: true });
  const file = pino.destination({ dest: opts.file, sync: false, mkdir: true });
  return pino(common, pino.multistream([{ stream: out, level: opts.level as pino.Level }, { stream: file, level: opts.level as pino.Level }]));
}
