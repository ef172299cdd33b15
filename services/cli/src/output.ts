import type { Output } from './setup.js';

/** One column of a table: its header and how a row shows in it. */
export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
  /** Longest cell before it is cut with an ellipsis (default 60). */
  max?: number;
  align?: 'left' | 'right';
}

/** A cell as text: empty values as `-`, everything on one line. */
export function cell(value: unknown, max = 60): string {
  let s: string;
  if (value === undefined || value === null || value === '') s = '-';
  else if (typeof value === 'string') s = value;
  else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') s = String(value);
  else s = JSON.stringify(value);
  s = s.replace(/[\r\n\t]+/g, ' ');
  return s.length > max ? `${s.slice(0, Math.max(1, max - 1))}…` : s;
}

/** `2026-11-22T01:02:03.456Z` as `2026-11-22 01:02:03` (UTC), for tables. */
export function shortTime(iso: unknown): string | null {
  if (typeof iso !== 'string' || iso === '') return null;
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})/.exec(iso);
  return m ? `${m[1]} ${m[2]}` : iso;
}

/**
 * Rows as an aligned table: upper-case headers, columns two spaces apart, no trailing
 * spaces, one line per row. Ends with a newline.
 */
export function formatTable<T>(rows: readonly T[], columns: ReadonlyArray<Column<T>>): string {
  const cells = rows.map((row) => columns.map((c) => cell(c.value(row), c.max)));
  const headers = columns.map((c) => c.header.toUpperCase());
  const widths = columns.map((_, i) => Math.max(headers[i]!.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (columns[i]!.align === 'right' ? v.padStart(widths[i]!) : i === values.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...cells.map(line)].join('\n')}\n`;
}

/** Flat objects as `key: value` lines (keys aligned); anything nested as indented JSON. */
export function formatObject(value: unknown): string {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return `${JSON.stringify(value, null, 2)}\n`;
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.some(([, v]) => v !== null && typeof v === 'object')) return `${JSON.stringify(value, null, 2)}\n`;
  const width = Math.max(0, ...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${v === null || v === undefined ? '-' : String(v)}`).join('\n') + '\n';
}

/**
 * What commands print. In JSON mode (`--json`, or stdout is not a terminal) every command
 * prints JSON on stdout and nothing else; on a terminal, lists are tables and actions say
 * what they did in one line.
 */
export class Printer {
  constructor(
    private readonly stdout: Output,
    private readonly stderr: Output,
    readonly jsonMode: boolean,
  ) {}

  json(value: unknown): void {
    this.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  text(s: string | Uint8Array): void {
    this.stdout.write(s);
  }

  list<T>(items: readonly T[], columns: ReadonlyArray<Column<T>>, empty: string): void {
    if (this.jsonMode) return this.json(items);
    if (items.length === 0) return this.text(`${empty}\n`);
    this.text(formatTable(items, columns));
  }

  object(value: unknown): void {
    if (this.jsonMode) return this.json(value);
    this.text(formatObject(value));
  }

  /** An action's outcome: the server's answer in JSON mode, else one line. */
  done(message: string, value: unknown): void {
    if (this.jsonMode) return this.json(value);
    this.text(`${message}\n`);
  }

  /** A note for a human, on stderr (never mixed into output meant for a program). */
  note(s: string): void {
    this.stderr.write(`${s}\n`);
  }
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A spinner on stderr while a request runs, only when stderr is a terminal, and only after
 * 150 ms (quick answers show nothing). `stop()` erases it.
 */
export class Spinner {
  #timer: NodeJS.Timeout | undefined;
  #delay: NodeJS.Timeout | undefined;
  #shown = false;
  #label = '';

  constructor(private readonly stderr: Output) {}

  start(label: string): this {
    this.stop();
    this.#label = label;
    if (this.stderr.isTTY !== true) return this;
    let i = 0;
    this.#delay = setTimeout(() => {
      this.#timer = setInterval(() => {
        this.#shown = true;
        this.stderr.write(`\r\x1b[2K${FRAMES[i++ % FRAMES.length]} ${this.#label}`);
      }, 80);
    }, 150);
    return this;
  }

  /** Whether it is spinning (or about to). */
  get running(): boolean {
    return this.#delay !== undefined || this.#timer !== undefined;
  }

  /** What it says from its next frame on ("thinking (attempt 2 of 3: provider unreachable)"). */
  relabel(label: string): void {
    this.#label = label;
  }

  stop(): void {
    clearTimeout(this.#delay);
    clearInterval(this.#timer);
    this.#delay = this.#timer = undefined;
    if (this.#shown) this.stderr.write('\r\x1b[2K');
    this.#shown = false;
  }
}
