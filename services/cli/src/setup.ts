/** Everything the CLI takes from its process, passed in by main.ts (the only file reading process.env). */

export interface TerminalStream {
  isTTY?: boolean;
  columns?: number;
}

export type Input = NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown; fd?: number };
export type Output = NodeJS.WritableStream & TerminalStream;

export interface CliIo {
  stdin: Input;
  stdout: Output;
  stderr: Output;
}

export interface CliSetup {
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** The user's home directory (credentials live under it unless XDG_CONFIG_HOME is set). */
  home: string;
  io: CliIo;
  /** Milliseconds since the epoch (tests pin it). */
  now?: () => number;
  /**
   * Makes `handler` receive Ctrl-C (SIGINT) until the returned function is called; the latest
   * registration wins. Without one, Ctrl-C ends the process with status 130.
   */
  onInterrupt?: (handler: () => void) => () => void;
}
