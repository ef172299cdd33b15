import Type, { type Static } from 'typebox';
import { Closed, SuccessBody } from './common.js';
import { Budget } from './usage.js';

/**
 * Channel accounts, bindings and outbound sends (spec "Channel platform and account", "Binding",
 * "Outbound messages"). Accounts are read in camelCase; secrets never leave the server, only
 * whether one is set (`hasSecret`).
 */

/**
 * An account as read: the spec's fields, then the platform's other non-secret settings in
 * camelCase (`allowFrom`, `sessionScope`, `apiBase`, ...), which differ per platform: open.
 */
export const ChannelAccount = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    enabled: Type.Boolean(),
    dmPolicy: Type.String(),
    groupPolicy: Type.String(),
    appId: Type.String(),
    hasSecret: Type.Boolean(),
  },
  { additionalProperties: true },
);
export type ChannelAccount = Static<typeof ChannelAccount> & { [setting: string]: unknown };

/** A created account; an `api` account created without a key shows the generated one this once. */
export const ChannelAccountCreated = Type.Object(
  { ...ChannelAccount.properties, apiKey: Type.Optional(Type.String()) },
  { additionalProperties: true },
);
export type ChannelAccountCreated = Static<typeof ChannelAccountCreated> & { [setting: string]: unknown };

/** One platform: its switch (from the configuration file) and its accounts by id. */
export const ChannelPlatformView = Type.Object({
  enabled: Type.Boolean(),
  accounts: Type.Record(Type.String(), ChannelAccount),
});
// Static drops the accounts' open settings: the account type is put back with them.
export type ChannelPlatformView = Omit<Static<typeof ChannelPlatformView>, 'accounts'> & { accounts: Record<string, ChannelAccount> };

export const ChannelsView = Type.Object({ platforms: Type.Record(Type.String(), ChannelPlatformView) });
export type ChannelsView = Omit<Static<typeof ChannelsView>, 'platforms'> & { platforms: Record<string, ChannelPlatformView> };

/** Which account's messages an agent answers: a channel (and account), or the default. */
export const ChannelBinding = Type.Object({
  agentId: Type.String(),
  match: Type.Object({
    default: Type.Optional(Type.Boolean()),
    channel: Type.Optional(Type.String()),
    accountId: Type.Optional(Type.String()),
  }),
});
export type ChannelBinding = Static<typeof ChannelBinding>;

/** A binding as read: `match.default` is always there (false for account and platform bindings). */
export const ChannelBindingView = Type.Object({
  agentId: Type.String(),
  match: Type.Object({
    default: Type.Boolean(),
    channel: Type.Optional(Type.String()),
    accountId: Type.Optional(Type.String()),
  }),
});
export type ChannelBindingView = Static<typeof ChannelBindingView>;

export const BindingList = Type.Object({ bindings: Type.Array(ChannelBindingView) });
export type BindingList = Static<typeof BindingList>;

/** A message the platform accepted, with the id it gave it (empty when it gives none). */
export const ChannelSendResult = Type.Object({ ...SuccessBody.properties, messageId: Type.String() });
export type ChannelSendResult = Static<typeof ChannelSendResult>;

// Requests.

export const ChannelPlatformParams = Type.Object({ platform: Type.String({ maxLength: 64 }) });
export type ChannelPlatformParams = Static<typeof ChannelPlatformParams>;
export const ChannelAccountParams = Type.Object({ platform: Type.String({ maxLength: 64 }), accountId: Type.String({ maxLength: 128 }) });
export type ChannelAccountParams = Static<typeof ChannelAccountParams>;

/** A binding's match as written. */
export const BindingMatchInput = Type.Object(
  {
    default: Type.Optional(Type.Boolean()),
    channel: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    accountId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    // The configuration file's spelling: taken as accountId, so a copied binding keeps its account.
    account_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'the configuration file spelling of accountId' })),
  },
  Closed,
);
export type BindingMatchInput = Static<typeof BindingMatchInput>;
const BindingAgent = Type.String({ minLength: 1, maxLength: 128 });
const BindingInput = Type.Object({ agentId: BindingAgent, match: BindingMatchInput }, Closed);
/** The binding written with an account: its match defaults to that account. */
const AccountBindingInput = Type.Object({ agentId: BindingAgent, match: Type.Optional(BindingMatchInput) }, Closed);
/** PUT /bindings: the whole list, replaced. */
export const BindingsBody = Type.Object({ bindings: Type.Array(BindingInput, { maxItems: 10_000 }) }, Closed);
export type BindingsBody = Static<typeof BindingsBody>;

// Platforms have fields of their own, so the account bodies are open; the gateway refuses any
// field the platform's adapter does not read, naming it.
const accountFields = {
  name: Type.Optional(Type.String({ maxLength: 256 })),
  enabled: Type.Optional(Type.Boolean()),
  budget: Type.Optional(Type.Union([Budget, Type.Null()], { description: 'api accounts: what chat may spend; null removes it' })),
};
const AccountId = Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'letters, digits, _ and -' });
export const ChannelAccountCreateBody = Type.Object({ id: AccountId, ...accountFields, binding: Type.Optional(AccountBindingInput) }, { additionalProperties: true });
export type ChannelAccountCreateBody = Static<typeof ChannelAccountCreateBody>;
export const ChannelAccountUpdateBody = Type.Object({ id: Type.Optional(Type.String()), ...accountFields }, { additionalProperties: true });
export type ChannelAccountUpdateBody = Static<typeof ChannelAccountUpdateBody>;

const ChatId = Type.String({ minLength: 1, maxLength: 512 });
const SendAccount = Type.Optional(Type.String({ minLength: 1, maxLength: 128 }));
const MediaPath = Type.String({ minLength: 1, maxLength: 1024 });
const MediaKey = Type.String({ minLength: 1, maxLength: 1024 });
const mediaAgent = (field: string) =>
  Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: `the agent whose workspace holds ${field}; without it ${field} names a file of the media area` }));

export const ChannelSendBody = Type.Object({ chatId: ChatId, message: Type.String({ minLength: 1, maxLength: 100_000 }), accountId: SendAccount }, Closed);
export type ChannelSendBody = Static<typeof ChannelSendBody>;
export const ChannelSendImageBody = Type.Object(
  { chatId: ChatId, imagePath: Type.Optional(MediaPath), imageKey: Type.Optional(MediaKey), agentId: mediaAgent('imagePath'), accountId: SendAccount },
  Closed,
);
export type ChannelSendImageBody = Static<typeof ChannelSendImageBody>;
export const ChannelSendFileBody = Type.Object(
  {
    chatId: ChatId,
    filePath: Type.Optional(MediaPath),
    fileName: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    fileKey: Type.Optional(MediaKey),
    agentId: mediaAgent('filePath'),
    accountId: SendAccount,
  },
  Closed,
);
export type ChannelSendFileBody = Static<typeof ChannelSendFileBody>;
