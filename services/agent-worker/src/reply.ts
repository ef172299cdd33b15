import { isPlatform } from '@agentry/contracts';
import {
  agentMaySendThrough,
  deliverChatRefusal,
  enqueueOutbound,
  notBoundMessage,
  queueOutbound,
  sendAndWait,
  sendingAccount,
  type OutboxEvents,
  type OutboxQueue,
} from '@agentry/channels';
import { listChannelAccounts, type ChannelAccountRecord, type Db } from '@agentry/db';
import { type RunReplies, type SendMessageInput } from '@agentry/engine';
import { refusal } from '@agentry/definitions';

/**
 * Answers of runs that came from a channel go back to the chat they came from, through the
 * outbox (the engine decides what and when; `RunDeps.replies`). The outbound row is written in
 * the transaction that ends the run (an answer is never stored without its reply, nor sent for a
 * run that did not complete); its job is enqueued after the commit, and the connector's sweep
 * covers an enqueue that fails.
 */
export function outboxReplies(queue: OutboxQueue): RunReplies {
  return {
    queue: async (tx, runId, reply, text) => {
      if (text.trim() === '') return undefined;
      return queueOutbound(tx, {
        platform: reply.platform,
        accountId: reply.accountId,
        chatId: reply.chatId,
        kind: 'text',
        payload: { text },
        source: 'agent',
        runId,
      });
    },
    enqueue: async (id, logger) => {
      if (!id) return;
      try {
        await enqueueOutbound(queue, id);
      } catch (err) {
        logger.warn({ err, outboundId: id }, 'could not enqueue the reply; the connector sweep will send it');
      }
    },
  };
}

/** How long the send_message tool waits for the platform. */
const TOOL_SEND_WAIT_MS = 30_000;

/**
 * The `send_message` tool's way out: the same outbox as the REST send (row, job, connector,
 * retries), waiting for the platform's answer so the model learns whether it worked. The policy
 * decides here, where the account is known: bound to the agent, and the chat one the account
 * admits (its allow_from) unless an admin's definition pinned it in the tool's `chatIds`.
 */
export function channelSender(deps: { db: Db; queue: OutboxQueue; events: OutboxEvents }) {
  return async (input: SendMessageInput): Promise<{ messageId: string }> => {
    if (!isPlatform(input.platform) || input.platform === 'api') throw new Error(`"${input.platform}" is not a messaging platform`);
    const account =
      input.accountId === undefined
        ? ((await firstBoundAccount(deps.db, input.agentId, input.platform)) ?? (await sendingAccount(deps.db, input.platform, undefined)))
        : await sendingAccount(deps.db, input.platform, input.accountId);
    const bound = await agentMaySendThrough(deps.db, input.agentId, input.platform, account.id);
    const refused = refusal(input.authority, {
      kind: 'send',
      bindingRefusal: bound ? null : notBoundMessage(input.agentId, input.platform, account.id),
      chatRefusal: deliverChatRefusal(account, input.platform, input.chatId),
      pinned: input.pinned,
    });
    if (refused !== undefined) throw new Error(refused);
    const outcome = await sendAndWait(
      deps,
      { platform: input.platform, accountId: account.id, chatId: input.chatId, kind: 'text', payload: { text: input.text }, source: 'tool' },
      { timeoutMs: TOOL_SEND_WAIT_MS },
    );
    switch (outcome.kind) {
      case 'sent':
        return { messageId: outcome.message.platformMessageId ?? '' };
      case 'failed':
        throw new Error(`${input.platform} refused the message: ${outcome.message.error ?? 'unknown error'}`);
      case 'pending':
        throw new Error(`${input.platform} did not confirm the message within ${TOOL_SEND_WAIT_MS / 1000} s; it stays queued and may still be delivered`);
      default: {
        const never: never = outcome;
        throw new Error(`unknown send outcome ${String(never)}`);
      }
    }
  };
}

/**
 * Without an account named, the tool sends through the platform's first enabled account bound to
 * the agent (the only ones it may use); none bound leaves the platform's default, which the
 * policy then refuses naming the missing binding.
 */
async function firstBoundAccount(db: Db, agentId: string, platform: string): Promise<ChannelAccountRecord | undefined> {
  for (const account of await listChannelAccounts(db, platform)) {
    if (account.enabled && (await agentMaySendThrough(db, agentId, platform, account.id))) return account;
  }
  return undefined;
}
