import { InvalidArgumentError, Option, type Command } from 'commander';
import type { Context } from './context.js';

/** What command modules share: examples in help, integer options, and how actions get their context. */

/** Adds an `Examples:` block to a command's help. */
export function examples(cmd: Command, ...lines: string[]): Command {
  return cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}

/**
 * What every command needs to build its context and report its own usage errors. Actions get
 * `(ctx, options, ...arguments)`.
 */
export interface Cli {
  action<O, A extends unknown[]>(fn: (ctx: Context, opts: O, ...args: A) => Promise<void>): (...raw: unknown[]) => Promise<void>;
}

/** Non-negative integer options (`--page 2`). */
export function intOption(flags: string, description: string, min = 1): Option {
  return new Option(flags, description).argParser((v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer >= ${min}`);
    return n;
  });
}
