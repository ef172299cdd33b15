import type { Command } from 'commander';
import { platformName, type ChannelAccount } from '@agentry/client';
import { UsageError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import { channelAccountCommands } from './channel-accounts.js';

interface AccountRow extends ChannelAccount {
  platform: string;
  platformEnabled: boolean;
}

export function channelCommands(program: Command, cli: Cli): void {
  const send = program
    .command('send')
    .summary('send a message to a chat through a channel')
    .description('Send a text message to a chat of a messaging platform through one of its accounts.')
    .argument('<platform>', 'chat_a (Lark), chat_a_webhook (Lark webhook), chat_b (DingTalk), chat_c (WeCom), chat_d (Telegram) or chat_e (Slack)')
    .argument('<chatId>', "the platform's chat (or user) id")
    .argument('<message...>', 'the text (words are joined with spaces; "-" reads stdin)')
    .option('--account <id>', 'the sending account (default: the platform\'s default account)')
    .action(
      cli.action(async (ctx, opts: { account?: string }, platform: string, chatId: string, words: string[]) => {
        const message = words.length === 1 && words[0] === '-' ? (await ctx.readInput('-')).toString('utf8').replace(/\r?\n$/, '') : words.join(' ');
        if (message.trim() === '') throw new UsageError('the message is empty');
        const answer = await ctx.spin('sending', () =>
          ctx.client.channels.send(platform, { chatId, message, ...(opts.account ? { accountId: opts.account } : {}) }),
        );
        const messageId = (answer as { messageId?: unknown } | null)?.messageId;
        ctx.printer.done(`sent to ${platform} chat ${chatId}${typeof messageId === 'string' && messageId ? ` (message ${messageId})` : ''}`, answer);
      }),
    );
  examples(send, 'agentry send chat_d 123456789 "Deploy finished"', 'agentry send chat_e C0123ABC --account ops "Disk almost full"', 'tail -n 20 app.log | agentry send chat_d 123456789 -');

  const channels = program.command('channels').summary('list, show, create, update and delete channel accounts').description('Messaging-platform accounts (channels) of the server.');
  examples(channels, 'agentry channels list');

  const list = channels
    .command('list')
    .alias('ls')
    .description('List every platform account (secrets are never shown, only whether one is set).')
    .action(
      cli.action(async (ctx) => {
        const view = await ctx.spin('loading channels', () => ctx.client.channels.list());
        if (ctx.json) return ctx.printer.json(view);
        const rows: AccountRow[] = [];
        for (const [platform, p] of Object.entries(view.platforms ?? {})) {
          for (const [id, account] of Object.entries(p.accounts ?? {})) rows.push({ ...account, id: account.id ?? id, platform, platformEnabled: p.enabled !== false });
        }
        ctx.printer.list<AccountRow>(
          rows,
          [
            { header: 'platform', value: (r) => `${platformName(r.platform)} (${r.platform})${r.platformEnabled ? '' : ' off'}` },
            { header: 'account', value: (r) => r.id },
            { header: 'name', value: (r) => r.name },
            { header: 'enabled', value: (r) => (r.enabled === false ? 'no' : 'yes') },
            { header: 'dm', value: (r) => r.dmPolicy },
            { header: 'group', value: (r) => r.groupPolicy },
            { header: 'secret', value: (r) => (r.hasSecret ? 'set' : '') },
          ],
          'no channel accounts yet: create one with agentry channels create <platform> <id> (agentry channels create api <id> makes an API key)',
        );
      }),
    );
  examples(list, 'agentry channels list', 'agentry channels list --json | jq ".platforms.chat_d"');
  channelAccountCommands(channels, cli);
}
