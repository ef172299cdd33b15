import { humanError } from '@agentry/client';

/** A failure the CLI reports as `error: <message>` on stderr, with its exit status. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** Wrong use of a command (a missing option, a bad value): exit status 2. */
export class UsageError extends CliError {
  override name = 'UsageError';
  constructor(message: string) {
    super(message, 2);
  }
}

/** The user interrupted (Ctrl-C): exit status 130, like a shell. */
export class Interrupted extends CliError {
  override name = 'Interrupted';
  constructor() {
    super('interrupted', 130);
  }
}

/**
 * A server's error as a person reads it (humanError: the same wording the web UI shows), with
 * the server's own message on a second line under --verbose.
 */
export function describeError(err: Error, verbose: boolean): string {
  const { message, detail } = humanError(err.message);
  return verbose && detail ? `${message}\n  detail: ${detail}` : message;
}
