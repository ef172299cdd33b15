import type { Command } from 'commander';
import { platformName, type Session, type SessionFilter, type SessionMessage } from '@agentry/client';
import { UsageError } from '../errors.js';
import { shortTime } from '../output.js';
import { examples, intOption, type Cli } from '../command-kit.js';
import { pageOrAll } from '../page-or-all.js';

interface ClearOpts {
  agent?: string;
  session?: string;
  channel?: string;
  scope?: string;
  all?: boolean;
}

export function sessionCommands(program: Command, cli: Cli): void {
  const sessions = program.command('sessions').summary('list, show, delete and clear conversations').description('Sessions: the conversations the server keeps (chat sessionId, channel chats, cron jobs).');
  examples(sessions, 'agentry sessions list -a support', 'agentry sessions clear -a support -s ticket-42');

  const list = sessions
    .command('list')
    .alias('ls')
    .description('List sessions, most recent first (all of them, or one page with --page/--size).')
    .option('-a, --agent <id>', "only this agent's sessions")
    .addOption(intOption('--page <n>', 'only this page'))
    .addOption(intOption('--size <n>', 'page size (1..100) with --page'))
    .action(
      cli.action(async (ctx, opts: { agent?: string; page?: number; size?: number }) => {
        const filter = opts.agent ? { agentId: opts.agent } : {};
        const items = await pageOrAll(ctx, 'loading sessions', opts, {
          page: (page) => ctx.client.sessions.list({ ...filter, ...page }),
          all: () => ctx.client.sessions.listAll(filter),
        });
        ctx.printer.list<Session>(
          items,
          [
            { header: 'agent', value: (s) => s.agentId },
            { header: 'session', value: (s) => s.sessionKey, max: 40 },
            { header: 'channel', value: (s) => platformName(s.channel) },
            { header: 'messages', value: (s) => s.messageCount, align: 'right' },
            { header: 'updated', value: (s) => shortTime(s.updatedAt) },
            { header: 'title', value: (s) => s.title, max: 50 },
          ],
          'no sessions yet: chatting starts one (agentry chat -a <agent>)',
        );
      }),
    );
  examples(list, 'agentry sessions list', 'agentry sessions list -a support --json');

  oneSessionCommands(sessions, cli);

  const clear = sessions
    .command('clear')
    .description('Clear the sessions that match every filter given (--all: every session).')
    .option('-a, --agent <id>', 'sessions of this agent')
    .option('-s, --session <key>', 'the session key (the chat sessionId)')
    .option('--channel <channel>', 'sessions of this channel (api, cron, chat_a, ...)')
    .option('--scope <scope>', 'sessions of this scope (per_peer, ...)')
    .option('--all', 'every session, when no filter is given')
    .action(
      cli.action(async (ctx, opts: ClearOpts) => {
        const filter: SessionFilter = {
          ...(opts.agent ? { agentId: opts.agent } : {}),
          ...(opts.session ? { sessionKey: opts.session } : {}),
          ...(opts.channel ? { channel: opts.channel } : {}),
          ...(opts.scope ? { scope: opts.scope } : {}),
        };
        if (Object.keys(filter).length === 0 && !opts.all) throw new UsageError('give a filter (-a, -s, --channel, --scope) or --all to clear every session');
        const answer = await ctx.spin('clearing', () => ctx.client.sessions.clear(filter));
        ctx.printer.done(answer.message ?? 'cleared', answer);
      }),
    );
  examples(clear, 'agentry sessions clear -a support -s ticket-42', 'agentry sessions clear -a support', 'agentry sessions clear --all');
}

/** show and delete: one session, by its id (messages) or its key (delete). */
function oneSessionCommands(sessions: Command, cli: Cli): void {
  const show = sessions
    .command('show')
    .alias('get')
    .description("A session's messages, oldest first (the id is the ID column of --json lists, not the session key).")
    .argument('<id>', 'session id')
    .action(
      cli.action(async (ctx, _opts, id: string) => {
        const messages = await ctx.spin('loading messages', () => ctx.client.sessions.messages(id));
        ctx.printer.list<SessionMessage>(
          messages,
          [
            { header: 'role', value: (m) => m.role },
            { header: 'time', value: (m) => shortTime(m.createdAt) },
            { header: 'content', value: (m) => m.content, max: 90 },
          ],
          'no messages',
        );
      }),
    );
  examples(show, 'agentry sessions show 9b2f0c4e-0d1a-4f5e-8c3b-2a1d0e9f8c7b');

  const del = sessions
    .command('delete')
    .alias('rm')
    .description('Delete one session by its key (the chat sessionId), with -a to name its agent.')
    .argument('<key>', 'the session key')
    .option('-a, --agent <id>', 'the agent the session is with (default: every agent)')
    .action(
      cli.action(async (ctx, opts: { agent?: string }, key: string) => {
        const answer = await ctx.spin('deleting', () => ctx.client.sessions.clear({ sessionKey: key, ...(opts.agent ? { agentId: opts.agent } : {}) }));
        ctx.printer.done(answer.message ?? `deleted session ${key}`, answer);
      }),
    );
  examples(del, 'agentry sessions delete ticket-42 -a support');
}
