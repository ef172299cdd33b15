import fs from 'node:fs';
import path from 'node:path';
import { AgentryClient, normaliseUrl } from '@agentry/client';
import { Credentials } from './credentials.js';
import { CliError, UsageError } from './errors.js';
import { Printer, Spinner } from './output.js';
import type { Prompter } from './prompt.js';
import type { CliSetup } from './setup.js';

export const DEFAULT_URL = 'http://localhost:9527';

/** The options every command takes (declared on the program). */
export interface GlobalOptions {
  url?: string;
  config?: string;
  json?: boolean;
  verbose?: boolean;
}

/** The server address: `--url`, else AGENTRY_URL, else http://localhost:9527. */
export function resolveUrl(option: string | undefined, env: CliSetup['env']): string {
  const raw = option ?? (env.AGENTRY_URL || DEFAULT_URL);
  try {
    return normaliseUrl(raw);
  } catch (err) {
    throw new UsageError(`${option !== undefined ? '--url' : 'AGENTRY_URL'}: ${(err as Error).message}`);
  }
}

/** What one command run works with: the server, the credentials, the printer, the prompts. */
export class Context {
  readonly url: string;
  readonly printer: Printer;
  readonly credentials: Credentials;
  readonly client: AgentryClient;
  /** A client that sends no credential (login). */
  readonly anonymous: AgentryClient;
  /** Spinners running: a warning waits for them to stop, so that it is not written over. */
  #spinning = 0;
  readonly #warnings: string[] = [];

  constructor(
    readonly setup: CliSetup,
    readonly options: GlobalOptions,
    readonly prompter: Prompter,
  ) {
    this.url = resolveUrl(options.url, setup.env);
    const { stdout, stderr } = setup.io;
    this.printer = new Printer(stdout, stderr, options.json === true || stdout.isTTY !== true);
    const headers = { 'user-agent': 'agentry-cli' };
    this.anonymous = new AgentryClient({ url: this.url, headers });
    this.credentials = new Credentials({
      setup,
      url: this.url,
      configOption: options.config,
      prompter,
      login: (username, password) => this.anonymous.auth.login(username, password),
    });
    this.client = new AgentryClient({
      url: this.url,
      headers,
      token: (purpose) => this.credentials.tokenFor(purpose),
      onUnauthorized: (purpose, error, token) => this.credentials.renew(purpose, error, token),
      onWarning: (text) => this.warn(text),
    });
  }

  /** A server's `Warning` header, on stderr as kubectl prints it (`Warning: ...`), JSON mode included. */
  warn(text: string): void {
    this.#warnings.push(`Warning: ${text}`);
    if (this.#spinning === 0) this.#flushWarnings();
  }

  #flushWarnings(): void {
    for (const line of this.#warnings.splice(0)) this.printer.note(line);
  }

  get json(): boolean {
    return this.printer.jsonMode;
  }

  /** Runs `fn` with a spinner on a terminal. */
  async spin<T>(label: string, fn: () => Promise<T>): Promise<T> {
    const spinner = new Spinner(this.setup.io.stderr).start(label);
    this.#spinning++;
    try {
      return await fn();
    } finally {
      spinner.stop();
      this.#spinning--;
      if (this.#spinning === 0) this.#flushWarnings();
    }
  }

  /** The agent a command is about: `-a`, else AGENTRY_AGENT, else the only agent there is. */
  async agent(explicit: string | undefined): Promise<string> {
    const chosen = explicit ?? (this.setup.env.AGENTRY_AGENT || undefined);
    if (chosen) return chosen;
    const { data } = await this.spin('finding the agent', () => this.client.models());
    if (data.length === 1) return data[0]!.id;
    if (data.length === 0) throw new UsageError('there is no agent yet: create one with "agentry agents create" (or name one with -a)');
    const names = data.map((m) => m.id);
    throw new UsageError(`name an agent with -a (one of: ${names.slice(0, 10).join(', ')}${names.length > 10 ? ', …' : ''})`);
  }

  /** A file's bytes; `-` is stdin. */
  async readInput(file: string): Promise<Buffer> {
    if (file === '-') {
      if (this.setup.io.stdin.isTTY) this.printer.note('(reading from the terminal until Ctrl-D)');
      return this.prompter.stdinBytes();
    }
    const full = path.resolve(this.setup.cwd, file);
    try {
      return fs.readFileSync(full);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new CliError(code === 'ENOENT' ? `${file}: no such file` : `${file}: ${(err as Error).message}`);
    }
  }
}
