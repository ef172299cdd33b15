/*
 * The inbound events URL (channels/inbound.ts) has no response schema: it answers each platform
 * in that platform's own format (challenge echoes, plain-text or JSON acknowledgements).
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import { Errors } from '@agentry/errors';
import {
  BindingList,
  Budget,
  ChannelAccount,
  ChannelAccountCreated,
  ChannelPlatformView,
  ChannelSendResult,
  ChannelsView,
  PLATFORMS,
  SuccessBody,
  type Platform,
} from '@agentry/contracts';
import { accountContext, adapterFor, mediaDirOf, normaliseMediaPath, resolveMediaFile, sendAndWait, sendingAccount, type OutboundInput } from '@agentry/channels';
import {
  appendBinding,
  lockBindings,
  deleteChannelAccount,
  getChannelAccount,
  getRuleChain,
  getWorkspaceEntry,
  inTransaction,
  insertChannelAccount,
  isUniqueViolation,
  listBindings,
  listChannelAccounts,
  replaceBindings,
  upsertChannelAccount,
  type BindingRecord,
  type Db,
  type JsonValue,
} from '@agentry/db';
import { normaliseWorkspacePath } from '@agentry/engine';
import { hashApiKey } from '../auth/passwords.js';
import type { GatewayDeps } from '../deps.js';
import {
  accountView,
  checkWrittenFields,
  mergeAccount,
  secretsKeptOnUpdate,
  newAccountApiKey,
  platformView,
  publishChannelsChange,
  requirePlatform,
} from '../channels/accounts.js';
import { inboundRoutes } from '../channels/inbound.js';
import { typed } from './common.js';

const AccountId = Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'letters, digits, _ and -' });
const PlatformParams = Type.Object({ platform: Type.String({ maxLength: 64 }) });
const AccountParams = Type.Object({ platform: Type.String({ maxLength: 64 }), accountId: Type.String({ maxLength: 128 }) });

const Match = Type.Object(
  {
    default: Type.Optional(Type.Boolean()),
    channel: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    accountId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    // The configuration file's spelling: taken as accountId, so a copied binding keeps its account.
    account_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'the configuration file spelling of accountId' })),
  },
  { additionalProperties: false },
);
const Binding = Type.Object({ agentId: Type.String({ minLength: 1, maxLength: 128 }), match: Match }, { additionalProperties: false });
/** The binding written with an account: its match defaults to that account. */
const AccountBinding = Type.Object({ agentId: Type.String({ minLength: 1, maxLength: 128 }), match: Type.Optional(Match) }, { additionalProperties: false });
const BindingsBody = Type.Object({ bindings: Type.Array(Binding, { maxItems: 10_000 }) }, { additionalProperties: false });

// Platforms have fields of their own, so the schema is open; checkWrittenFields refuses any field
// the platform's adapter does not read, naming it.
const Common = {
  name: Type.Optional(Type.String({ maxLength: 256 })),
  enabled: Type.Optional(Type.Boolean()),
  budget: Type.Optional(Type.Union([Budget, Type.Null()], { description: 'api accounts: what chat may spend; null removes it' })),
};
const CreateBody = Type.Object({ id: AccountId, ...Common, binding: Type.Optional(AccountBinding) }, { additionalProperties: true });
const UpdateBody = Type.Object({ id: Type.Optional(Type.String()), ...Common }, { additionalProperties: true });

const ChatId = Type.String({ minLength: 1, maxLength: 512 });
const SendAccount = Type.Optional(Type.String({ minLength: 1, maxLength: 128 }));
const SendBody = Type.Object({ chatId: ChatId, message: Type.String({ minLength: 1, maxLength: 100_000 }), accountId: SendAccount }, { additionalProperties: false });
const WorkspacePath = Type.String({ minLength: 1, maxLength: 1024 });
const SendImageBody = Type.Object(
  {
    chatId: ChatId,
    imagePath: Type.Optional(WorkspacePath),
    imageKey: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    agentId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'the agent whose workspace holds imagePath; without it imagePath names a file of the media area' })),
    accountId: SendAccount,
  },
  { additionalProperties: false },
);
const SendFileBody = Type.Object(
  {
    chatId: ChatId,
    filePath: Type.Optional(WorkspacePath),
    fileName: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    fileKey: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    agentId: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'the agent whose workspace holds filePath; without it filePath names a file of the media area' })),
    accountId: SendAccount,
  },
  { additionalProperties: false },
);

