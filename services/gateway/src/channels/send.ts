import { Errors } from '@agentry/errors';
import type { ChannelSendResult, Platform } from '@agentry/contracts';
import { accountContext, adapterFor, sendAndWait, sendingAccount, type OutboundInput } from '@agentry/channels';
import type { GatewayDeps } from '../deps.js';
import { requirePlatform } from './accounts.js';

/** Outbound sends through the API (spec "Outbound messages"): queued for the connector, awaited here. */

/** Queues an outbound message and waits (up to `sendWaitMs`) for the platform's answer. */
export async function sendFromApi(
  deps: GatewayDeps,
  sendWaitMs: number,
  message: { platform: string; accountId: string | undefined; chatId: string },
  build: (platform: Platform) => Promise<Pick<OutboundInput, 'kind' | 'payload'>>,
): Promise<ChannelSendResult> {
  const db = deps.db.db;
  const platform = requirePlatform(message.platform);
  if (platform === 'api') throw new Errors.VALIDATION('the api platform has no chats to send to (its clients call /chat/completions)');
  const account = await sendingAccount(db, platform, message.accountId);
  if (deps.config.current.channels[platform]?.enabled === false) throw new Errors.VALIDATION(`the ${platform} platform is disabled in the configuration file`);
  const adapter = adapterFor(platform)!;
  const content = await build(platform);
  if (content.kind === 'image' && !adapter.supports.image) throw new Errors.VALIDATION(`${platform} accounts cannot send images`);
  if (content.kind === 'file' && !adapter.supports.file) throw new Errors.VALIDATION(`${platform} accounts cannot send files`);
  // Fails early on an account the platform could never accept (a secret that cannot be opened).
  accountContext(account, deps.secrets);
  const outcome = await sendAndWait(
    { db, queue: deps.bus.queue, events: deps.bus.pubsub },
    { platform, accountId: account.id, chatId: message.chatId, source: 'api', ...content },
    { timeoutMs: sendWaitMs },
  );
  switch (outcome.kind) {
    case 'sent':
      return { success: true, messageId: outcome.message.platformMessageId ?? '' };
    case 'failed':
      throw new Errors.UPSTREAM(`${platform} refused the message: ${outcome.message.error ?? 'unknown error'}`);
    case 'pending':
      throw new Errors.UPSTREAM(
        `${platform} did not confirm the message within ${Math.round(sendWaitMs / 1000)} s; it stays queued as ${outcome.message.id} and may still be delivered` +
          (outcome.message.error ? ` (last error: ${outcome.message.error})` : ''),
      );
    default: {
      const never: never = outcome;
      throw new Errors.INTERNAL(`unknown send outcome ${String(never)}`);
    }
  }
}
