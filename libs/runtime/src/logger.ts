import fs from 'node:fs';
import path from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';
import { traceLogFields, tracingEnabled } from './tracing.js';

export type { Logger } from 'pino';

/**
 * Field names whose value never reaches a log, at any depth of any line (request headers
 * included: `req.headers.authorization`, `headers.cookie`), whatever a caller logs.
 */
export const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'x-api-key',
  'password',
  'api_key',
  'apiKey',
  'app_secret',
  'appSecret',
  'token',
  'secret',
  'jwtSecret',
  'newPassword',
  'oldPassword',
] as const;

const CENSORED = '"[redacted]"';
/**
 * A key of a JSON line named like a secret. Inside a JSON string every quote is escaped, so
 * `"name":` matches keys only, never text in a value or a message.
 */
const SECRET_KEY = new RegExp(`"(?:${SECRET_FIELDS.join('|')})":`, 'g');

/**
 * The finished JSON line with the value of every key named in SECRET_FIELDS replaced by
 * "[redacted]" (a string, number, object or array alike). Done on the line rather than by pino's
 * `redact` paths: its wildcard paths (`*.token`, `*.*.token`, needed to reach a secret wherever a
 * caller put it) ran on every child logger's bindings and every field of every line, 3 us per
 * `child()` (one per request) and ~14 us per line against ~1 us here; and a line covers what no
 * path list did (deeper fields, serializer output, bindings).
 */
export function redactLine(line: string): string {
  SECRET_KEY.lastIndex = 0;
  let match = SECRET_KEY.exec(line);
  if (match === null) return line;
  let out = '';
  let from = 0;
  while (match !== null) {
    const start = match.index + match[0].length;
    const end = jsonValueEnd(line, start);
    out += line.slice(from, start) + CENSORED;
    from = end;
    SECRET_KEY.lastIndex = end;
    match = SECRET_KEY.exec(line);
  }
  return out + line.slice(from);
}

/**
 * Where the JSON value starting at `i` ends (exclusive). A line that is no valid JSON there
 * (pino never writes one) is censored to its end, but for its newline: a secret must not leak
 * through a parser's mistake.
 */
function jsonValueEnd(s: string, i: number): number {
  let depth = 0;
  let inString = false;
  for (let j = i; j < s.length; j += 1) {
    const c = s.charCodeAt(j);
    if (inString) {
      if (c === 0x5c) j += 1; // backslash: the next character is escaped
      else if (c === 0x22) {
        inString = false;
        if (depth === 0) return j + 1;
      }
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth += 1;
    else if (c === 0x7d || c === 0x5d) {
      if (depth === 0) return j; // the end of the enclosing object: a bare value ended here
      depth -= 1;
      if (depth === 0) return j + 1;
    } else if (c === 0x2c && depth === 0) return j;
    else if (c === 0x0a && depth === 0) return j;
  }
  return s.endsWith('\n') ? s.length - 1 : s.length;
}

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
  const common = { level: opts.level, base, hooks: { streamWrite: redactLine }, ...mixin };
  const out = opts.destination ?? pino.destination({ dest: 1, sync: false });
  if (!opts.file) return pino(common, out);
  fs.mkdirSync(path.dirname(opts.file), { recursive: true });
  const file = pino.destination({ dest: opts.file, sync: false, mkdir: true });
  return pino(common, pino.multistream([{ stream: out, level: opts.level as pino.Level }, { stream: file, level: opts.level as pino.Level }]));
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '36', 40: '33', 50: '31', 60: '31' };
/** Fields every line carries that a person at the terminal does not need to read. */
const QUIET_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'err']);
/** A field's value is cut after this many characters: one line stays one line. */
const MAX_FIELD_CHARS = 160;

/** Where lines go: process.stdout, or a test's capture. */
export interface TextSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

/**
 * Log lines for a person at a terminal (`logging.format: pretty`, or `auto` on a TTY): pino's JSON
 * turned into `12:00:01 INFO  gateway listening  port=9527`, coloured on a TTY. `quiet()` raises
 * the bar to warnings once the start-up banner has said what matters, so that the terminal does
 * not keep scrolling; the log file (embedded mode) still gets every line.
 */
export class PrettyDestination implements DestinationStream {
  private minLevel = 0;
  constructor(private readonly sink: TextSink = process.stdout) {}

  /** From now on only warnings and errors reach the terminal. */
  quiet(): void {
    this.minLevel = 40;
  }

  /** Text that is no log line (the banner), written as it is. */
  print(text: string): void {
    this.sink.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  write(line: string): void {
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.sink.write(line.endsWith('\n') ? line : `${line}\n`);
      return;
    }
    const level = typeof entry.level === 'number' ? entry.level : 30;
    if (level < this.minLevel) return;
    this.sink.write(`${formatPretty(entry, this.sink.isTTY === true)}\n`);
  }
}

/** One JSON log entry as one human line (a stack, when an error has one, on the lines after). */
export function formatPretty(entry: Record<string, unknown>, colour: boolean): string {
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const time = typeof entry.time === 'number' ? new Date(entry.time).toTimeString().slice(0, 8) : '';
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const paint = (code: string, s: string) => (colour ? `\u001b[${code}m${s}\u001b[0m` : s);
  const fields = Object.entries(entry)
    .filter(([k, v]) => !QUIET_FIELDS.has(k) && v !== undefined)
    .map(([k, v]) => {
      const text = typeof v === 'string' ? (/[\s"=]/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v);
      return `${k}=${text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS)}…` : text}`;
    });
  const err = entry.err && typeof entry.err === 'object' ? (entry.err as { message?: unknown; stack?: unknown }) : undefined;
  const msg = [typeof entry.msg === 'string' ? entry.msg : '', err && typeof err.message === 'string' && !String(entry.msg ?? '').includes(err.message) ? err.message : '']
    .filter(Boolean)
    .join(': ');
  const head = [paint('90', time), paint(LEVEL_COLOURS[level] ?? '0', name), msg, fields.length > 0 ? paint('90', fields.join(' ')) : '']
    .filter(Boolean)
    .join(' ');
  // The stack only for errors and worse: a warning's stack is noise on a terminal.
  const stack = level >= 50 && err && typeof err.stack === 'string' ? `\n${paint('90', err.stack.split('\n').slice(1, 8).join('\n'))}` : '';
  return head + stack;
}

/**
 * `logging.format` resolved: `auto` is pretty when stdout is a terminal and JSON otherwise
 * (a pipe, a container log collector, a file).
 */
export function resolveLogFormat(format: 'auto' | 'json' | 'pretty', stdoutIsTTY: boolean): 'json' | 'pretty' {
  if (format === 'auto') return stdoutIsTTY ? 'pretty' : 'json';
  return format;
}
