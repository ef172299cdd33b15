/*
 * The inbound events URL (channels/inbound.ts) has no response schema: it answers each platform
 * in that platform's own format (challenge echoes, plain-text or JSON acknowledgements).
 */
import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import {
  BindingList,
  BindingsBody,
  ChannelAccount,
  ChannelAccountCreateBody,
  ChannelAccountCreated,
  ChannelAccountParams,
  ChannelAccountUpdateBody,
  ChannelPlatformParams,
  ChannelPlatformView,
  ChannelSendBody,
  ChannelSendFileBody,
  ChannelSendImageBody,
  ChannelSendResult,
  ChannelsView,
  PLATFORMS,
  SuccessBody,
  type BindingMatchInput,
} from '@agentry/contracts';
import {
  appendBinding,
  lockBindings,
  deleteChannelAccount,
  getChannelAccount,
  inTransaction,
  insertChannelAccount,
  isUniqueViolation,
  listBindings,
  replaceBindings,
  upsertChannelAccount,
  getRuleChain,
  getWorkspaceEntry,
  type JsonValue,
} from '@agentry/db';
import { mediaDirOf, normaliseMediaPath, resolveMediaFile } from '@agentry/channels';
import { normaliseWorkspacePath } from '@agentry/definitions';
import type { GatewayDeps } from '../deps.js';
import {
  accountView,
  checkPlatformFields,
  checkWrittenFields,
  mergeAccount,
  secretsKeptOnUpdate,
  newAccountApiKey,
  platformView,
  publishChannelsChange,
  requirePlatform,
  sealedSecrets,
} from '../channels/accounts.js';
import { accountKeys, bindingsView, checkBinding, writtenMatch } from '../channels/bindings.js';
import { sendFromApi } from '../channels/send.js';
import { inboundRoutes } from '../channels/inbound.js';
import { typed, type TypedReply, type TypedRequest } from './common.js';

export interface ChannelRouteOptions {
  /** How long a send request waits for the platform's answer before giving up (the message stays queued). */
  sendWaitMs: number;
  /** Rebuilds this replica's key index at once, so a key created or replaced here works (or stops) on the next request. */
  reloadCredentials: () => Promise<void>;
}

/** The written form is open (platform fields): these are the ones read by name. */
type WrittenAccount = Record<string, unknown> & { name?: string; enabled?: boolean };
type NewAccount = WrittenAccount & { id: string; binding?: { agentId: string; match?: BindingMatchInput } };

const bindings = { 200: BindingList };
const sent = { 200: ChannelSendResult };
const ListPlatforms = { response: { 200: ChannelsView } };
const GetPlatform = { params: ChannelPlatformParams, response: { 200: ChannelPlatformView } };
const GetAccount = { params: ChannelAccountParams, response: { 200: ChannelAccount } };
const CreateAccount = { params: ChannelPlatformParams, body: ChannelAccountCreateBody, response: { 201: ChannelAccountCreated } };
const UpdateAccount = { params: ChannelAccountParams, body: ChannelAccountUpdateBody, response: { 200: ChannelAccount } };
const DeleteAccount = { params: ChannelAccountParams, response: { 200: SuccessBody } };
const GetBindings = { response: bindings };
const PutBindings = { body: BindingsBody, response: bindings };
const SendText = { params: ChannelPlatformParams, body: ChannelSendBody, response: sent };
const SendImage = { params: ChannelPlatformParams, body: ChannelSendImageBody, response: sent };
const SendFile = { params: ChannelPlatformParams, body: ChannelSendFileBody, response: sent };

/** After a change: this replica's key index first (it must not answer before it knows), then the others. */
async function changed(deps: GatewayDeps, opts: ChannelRouteOptions, id?: string): Promise<void> {
  await opts.reloadCredentials().catch((err: unknown) => deps.logger.warn({ err }, 'credential reload after a channels change failed'));
  await publishChannelsChange(deps, id);
}

