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
