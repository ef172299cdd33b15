import type { Command } from 'commander';
import type { Context } from './context.js';
import { examples, type Cli } from './command-kit.js';

/** What an `enable`/`disable` pair of subcommands says and does for one kind of thing. */
export interface EnableDisableSpec<T> {
  /** The help text of `enable` (disabled false) or `disable` (disabled true). */
  description(disabled: boolean): string;
  /** The argument naming the thing: its name in the usage line and its help. */
  argument: [name: string, description: string];
  /** Switches the thing on or off; answers it as the server has it now. */
  toggle(ctx: Context, id: string, disabled: boolean): Promise<T>;
  /** How the confirmation names the thing ("enabled <this>"). */
  name(result: T): string;
  /** An example command line, for `enable` or `disable`. */
  example(command: 'enable' | 'disable'): string;
}

/** Adds `enable <id>` and `disable <id>` under `parent`: the same command twice but for the state it sets. */
export function enableDisableCommands<T>(parent: Command, cli: Cli, spec: EnableDisableSpec<T>): void {
  for (const [command, disabled] of [
    ['enable', false],
    ['disable', true],
  ] as const) {
    const cmd = parent
      .command(command)
      .description(spec.description(disabled))
      .argument(...spec.argument)
      .action(
        cli.action(async (ctx, _opts, id: string) => {
          const result = await ctx.spin(`${command.replace(/e$/, '')}ing`, () => spec.toggle(ctx, id, disabled));
          ctx.printer.done(`${command}d ${spec.name(result)}`, result);
        }),
      );
    examples(cmd, spec.example(command));
  }
}
