import Type from 'typebox';
import { defineToolSpec } from './types.js';

const Parameters = Type.Object(
  {
    platform: Type.String({ minLength: 1, maxLength: 64, description: 'channel platform id, e.g. chat_d' }),
    chatId: Type.String({ minLength: 1, maxLength: 512, description: 'the chat (or user:<id>) to send to' }),
    message: Type.String({ minLength: 1, maxLength: 20_000, description: 'the text to send' }),
    accountId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "the account to send through (default: the platform's first enabled account bound to this agent)" })),
  },
  { additionalProperties: false },
);

const Config = Type.Object({
  platforms: Type.Optional(Type.Array(Type.String(), { description: 'platforms the agent may send to (default: all)' })),
  chatIds: Type.Optional(
    Type.Array(Type.String(), {
      description: "chats the agent may send to (default: those the account admits, see allow_from); an admin's agent may list chats outside the account's allow_from",
    }),
  ),
});

/** The `sendMessage` built-in tool as a definition sees it: its name, arguments and per-agent config. */
export const sendMessageSpec = defineToolSpec({
  name: 'send_message',
  description: 'Send a text message to a chat on a messaging platform through one of the configured channel accounts. Answers with the platform message id.',
  parameters: Parameters,
  configSchema: Config,
  optIn: true,
});