export interface ChannelRouteOptions {
  /** How long a send request waits for the platform's answer before giving up (the message stays queued). */
  sendWaitMs: number;
  /** Rebuilds this replica's key index at once, so a key created or replaced here works (or stops) on the next request. */
  reloadCredentials: () => Promise<void>;
}

type PlatformParams = Static<typeof PlatformParams>;
type AccountParams = Static<typeof AccountParams>;
/** The written form is open (platform fields): these are the ones read by name. */
type WrittenAccount = Record<string, unknown> & { name?: string; enabled?: boolean };
type NewAccount = WrittenAccount & { id: string; binding?: { agentId: string; match?: Static<typeof Match> } };
/**
 * What a handler reads of its request. Narrow, so handlers can be named functions apart from the
 * registration; registering one still checks it against the route's schemas (type provider).
 */
interface Req<P = unknown, B = unknown> {
  params: P;
  body: B;
  log: FastifyBaseLogger;
}
/** The reply, only to set a create's 201; the handler returns the body, serialized by the route's schema. */
interface Reply {
  code(status: 201): unknown;
}

/** After a change: this replica's key index first (it must not answer before it knows), then the others. */
async function changed(deps: GatewayDeps, opts: ChannelRouteOptions, id?: string): Promise<void> {
  await opts.reloadCredentials().catch((err: unknown) => deps.logger.warn({ err }, 'credential reload after a channels change failed'));
  await publishChannelsChange(deps, id);
}

/** The sealed secrets and the api key's lookup hash of a merged account, as stored. */
function sealed(deps: GatewayDeps, platform: Platform, merged: { secrets: Record<string, string> }) {
  const apiKey = platform === 'api' ? merged.secrets.api_key : undefined;
  return {
    secretsSealed: Object.keys(merged.secrets).length > 0 ? deps.secrets.seal(JSON.stringify(merged.secrets)) : null,
    apiKeyHash: apiKey ? hashApiKey(apiKey) : null,
  };
}

function listPlatforms(deps: GatewayDeps) {
  return async (): Promise<ChannelsView> => {
    const platforms: Record<string, ChannelPlatformView> = {};
    for (const p of PLATFORMS) platforms[p] = await platformView(deps, p);
    return { platforms };
  };
}

function getPlatform(deps: GatewayDeps) {
  return async (req: Req<PlatformParams>): Promise<ChannelPlatformView> => platformView(deps, requirePlatform(req.params.platform));
}

function getAccount(deps: GatewayDeps) {
  return async (req: Req<AccountParams>): Promise<ChannelAccount> => {
    const platform = requirePlatform(req.params.platform);
    const account = await getChannelAccount(deps.db.db, platform, req.params.accountId);
    if (!account) throw new Errors.NOT_FOUND(`${platform} account "${req.params.accountId}"`);
    return accountView(account);
  };
}

function createAccount(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<PlatformParams, unknown>, reply: Reply): Promise<ChannelAccountCreated> => {
    const db = deps.db.db;
    const platform = requirePlatform(req.params.platform);
    const body = req.body as NewAccount;
    checkPlatformFields(platform, body);
    checkWrittenFields(platform, body);
    const binding = body.binding
      ? { agentId: body.binding.agentId, match: body.binding.match ? writtenMatch(body.binding.match, 'binding') : { channel: platform, accountId: body.id } }
      : undefined;
    if (binding) await checkBinding(db, binding, new Set([...(await accountKeys(db)), `${platform}/${body.id}`]));

    let generatedKey: string | undefined;
    if (platform === 'api' && body.api_key === undefined) body.api_key = generatedKey = newAccountApiKey();
    const merged = mergeAccount({ settings: {}, secrets: {} }, body);
    const created = await inTransaction(db, async (trx) => {
      const ok = await insertChannelAccount(trx, {
        platform,
        id: body.id,
        name: body.name ?? body.id,
        enabled: body.enabled ?? true,
        settings: merged.settings,
        ...sealed(deps, platform, merged),
        fileHmac: null,
      });
      if (!ok) return false;
      if (binding) await appendBinding(trx, binding);
      return true;
    }).catch((err: unknown) => {
      // Two accounts cannot share an api key (unique hash).
      if (isUniqueViolation(err)) throw new Errors.CONFLICT('an account with this api_key');
      throw err;
    });
    if (!created) throw new Errors.CONFLICT(`${platform} account "${body.id}"`);
    await changed(deps, opts, `${platform}/${body.id}`);
    req.log.info({ platform, accountId: body.id, binding: binding?.agentId }, 'channel account created');
    const account = await getChannelAccount(db, platform, body.id);
    reply.code(201);
    // The generated key is shown this once; it can be replaced later with PUT {api_key}.
    return { ...accountView(account!), ...(generatedKey ? { apiKey: generatedKey } : {}) };
  };
}

