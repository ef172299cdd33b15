import { Command, CommanderError } from 'commander';
import { ApiError, ConnectionError, StreamError } from '@agentry/client';
import { agentCommands } from './commands/agents.js';
import { accountCommands } from './commands/account.js';
import { channelCommands } from './commands/channels.js';
import { chatCommand } from './commands/chat.js';
import { configCommands } from './commands/config.js';
import { cronCommands } from './commands/cron.js';
import { ruleCommands } from './commands/rules.js';
import { sessionCommands } from './commands/sessions.js';
import { usageCommands } from './commands/usage.js';
import { skillCommands } from './commands/skills.js';
import { workspaceCommands } from './commands/workspace.js';
import { userCommands } from './commands/users.js';
import { providerCommands } from './commands/providers.js';
import { bindingCommands } from './commands/bindings.js';
import { doctorCommand } from './commands/doctor.js';
import { examples, type Cli } from './command-kit.js';
import { Context, type GlobalOptions } from './context.js';
import { describeSource } from './credentials.js';
import { CliError, Interrupted, describeError } from './errors.js';
import { Prompter } from './prompt.js';
import type { CliSetup } from './setup.js';

export function buildProgram(setup: CliSetup, prompter: Prompter, contexts: Context[]): Command {
  const { stdout, stderr } = setup.io;
  const program = new Command('agentry')
    .description('Command-line client of an Agentry server: chat with agents and manage them.')
    .option('--url <url>', 'server address (env AGENTRY_URL, default http://localhost:9527)')
    .option('-c, --config <file>', 'configuration file to take an API key from: channels.api.accounts, else a security.users "<password>:<API_KEY>" entry (env AGENTRY_CONFIG, default ./config.yaml)')
    .option('--json', 'print JSON (the default when stdout is not a terminal)')
    .option('--verbose', "errors: also the server's own message (which chain, node and provider call failed)")
    .version('0.1.0', '-V, --version')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => stdout.write(s),
      writeErr: (s) => stderr.write(s),
      getOutHelpWidth: () => stdout.columns ?? 100,
      getErrHelpWidth: () => stderr.columns ?? 100,
    })
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .showSuggestionAfterError(true);

  const cli: Cli = {
    action:
      <O, A extends unknown[]>(fn: (ctx: Context, opts: O, ...args: A) => Promise<void>) =>
      async (...raw: unknown[]) => {
        // Commander calls actions with (...arguments, options, command).
        const command = raw[raw.length - 1] as Command;
        const ctx = new Context(setup, command.optsWithGlobals<GlobalOptions>(), prompter);
        contexts.push(ctx);
        await fn(ctx, raw[raw.length - 2] as O, ...(raw.slice(0, -2) as unknown as A));
      },
  };

  chatCommand(program, cli);
  agentCommands(program, cli);
  skillCommands(program, cli);
  workspaceCommands(program, cli);
  ruleCommands(program, cli);
  cronCommands(program, cli);
  channelCommands(program, cli);
  bindingCommands(program, cli);
  providerCommands(program, cli);
  sessionCommands(program, cli);
  usageCommands(program, cli);
  configCommands(program, cli);
  accountCommands(program, cli);
  userCommands(program, cli);
  doctorCommand(program, cli);

  examples(
    program,
    'agentry doctor                                  # is everything set up?',
    'agentry login',
    'agentry agents list',
    'agentry chat -a my-agent "What is on my calendar?"',
    'AGENTRY_URL=https://agents.example.com agentry whoami',
  );
  return program;
}

/** A hint for a refused credential: which one it was, or how to get one. */
function authHint(err: ApiError, ctx: Context | undefined): string {
  if (!ctx) return '';
  try {
    if (/JWT|log in/i.test(err.message)) return ctx.credentials.login() ? '' : ' (run "agentry login")';
    if (/API key|Bearer/i.test(err.message)) {
      const cred = ctx.credentials.inUse();
      return cred ? ` (the credential was from ${describeSource(cred, ctx.setup.home)})` : ' (set AGENTRY_API_KEY or run "agentry login")';
    }
  } catch {
    // A credential source that cannot be read now adds no hint; the error itself stands.
  }
  return '';
}

/** `--verbose` anywhere before a `--` (an error can come before commander has parsed the options). */
function verbose(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--verbose');
}

/** Runs the CLI on `argv` (without node and script); answers the exit status. */
export async function run(argv: readonly string[], setup: CliSetup): Promise<number> {
  const prompter = new Prompter(setup.io);
  const contexts: Context[] = [];
  const program = buildProgram(setup, prompter, contexts);
  const fail = (message: string, code: number) => {
    setup.io.stderr.write(`error: ${message}\n`);
    return code;
  };
  try {
    if (argv.length === 0) {
      program.outputHelp({ error: true });
      return 2;
    }
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander printed its message (`error: ...`) or the help already.
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
      return 2;
    }
    // Ctrl-C: the terminal showed ^C already; leave quietly with a shell's status.
    if (err instanceof Interrupted) return err.exitCode;
    if (err instanceof CliError) return fail(err.message, err.exitCode);
    if (err instanceof ApiError) {
      const hint = err.status === 401 ? authHint(err, contexts.at(-1)) : '';
      return fail(`${describeError(err, verbose(argv))}${hint}`, 1);
    }
    if (err instanceof ConnectionError || err instanceof StreamError) return fail(describeError(err, verbose(argv)), 1);
    if ((err as Error | null)?.name === 'AbortError') return 130;
    const message = err instanceof Error ? err.message : String(err);
    if (setup.env.AGENTRY_DEBUG && err instanceof Error && err.stack) setup.io.stderr.write(`${err.stack}\n`);
    return fail(message, 1);
  } finally {
    prompter.close();
  }
}