function listPlatforms(deps: GatewayDeps) {
  return async (): Promise<ChannelsView> => {
    const platforms: Record<string, ChannelPlatformView> = {};
    for (const p of PLATFORMS) platforms[p] = await platformView(deps, p);
    return { platforms };
  };
}

function getPlatform(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetPlatform>): Promise<ChannelPlatformView> => platformView(deps, requirePlatform(req.params.platform));
}

function getAccount(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetAccount>): Promise<ChannelAccount> => {
    const platform = requirePlatform(req.params.platform);
    const account = await getChannelAccount(deps.db.db, platform, req.params.accountId);
    if (!account) throw new Errors.NOT_FOUND(`${platform} account "${req.params.accountId}"`);
    return accountView(account);
  };
}

function createAccount(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: TypedRequest<typeof CreateAccount>, reply: TypedReply<typeof CreateAccount>): Promise<ChannelAccountCreated> => {
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
        ...sealedSecrets(deps, platform, merged),
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
  return async (req: TypedRequest<typeof UpdateAccount>): Promise<ChannelAccount> => {
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
        ...sealedSecrets(deps, platform, merged),
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
  return async (req: TypedRequest<typeof DeleteAccount>): Promise<SuccessBody> => {
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

function getBindings(deps: GatewayDeps) {
  return async (): Promise<BindingList> => bindingsView(deps.db.db);
}

function putBindings(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: TypedRequest<typeof PutBindings>): Promise<BindingList> => {
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

function sendText(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: TypedRequest<typeof SendText>): Promise<ChannelSendResult> =>
    sendFromApi(deps, opts.sendWaitMs, { platform: req.params.platform, accountId: req.body.accountId, chatId: req.body.chatId }, async () => ({ kind: 'text', payload: { text: req.body.message } }));
}

function sendImage(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: TypedRequest<typeof SendImage>): Promise<ChannelSendResult> => {
    const b = req.body;
    return sendFromApi(deps, opts.sendWaitMs, { platform: req.params.platform, accountId: b.accountId, chatId: b.chatId }, async () => ({
      kind: 'image',
      payload: await mediaPayload(deps, { path: b.imagePath, key: b.imageKey, agentId: b.agentId, pathField: 'imagePath', keyField: 'imageKey' }),
    }));
  };
}

function sendFile(deps: GatewayDeps, opts: ChannelRouteOptions) {
  return async (req: TypedRequest<typeof SendFile>): Promise<ChannelSendResult> => {
    const b = req.body;
    return sendFromApi(deps, opts.sendWaitMs, { platform: req.params.platform, accountId: b.accountId, chatId: b.chatId }, async () => ({
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

  api.get('/channels', { config: user, schema: ListPlatforms }, listPlatforms(deps));
  api.get('/channels/:platform', { config: user, schema: GetPlatform }, getPlatform(deps));
  api.get('/channels/:platform/accounts/:accountId', { config: user, schema: GetAccount }, getAccount(deps));
  api.post('/channels/:platform/accounts', { config: admin, schema: CreateAccount }, createAccount(deps, opts));
  api.put('/channels/:platform/accounts/:accountId', { config: admin, schema: UpdateAccount }, updateAccount(deps, opts));
  api.delete('/channels/:platform/accounts/:accountId', { config: admin, schema: DeleteAccount }, deleteAccount(deps, opts));

  api.get('/bindings', { config: user, schema: GetBindings }, getBindings(deps));
  api.put('/bindings', { config: admin, schema: PutBindings }, putBindings(deps, opts));

  api.post('/channels/:platform/send', { config: admin, schema: SendText }, sendText(deps, opts));
  api.post('/channels/:platform/send-image', { config: admin, schema: SendImage }, sendImage(deps, opts));
  api.post('/channels/:platform/send-file', { config: admin, schema: SendFile }, sendFile(deps, opts));

  inboundRoutes(app, deps);
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
