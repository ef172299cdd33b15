import { randomBytes } from 'node:crypto';
import readline from 'node:readline';
import type { Command } from 'commander';
import { ApiError, ConnectionError, StreamError, chunkText, chunkToolEvent, describeRetry, type AguiToolEvent, type ChatRequest, type RetryNotice } from '@agentry/client';
import type { Context } from '../context.js';
import { CliError, Interrupted, UsageError, describeError } from '../errors.js';
import { Spinner } from '../output.js';
import { examples, type Cli } from '../command-kit.js';

interface ChatOptions {
  agent?: string;
  session?: string;
  tools?: boolean;
}

interface Turn {
  agent: string;
  session: string | undefined;
  tools: boolean;
  message: string;
}

function oneLine(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function describeTool(e: AguiToolEvent): string {
  if (e.type === 'TOOL_CALL_START') return `→ ${e.toolCallName} (${e.toolType}) ${oneLine(e.arguments ?? '', 200)}`;
  return `← ${e.toolCallName}: ${oneLine(e.content ?? '', 200)}`;
}

/**
 * The server tries the provider again before the answer starts: on a terminal the spinner says
 * which attempt is under way and why (started again on a fresh line after a tool's output, when
 * `midLine`); elsewhere a line on stderr tells the same. Answers whether it started a line.
 */
function showRetry(stderr: Context['setup']['io']['stderr'], spinner: Spinner, notice: RetryNotice, midLine: boolean): boolean {
  const label = `thinking (${describeRetry(notice)})`;
  if (stderr.isTTY !== true) {
    stderr.write(`${label}\n`);
    return false;
  }
  if (spinner.running) {
    spinner.relabel(label);
    return false;
  }
  if (midLine) stderr.write('\n');
  spinner.start(label);
  return true;
}

/**
 * One turn: the answer streamed to stdout as its tokens arrive (tool calls on stderr with
 * --tools), or with --json the raw completion (with --json --tools: every stream chunk, one
 * JSON object a line, since only a stream carries tool calls). Ctrl-C aborts the turn (the
 * server cancels the run when the connection closes) and throws Interrupted. A connection that
 * drops mid-answer is resumed by the client, with a note on stderr.
 */
async function runTurn(ctx: Context, turn: Turn): Promise<void> {
  const { stdout, stderr } = ctx.setup.io;
  const request: ChatRequest = {
    model: turn.agent,
    messages: [{ role: 'user', content: turn.message }],
    ...(turn.session ? { sessionId: turn.session } : {}),
  };
  const abort = new AbortController();
  const release = ctx.setup.onInterrupt?.(() => abort.abort());
  const spinner = new Spinner(stderr);
  const raw = ctx.options.json === true;
  /** The last text written to stdout (for the final newline). */
  let lastText = '';
  let screenAtLineStart = true;
  try {
    if (raw && !turn.tools) {
      spinner.start('waiting for the answer');
      const completion = await ctx.client.chat.complete(request, { signal: abort.signal });
      spinner.stop();
      ctx.printer.json(completion);
      return;
    }
    spinner.start('thinking');
    // A dropped connection is picked up again by the client (the answer goes on where it
    // stopped); the note on stderr tells why there was a pause, stdout stays the answer alone.
    const onResume = () => {
      spinner.stop();
      if (!screenAtLineStart && stdout.isTTY && stderr.isTTY) stderr.write('\n');
      screenAtLineStart = true;
      stderr.write('(connection lost; resumed)\n');
    };
    const onRetry = (notice: RetryNotice) => {
      if (showRetry(stderr, spinner, notice, !screenAtLineStart && stdout.isTTY === true)) screenAtLineStart = true;
    };
    const stream = await ctx.client.chat.stream(request, { agui: turn.tools, signal: abort.signal, onResume, onRetry });
    for await (const chunk of stream) {
      if (raw) {
        spinner.stop();
        stdout.write(`${JSON.stringify(chunk)}\n`);
        continue;
      }
      const tool = chunkToolEvent(chunk);
      if (tool) {
        spinner.stop();
        // On a terminal both streams share the screen: a tool line starts on a line of its own.
        if (!screenAtLineStart && stdout.isTTY && stderr.isTTY) stderr.write('\n');
        screenAtLineStart = true;
        stderr.write(`${describeTool(tool)}\n`);
        continue;
      }
      const text = chunkText(chunk);
      if (text === '') continue;
      spinner.stop();
      stdout.write(text);
      lastText = text;
      screenAtLineStart = text.endsWith('\n');
    }
    if (lastText !== '' && !lastText.endsWith('\n')) stdout.write('\n');
  } catch (err) {
    if (abort.signal.aborted) {
      if (lastText !== '' && !lastText.endsWith('\n')) stdout.write('\n');
      throw new Interrupted();
    }
    // On a terminal the error line should not continue the half answer.
    if (stdout.isTTY && lastText !== '' && !lastText.endsWith('\n')) stdout.write('\n');
    throw err;
  } finally {
    spinner.stop();
    release?.();
  }
}

function newSession(): string {
  return `cli-${randomBytes(4).toString('hex')}`;
}

type LoopCommand = 'exit' | 'new' | 'session' | 'help' | 'retry';

/** The loop's commands, in the order the help names them. */
const COMMANDS: Record<string, LoopCommand> = { '/new': 'new', '/session': 'session', '/retry': 'retry', '/help': 'help', '/exit': 'exit', '/quit': 'exit' };

/**
 * What a typed line means: a command of the loop, an unknown `/word` (answered here, never sent
 * to the model: a typo of /retry must not become a turn), or a message. `//text` sends `/text`.
 */
function loopCommand(line: string): LoopCommand | { unknown: string } | { message: string } {
  const t = line.trim();
  if (t.startsWith('//')) return { message: t.slice(1) };
  const known = COMMANDS[t];
  if (known) return known;
  // Only a bare `/word` first: `/etc/hosts is missing` is a message about a path.
  const word = /^\/([A-Za-z][\w-]*)(?=\s|$)/.exec(t);
  if (word) return { unknown: `/${word[1]}` };
  return { message: line };
}

const LOOP_HELP = '/new starts a new session, /session shows it, /retry re-sends a failed or stopped turn, /exit or Ctrl-D leaves';

/** A line typed at the terminal (history kept across turns); null on Ctrl-D; Interrupted on Ctrl-C. */
function askLine(ctx: Context, prompt: string, history: string[]): Promise<string | null> {
  const { stdin, stderr } = ctx.setup.io;
  const rl = readline.createInterface({ input: stdin, output: stderr, terminal: true, history, historySize: 200, removeHistoryDuplicates: true });
  return new Promise((resolve, reject) => {
    let answered = false;
    const finish = (value: string | null | Interrupted) => {
      if (answered) return;
      answered = true;
      rl.close();
      if (value instanceof Interrupted) reject(value);
      else resolve(value);
    };
    rl.once('close', () => finish(null));
    rl.once('SIGINT', () => {
      stderr.write('\n');
      finish(new Interrupted());
    });
    rl.question(prompt, (answer) => finish(answer));
  });
}

/** Counts the turns of a conversation and the ones that failed. */
interface Tally {
  turns: number;
  failed: number;
}

/**
 * One turn of a conversation. A turn that fails (the provider failed, the stream broke, the
 * server is away) prints its error and the conversation goes on: the next line is still a
 * message, not a shell command. Ctrl-C on a terminal stops only the answer. Answers how it ended,
 * so that /retry knows what there is to re-send.
 */
async function conversationTurn(ctx: Context, turn: Turn, tally: Tally): Promise<'answered' | 'failed' | 'stopped'> {
  const { stderr } = ctx.setup.io;
  tally.turns += 1;
  try {
    await runTurn(ctx, turn);
    return 'answered';
  } catch (err) {
    if (err instanceof Interrupted) {
      if (!ctx.prompter.terminal) throw err;
      stderr.write('(interrupted; /retry asks again)\n');
      return 'stopped';
    }
    if (!(err instanceof ApiError || err instanceof StreamError || err instanceof ConnectionError)) throw err;
    tally.failed += 1;
    stderr.write(`error: ${describeError(err, ctx.options.verbose === true)}\n`);
    if (ctx.prompter.terminal) stderr.write('(/retry sends it again)\n');
    return 'failed';
  }
}

/** A line of the loop that is not a message: answers the session to go on with. */
function runLoopCommand(ctx: Context, command: 'new' | 'session' | 'help', session: string): string {
  const { stderr } = ctx.setup.io;
  if (command === 'new') {
    const next = newSession();
    stderr.write(`new session ${next}\n`);
    return next;
  }
  stderr.write(command === 'session' ? `session ${session}\n` : `${LOOP_HELP}\n`);
  return session;
}

async function conversation(ctx: Context, agent: string, opts: ChatOptions): Promise<void> {
  const { stderr } = ctx.setup.io;
  let session = opts.session ?? newSession();
  const terminal = ctx.prompter.terminal;
  if (!terminal) ctx.prompter.claimStdin();
  const history: string[] = [];
  const tally: Tally = { turns: 0, failed: 0 };
  if (terminal) stderr.write(`chatting with ${agent} in session ${session} (${LOOP_HELP})\n`);
  /** The last turn that failed or was stopped, and how: what /retry sends again. */
  let unanswered: { turn: Turn; outcome: 'failed' | 'stopped' } | undefined;
  for (;;) {
    let line: string | null;
    try {
      line = terminal ? await askLine(ctx, 'you> ', history) : await ctx.prompter.lines().next();
    } catch (err) {
      // Ctrl-C at the prompt leaves: say how to come back to this conversation.
      if (err instanceof Interrupted) stderr.write(`session ${session}; resume it with: agentry chat -a ${agent} -s ${session}\n`);
      throw err;
    }
    if (line === null) break;
    if (line.trim() === '') continue;
    const command = loopCommand(line);
    if (command === 'exit') break;
    if (command === 'retry') {
      if (!unanswered) {
        stderr.write('nothing to retry: the last turn got its answer\n');
        continue;
      }
      const { turn, outcome } = unanswered;
      stderr.write(`retrying: ${oneLine(turn.message, 60)}\n`);
      // The same turn again, not a new one: a retry that succeeds takes back its failure.
      tally.turns -= 1;
      if (outcome === 'failed') tally.failed -= 1;
      const again = await conversationTurn(ctx, turn, tally);
      unanswered = again === 'answered' ? undefined : { turn, outcome: again };
      continue;
    }
    if (typeof command === 'string') {
      session = runLoopCommand(ctx, command, session);
      continue;
    }
    if ('unknown' in command) {
      stderr.write(`unknown command ${command.unknown} (not sent to the agent): ${LOOP_HELP}; start a message with // to send a leading /\n`);
      continue;
    }
    const turn: Turn = { agent, session, tools: opts.tools === true, message: command.message };
    const outcome = await conversationTurn(ctx, turn, tally);
    unanswered = outcome === 'answered' ? undefined : { turn, outcome };
  }
  // The exit status tells a script whether every turn got its answer.
  if (tally.failed > 0) throw new CliError(`${tally.failed} of ${tally.turns} turn${tally.turns === 1 ? '' : 's'} failed`);
}

export function chatCommand(program: Command, cli: Cli): void {
  const cmd = program
    .command('chat')
    .summary('talk to an agent (streams the answer)')
    .description(
      'Sends a message to an agent and streams the answer to stdout as it arrives.\n' +
        'Without a message: a conversation in one session, a turn per line you type\n' +
        `(${LOOP_HELP}); when stdin is not a terminal, every line of it is a turn.\n` +
        'A connection that drops mid-answer is resumed by itself ("(connection lost; resumed)"\n' +
        'on stderr); the answer goes on where it stopped.\n' +
        'A turn that fails prints its error and the conversation goes on; at the end the exit\n' +
        'status is 1 when any turn failed.\n' +
        'A message of "-" is read from stdin. With --json: the raw chat.completion.',
    )
    .argument('[message...]', 'the message (words are joined with spaces; "-" reads stdin)')
    .option('-a, --agent <id>', 'the agent (env AGENTRY_AGENT; default: the only agent there is)')
    .option('-s, --session <id>', 'session id: the server keeps the conversation under it')
    .option('--tools', 'show the tool calls the agent makes on the server (agui protocol), on stderr')
    .action(
      cli.action(async (ctx, opts: ChatOptions, words: string[]) => {
        let message: string | undefined;
        if (words.length === 1 && words[0] === '-') message = (await ctx.readInput('-')).toString('utf8').replace(/\r?\n$/, '');
        else if (words.length > 0) message = words.join(' ');
        if (message !== undefined && message.trim() === '') throw new UsageError('the message is empty');
        const agent = await ctx.agent(opts.agent);
        if (message === undefined) return conversation(ctx, agent, opts);
        await runTurn(ctx, { agent, session: opts.session, tools: opts.tools === true, message });
      }),
    );
  examples(
    cmd,
    'agentry chat -a support "How do I reset my password?"',
    'agentry chat -a support -s ticket-42 "And for the admin account?"',
    'agentry chat -a support                       # a conversation',
    'agentry chat -a coder --tools "List the files in your workspace"',
    'git diff | agentry chat -a reviewer -',
    'agentry chat -a support --json "Hi" | jq -r ".choices[0].message.content"',
  );
}