function updateAccount(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<AccountParams, unknown>): Promise<ChannelAccount> => {
    const db = deps.db.db;
    const platform = requirePlatform(req.params.platform);
    const id = req.params.accountId;
    const body = req.body as WrittenAccount;
    if (body.id !== undefined && body.id !== id) throw new Errors.VALIDATION(`id: the account id cannot change ("${id}" in the path)`);
    if ('binding' in body) throw new Errors.VALIDATION('binding: change bindings with PUT /api/v1/bindings');
    checkPlatformFields(platform, body);
    checkWrittenFields(platform, body);
    if (platform === 'api' && body.api_key === null) throw new Errors.VALIDATION('api_key: an api account needs a key; send a new one to replace it');
    const existing = await getChannelAccount(db, platform, id);
    if (!existing) throw new Errors.NOT_FOUND(`${platform} account "${id}"`);
    const stored = existing.secretsSealed ? (JSON.parse(deps.secrets.open(existing.secretsSealed)) as Record<string, string>) : {};
    const secrets = secretsKeptOnUpdate(platform, existing.settings, stored, body);
    if (secrets !== stored && Object.keys(stored).length > 0) req.log.info({ platform, accountId: id }, 'channel account moved to another host: its stored secrets were cleared');
    const merged = mergeAccount({ settings: existing.settings, secrets }, body);
    try {
      await upsertChannelAccount(db, {
        platform,
        id,
        name: body.name ?? existing.name,
        enabled: body.enabled ?? existing.enabled,
        settings: merged.settings,
        ...sealed(deps, platform, merged),
        fileHmac: existing.fileHmac,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Errors.CONFLICT('an account with this api_key');
      throw err;
    }
    await changed(deps, opts, `${platform}/${id}`);
    req.log.info({ platform, accountId: id, fields: Object.keys(body) }, 'channel account updated');
    return accountView((await getChannelAccount(db, platform, id))!);
  };
}

function deleteAccount(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<AccountParams>): Promise<SuccessBody> => {
    const platform = requirePlatform(req.params.platform);
    const id = req.params.accountId;
    const removed = await inTransaction(deps.db.db, async (trx) => {
      await lockBindings(trx);
      const ok = await deleteChannelAccount(trx, platform, id);
      if (!ok) return false;
      // Bindings naming the account would match nothing: they go with it.
      const left = (await listBindings(trx)).filter((b) => !(b.match.channel === platform && b.match.accountId === id));
      await replaceBindings(trx, left);
      return true;
    });
    if (!removed) throw new Errors.NOT_FOUND(`${platform} account "${id}"`);
    await changed(deps, opts, `${platform}/${id}`);
    req.log.info({ platform, accountId: id }, 'channel account deleted');
    return { success: true };
  };
}

/** Bindings as read: `match.default` always shown, false unless it is the default binding. */
async function bindingsView(db: Db): Promise<BindingList> {
  return { bindings: (await listBindings(db)).map((b) => ({ agentId: b.agentId, match: { ...b.match, default: b.match.default === true } })) };
}

function getBindings(deps: GatewayDeps) {
  return async (): Promise<BindingList> => bindingsView(deps.db.db);
}

/** A written match with the file spelling `account_id` folded into `accountId`. */
function writtenMatch(m: Static<typeof Match>, where: string): BindingRecord['match'] {
  const { account_id: fileSpelling, ...match } = m;
  if (fileSpelling !== undefined && match.accountId !== undefined && fileSpelling !== match.accountId) {
    throw new Errors.VALIDATION(`${where}.match: accountId and account_id disagree ("${match.accountId}" and "${fileSpelling}"); send accountId alone`);
  }
  return dropUndefined({ ...match, accountId: match.accountId ?? fileSpelling });
}

