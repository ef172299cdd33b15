import { Worker } from 'node:worker_threads';

/**
 * Runs a model-written regular expression off the main thread with a deadline. JavaScript
 * regexes backtrack, so `(a+)+$` on a long line can spin for minutes; on the agent worker's
 * event loop that would stall every run. The worker is terminated at the deadline (V8 stops
 * regex execution on termination) and the caller gets RegexTimeoutError.
 */

export class RegexTimeoutError extends Error {
  constructor(ms: number) {
    super(`the regular expression ran longer than ${ms} ms (simplify it: nested quantifiers like (a+)+ backtrack without end)`);
    this.name = 'RegexTimeoutError';
  }
}

export interface GrepFile {
  path: string;
  text: string;
}

export interface GrepFileResult {
  path: string;
  /** 0-based indexes of matching lines (all of them, up to `maxLinesPerFile`). */
  lines: number[];
}

type Task =
  | { kind: 'first'; sources: string[]; text: string }
  | { kind: 'grep'; source: string; flags: string; files: GrepFile[]; maxLinesPerFile: number; invert: boolean }
  | { kind: 'replace'; source: string; flags: string; text: string; replacement: string; global: boolean };

// Plain JavaScript evaluated as a CommonJS worker: no file to resolve, whatever loader runs us.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const t = workerData;
if (t.kind === 'first') {
  let hit = -1;
  for (let i = 0; i < t.sources.length && hit < 0; i++) if (new RegExp(t.sources[i]).test(t.text)) hit = i;
  parentPort.postMessage(hit);
} else if (t.kind === 'grep') {
  const re = new RegExp(t.source, t.flags);
  const out = [];
  for (const f of t.files) {
    const lines = f.text.split('\\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    const hits = [];
    for (let i = 0; i < lines.length && hits.length < t.maxLinesPerFile; i++) {
      let line = lines[i];
      if (line.endsWith('\\r')) line = line.slice(0, -1);
      if (re.test(line) !== t.invert) hits.push(i);
    }
    if (hits.length > 0) out.push({ path: f.path, lines: hits });
  }
  parentPort.postMessage(out);
} else {
  const re = new RegExp(t.source, t.flags + (t.global ? 'g' : ''));
  let count = 0;
  const text = t.text.replace(re, (...args) => {
    count++;
    const groups = typeof args[args.length - 1] === 'object' ? args[args.length - 1] : undefined;
    const match = args[0];
    const captures = args.slice(1, groups ? -3 : -2);
    return t.replacement.replace(/\\$(\\$|&|\\d{1,2}|<[^>]*>)/g, (all, ref) => {
      if (ref === '$') return '$';
      if (ref === '&') return match;
      if (ref[0] === '<') return groups && groups[ref.slice(1, -1)] !== undefined ? groups[ref.slice(1, -1)] : '';
      const n = Number(ref);
      return n >= 1 && n <= captures.length ? (captures[n - 1] === undefined ? '' : captures[n - 1]) : all;
    });
  });
  const matches = count === 0 ? 0 : (t.global ? count : (t.text.match(new RegExp(t.source, t.flags + 'g')) || []).length);
  parentPort.postMessage({ text, count, matches });
}
`;

function run<T>(task: Task, timeoutMs: number, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: task, resourceLimits: { maxOldGenerationSizeMb: 256 } });
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      fn();
    };
    const timer = setTimeout(() => finish(() => reject(new RegexTimeoutError(timeoutMs))), timeoutMs);
    const onAbort = () => finish(() => reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted')));
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (value: T) => finish(() => resolve(value)));
    worker.once('error', (err) => finish(() => reject(err)));
    worker.once('exit', (code) => finish(() => reject(new Error(`the regex worker stopped (exit code ${code})`))));
  });
}

/**
 * The index of the first of `sources` that matches `text` (-1: none). One worker runs them all,
 * so a list costs one thread start and the deadline bounds the whole list.
 */
export function firstMatchInWorker(sources: string[], text: string, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<number> {
  if (sources.length === 0) return Promise.resolve(-1);
  return run({ kind: 'first', sources, text }, opts.timeoutMs, opts.signal);
}

/** Matching line indexes per file (files without a match are left out). */
export function grepInWorker(
  files: GrepFile[],
  opts: { source: string; flags: string; maxLinesPerFile: number; invert?: boolean; timeoutMs: number; signal?: AbortSignal },
): Promise<GrepFileResult[]> {
  if (files.length === 0) return Promise.resolve([]);
  return run({ kind: 'grep', source: opts.source, flags: opts.flags, files, maxLinesPerFile: opts.maxLinesPerFile, invert: opts.invert ?? false }, opts.timeoutMs, opts.signal);
}

/**
 * `text.replace(regex, replacement)` with `$1`, `$<name>`, `$&` and `$$` in the replacement.
 * `count` is the number of replacements made; `matches` how many matches the text has in all.
 */
export function replaceInWorker(
  text: string,
  opts: { source: string; flags: string; replacement: string; global: boolean; timeoutMs: number; signal?: AbortSignal },
): Promise<{ text: string; count: number; matches: number }> {
  return run({ kind: 'replace', source: opts.source, flags: opts.flags, text, replacement: opts.replacement, global: opts.global }, opts.timeoutMs, opts.signal);
}
