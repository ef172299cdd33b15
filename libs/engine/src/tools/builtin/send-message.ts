import type { Static } from 'typebox';
import { ToolError } from '../types.js';
import { sendMessageSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, type BuiltinTool } from './common.js';

/**
 * `send_message`: sends a text to a chat through a channel account (the outbound queue: the
 * connector sends it, with retries) and waits for the platform's answer. Off by default: an agent
 * that can message arbitrary chats is a spam and leak risk, so an operator opts in per agent and
 * may pin the platforms and chats it may reach in the tool's config. Whether the send is allowed
 * is the policy's (`refusal`, capability `send`), asked where the account is known (the sender):
 * only through an account bound to the agent, only to chats the account admits, unless an admin's
 * definition pins the chat in `chatIds`.
 */
const Parameters = sendMessageSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = sendMessageSpec.configSchema;
type Config = Static<typeof Config>;

export const sendMessageTool: BuiltinTool = {
  ...sendMessageSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('send_message', Parameters, raw);
    const cfg = checkConfig<Config>('send_message', Config, ctx.config);
    if (cfg.platforms && !cfg.platforms.includes(args.platform)) {
      throw new ToolError(`send_message: this agent may send to ${cfg.platforms.join(', ') || 'no platform'}, not ${args.platform}`);
    }
    if (cfg.chatIds && !cfg.chatIds.includes(args.chatId)) throw new ToolError(`send_message: this agent may not send to chat ${args.chatId}`);
    if (!ctx.sendMessage) throw new ToolError('send_message: channels are not available in this process');
    if (!ctx.authority) throw new ToolError('send_message: this run carries no authority to send with');
    try {
      const sent = await ctx.sendMessage({
        agentId: ctx.agentId,
        platform: args.platform,
        chatId: args.chatId,
        text: args.message,
        authority: ctx.authority,
        pinned: cfg.chatIds !== undefined && cfg.chatIds.includes(args.chatId),
        ...(args.accountId !== undefined ? { accountId: args.accountId } : {}),
      });
      ctx.logger.info({ platform: args.platform, chatId: args.chatId, messageId: sent.messageId }, 'send_message sent a message');
      return JSON.stringify({ success: true, messageId: sent.messageId });
    } catch (err) {
      if (err instanceof ToolError) throw err;
      throw new ToolError(`send_message: ${(err as Error).message}`);
    }
  },
};