function putBindings(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<unknown, Static<typeof BindingsBody>>): Promise<BindingList> => {
    const db = deps.db.db;
    const bindings = req.body.bindings.map((b, i) => ({ agentId: b.agentId, match: writtenMatch(b.match, `bindings[${i}]`) }));
    const accounts = await accountKeys(db);
    for (const [i, b] of bindings.entries()) await checkBinding(db, b, accounts, `bindings[${i}]`);
    await inTransaction(db, (trx) => replaceBindings(trx, bindings));
    await changed(deps, opts);
    req.log.info({ count: bindings.length }, 'bindings replaced');
    return bindingsView(db);
  };
}

/** Queues an outbound message and waits (up to `sendWaitMs`) for the platform's answer. */
async function send(
  deps: GatewayDeps,
  opts: ChannelRouteOptions,
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
    { timeoutMs: opts.sendWaitMs },
  );
  switch (outcome.kind) {
    case 'sent':
      return { success: true, messageId: outcome.message.platformMessageId ?? '' };
    case 'failed':
      throw new Errors.UPSTREAM(`${platform} refused the message: ${outcome.message.error ?? 'unknown error'}`);
    case 'pending':
      throw new Errors.UPSTREAM(
        `${platform} did not confirm the message within ${Math.round(opts.sendWaitMs / 1000)} s; it stays queued as ${outcome.message.id} and may still be delivered` +
          (outcome.message.error ? ` (last error: ${outcome.message.error})` : ''),
      );
    default: {
      const never: never = outcome;
      throw new Errors.INTERNAL(`unknown send outcome ${String(never)}`);
    }
  }
}

function sendText(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<PlatformParams, Static<typeof SendBody>>): Promise<ChannelSendResult> =>
    send(deps, opts, { platform: req.params.platform, accountId: req.body.accountId, chatId: req.body.chatId }, async () => ({ kind: 'text', payload: { text: req.body.message } }));
}

function sendImage(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<PlatformParams, Static<typeof SendImageBody>>): Promise<ChannelSendResult> => {
    const b = req.body;
    return send(deps, opts, { platform: req.params.platform, accountId: b.accountId, chatId: b.chatId }, async () => ({
      kind: 'image',
      payload: await mediaPayload(deps, { path: b.imagePath, key: b.imageKey, agentId: b.agentId, pathField: 'imagePath', keyField: 'imageKey' }),
    }));
  };
}

function sendFile(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: Req<PlatformParams, Static<typeof SendFileBody>>): Promise<ChannelSendResult> => {
    const b = req.body;
    return send(deps, opts, { platform: req.params.platform, accountId: b.accountId, chatId: b.chatId }, async () => ({
      kind: 'file',
      payload: {
        ...(await mediaPayload(deps, { path: b.filePath, key: b.fileKey, agentId: b.agentId, pathField: 'filePath', keyField: 'fileKey' })),
        ...(b.fileName ? { fileName: b.fileName } : {}),
      },
    }));
  };
}

/**
 * Channels: accounts per platform, bindings, outbound sends and the inbound events URL.
 * Accounts are written in snake_case and read in camelCase; secret fields are sealed at rest and
 * never returned (`hasSecret`). Every change tells every replica (credential index, connector).
 */
export function channelRoutes(app: FastifyInstance, deps: GatewayDeps, opts: ChannelRouteOptions): void {
  const api = typed(app);
  const user = { access: 'user' } as const;
  const admin = { access: 'admin' } as const;
  const bindings = { 200: BindingList };
  const sent = { 200: ChannelSendResult };

  api.get('/channels', { config: user, schema: { response: { 200: ChannelsView } } }, listPlatforms(deps));
  api.get('/channels/:platform', { config: user, schema: { params: PlatformParams, response: { 200: ChannelPlatformView } } }, getPlatform(deps));
  api.get('/channels/:platform/accounts/:accountId', { config: user, schema: { params: AccountParams, response: { 200: ChannelAccount } } }, getAccount(deps));
  api.post('/channels/:platform/accounts', { config: admin, schema: { params: PlatformParams, body: CreateBody, response: { 201: ChannelAccountCreated } } }, createAccount(deps, opts));
  api.put('/channels/:platform/accounts/:accountId', { config: admin, schema: { params: AccountParams, body: UpdateBody, response: { 200: ChannelAccount } } }, updateAccount(deps, opts));
  api.delete('/channels/:platform/accounts/:accountId', { config: admin, schema: { params: AccountParams, response: { 200: SuccessBody } } }, deleteAccount(deps, opts));

  api.get('/bindings', { config: user, schema: { response: bindings } }, getBindings(deps));
  api.put('/bindings', { config: admin, schema: { body: BindingsBody, response: bindings } }, putBindings(deps, opts));

  api.post('/channels/:platform/send', { config: admin, schema: { params: PlatformParams, body: SendBody, response: sent } }, sendText(deps, opts));
  api.post('/channels/:platform/send-image', { config: admin, schema: { params: PlatformParams, body: SendImageBody, response: sent } }, sendImage(deps, opts));
  api.post('/channels/:platform/send-file', { config: admin, schema: { params: PlatformParams, body: SendFileBody, response: sent } }, sendFile(deps, opts));

  inboundRoutes(app, deps);
}

