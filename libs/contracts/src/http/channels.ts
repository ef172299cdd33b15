import Type, { type Static } from 'typebox';
import { SuccessBody } from './common.js';

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
