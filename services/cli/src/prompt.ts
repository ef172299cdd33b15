import readline from 'node:readline/promises';
import { Interrupted } from './errors.js';
import type { CliIo, Input } from './setup.js';

/**
 * Lines of a stdin that is not a terminal, one at a time, for every reader in the process (a
 * password prompt and a chat loop share it). `next()` answers null at the end of input.
 */
export class LineReader {
  #buffer = '';
  #ended = false;
  #started = false;
  #wake: Array<() => void> = [];

  constructor(private readonly input: Input) {}

  #start(): void {
    if (this.#started) return;
    this.#started = true;
    this.input.setEncoding('utf8');
    const wake = () => {
      for (const w of this.#wake.splice(0)) w();
    };
    this.input.on('data', (chunk: string) => {
      this.#buffer += chunk;
      wake();
    });
    this.input.on('end', () => {
      this.#ended = true;
      wake();
    });
    this.input.on('error', () => {
      this.#ended = true;
      wake();
    });
    this.input.resume();
  }

  async next(): Promise<string | null> {
    this.#start();
    for (;;) {
      const nl = this.#buffer.indexOf('\n');
      if (nl >= 0) {
        const line = this.#buffer.slice(0, nl).replace(/\r$/, '');
        this.#buffer = this.#buffer.slice(nl + 1);
        return line;
      }
      if (this.#ended) {
        if (this.#buffer === '') return null;
        const last = this.#buffer;
        this.#buffer = '';
        return last;
      }
      await new Promise<void>((resolve) => this.#wake.push(resolve));
    }
  }

  /** Everything up to the end of input. */
  async rest(): Promise<string> {
    this.#start();
    while (!this.#ended) await new Promise<void>((resolve) => this.#wake.push(resolve));
    const all = this.#buffer;
    this.#buffer = '';
    return all;
  }

  /** Stops reading (so that the process may exit). */
  close(): void {
    if (this.#started) this.input.pause();
  }
}

/** Questions to the user: on a terminal with echo (or without, for secrets); else lines of stdin. */
export class Prompter {
  #lines: LineReader | undefined;
  #claimed = false;

  constructor(private readonly io: CliIo) {}

  /**
   * Stdin (not a terminal) carries data from now on (chat lines): questions get no answer
   * instead of eating a line of it.
   */
  claimStdin(): void {
    this.#claimed = true;
  }

  get terminal(): boolean {
    return this.io.stdin.isTTY === true;
  }

  /** The shared reader of a stdin that is not a terminal. */
  lines(): LineReader {
    this.#lines ??= new LineReader(this.io.stdin);
    return this.#lines;
  }

  /** All of stdin as bytes (`-f -`); as text when lines were already read from it. */
  async stdinBytes(): Promise<Buffer> {
    if (this.#lines) return Buffer.from(await this.#lines.rest(), 'utf8');
    const chunks: Buffer[] = [];
    for await (const chunk of this.io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
    return Buffer.concat(chunks);
  }

  /** A visible answer; null at the end of input. */
  async ask(question: string): Promise<string | null> {
    if (!this.terminal) {
      if (this.#claimed) return null;
      this.io.stderr.write(question);
      const line = await this.lines().next();
      this.io.stderr.write('\n');
      return line;
    }
    const rl = readline.createInterface({ input: this.io.stdin, output: this.io.stderr, terminal: true });
    const aborted = new Promise<never>((_, reject) => rl.once('SIGINT', () => reject(new Interrupted())));
    try {
      return await Promise.race([rl.question(question), aborted]);
    } finally {
      rl.close();
    }
  }

  /** An answer typed without echo (passwords); null at the end of input. */
  async secret(question: string): Promise<string | null> {
    if (!this.terminal || typeof this.io.stdin.setRawMode !== 'function') return this.ask(question);
    const { stdin, stderr } = this.io;
    stderr.write(question);
    stdin.setRawMode!(true);
    stdin.setEncoding('utf8');
    stdin.resume();
    return new Promise<string | null>((resolve, reject) => {
      let value = '';
      const finish = () => {
        stdin.removeListener('data', onData);
        stdin.setRawMode!(false);
        stdin.pause();
        stderr.write('\n');
      };
      const onData = (chunk: string) => {
        for (const ch of chunk) {
          if (ch === '\r' || ch === '\n') {
            finish();
            resolve(value);
            return;
          }
          if (ch === '\u0003') {
            finish();
            reject(new Interrupted());
            return;
          }
          if (ch === '\u0004' && value === '') {
            finish();
            resolve(null);
            return;
          }
          if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
          else if (ch === '\u0015') value = '';
          else if (ch >= ' ') value += ch;
        }
      };
      stdin.on('data', onData);
    });
  }

  close(): void {
    this.#lines?.close();
  }
}