/** Platform rules the shared checks do not cover. */
function checkPlatformFields(platform: Platform, body: Record<string, unknown>): void {
  if (platform === 'api' && body.api_key !== undefined && body.api_key !== null && (typeof body.api_key !== 'string' || body.api_key.length < 16)) {
    throw new Errors.VALIDATION('api_key: at least 16 characters');
  }
  // Clients send the key as "Authorization: Bearer <key>", whose token allows only these characters.
  if (platform === 'api' && typeof body.api_key === 'string' && !/^[A-Za-z0-9._~+/=-]+$/.test(body.api_key)) {
    throw new Errors.VALIDATION('api_key: letters, digits and . _ ~ + / = - only (it travels as a Bearer token)');
  }
  if (platform !== 'api' && body.api_key !== undefined) throw new Errors.VALIDATION(`api_key: only api accounts have one (this is ${platform})`);
}

/** `platform/id` of every account, read once per request for the binding checks. */
async function accountKeys(db: Db): Promise<Set<string>> {
  return new Set((await listChannelAccounts(db)).map((a) => `${a.platform}/${a.id}`));
}

/** A binding's agent exists, its channel is a platform, its account is among `accounts`. */
async function checkBinding(db: Db, b: BindingRecord, accounts: ReadonlySet<string>, where = 'binding'): Promise<void> {
  const agent = await getRuleChain(db, b.agentId);
  if (!agent || agent.kind !== 'agent') throw new Errors.VALIDATION(`${where}.agentId: no agent "${b.agentId}"`);
  const { channel, accountId } = b.match;
  if (channel === undefined && accountId === undefined && b.match.default !== true) {
    throw new Errors.VALIDATION(`${where}.match: give channel (and optionally accountId), or default: true`);
  }
  if (accountId !== undefined && channel === undefined) throw new Errors.VALIDATION(`${where}.match.accountId needs match.channel`);
  if (channel !== undefined) {
    if (!(PLATFORMS as readonly string[]).includes(channel)) throw new Errors.VALIDATION(`${where}.match.channel: "${channel}" is not a platform (one of ${PLATFORMS.join(', ')})`);
    if (accountId !== undefined && !accounts.has(`${channel}/${accountId}`)) throw new Errors.VALIDATION(`${where}.match.accountId: no ${channel} account "${accountId}"`);
  }
}

/**
 * What an image or file message sends: a platform key (which wins when a path comes too: the file
 * is already on the platform), a file of `agentId`'s workspace, or a file of the media area
 * (`<data root_dir>/media/`). Never any other host path.
 */
async function mediaPayload(
  deps: GatewayDeps,
  m: { path: string | undefined; key: string | undefined; agentId: string | undefined; pathField: string; keyField: string },
): Promise<Record<string, JsonValue>> {
  if (m.key !== undefined) return { key: m.key };
  if (m.path === undefined) throw new Errors.VALIDATION(`give ${m.pathField} or ${m.keyField}`);
  if (m.agentId === undefined) {
    const media = normaliseMediaPath(m.path, m.pathField);
    await resolveMediaFile(mediaDirOf(deps.loaded.paths.rootDir), media, m.pathField);
    return { media };
  }
  const db = deps.db.db;
  const agent = await getRuleChain(db, m.agentId);
  if (!agent || agent.kind !== 'agent') throw new Errors.NOT_FOUND(`agent "${m.agentId}"`);
  const path = normaliseWorkspacePath(m.path);
  if (path === '') throw new Errors.VALIDATION(`${m.pathField}: name a file, not the workspace root`);
  const entry = await getWorkspaceEntry(db, m.agentId, path);
  if (!entry || entry.isDir) throw new Errors.VALIDATION(`${m.pathField}: no file "${path}" in the workspace of agent "${m.agentId}"`);
  return { agentId: m.agentId, path };
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
