/*
 * No response schema here: each platform is answered in its own format (a challenge echo, a
 * plain-text or JSON acknowledgement), which the adapter decides, not a shape of ours.
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors, isAppError } from '@agentry/errors';
import {
  accountContext,
  adapterFor,
  applyPolicy,
  InboundAuthError,
  InboundParseError,
  isSessionScope,
  MemoryTokenCache,
  resolveBinding,
  sessionKeyFor,
  UnsupportedOperationError,
  type AccountContext,
  type AdapterIo,
  type ChannelAdapter,
  type InboundMessage,
  type InboundRequest,
  type InboundResult,
} from '@agentry/channels';
import { channelPeerPrincipal, type Platform } from '@agentry/contracts';
import { type ChannelAccountRecord, forgetInboundEvent, getChannelAccount, getRuleChain, listBindings, recordInboundEvent, setInboundEventRun } from '@agentry/db';
import { submitRun } from '@agentry/runs';
import { serviceMetrics, tracedRoute } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { documentBody } from '../openapi.js';
import { requirePlatform } from './accounts.js';

/** Largest inbound event body accepted (platform events are a few KB). */
const MAX_EVENT_BYTES = 1024 * 1024;

/**
 * The one answer to an event that cannot be verified, whatever the reason (unknown account,
 * missing or wrong signature, stale timestamp): a caller without the secret learns nothing, not
 * even whether the account exists. The reason goes to the log.
 */
const UNVERIFIED = 'the event could not be verified for this account';

/** Where a single-use signature is remembered (inbound_events, apart from the platforms' message ids). */
const singleUseId = (signature: string) => `signature:${signature}`;

type Params = { platform: string; accountId: string };

/**
 * `POST /api/v1/channels/{platform}/accounts/{accountId}/events` (and GET, for platforms whose
 * URL check is a GET). Platforms call it without our credentials, so it is public and the
 * adapter verifies the platform's own signature, token or secret over the raw body. The answer
 * comes fast: the message becomes a run (queued) whose answer the worker sends back through the
 * same account; nothing here waits for the agent.
 */
export function inboundRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const io: AdapterIo = { fetch: globalThis.fetch, tokens: new MemoryTokenCache(), now: Date.now, timeoutMs: 10_000 };

  void app.register(async (scope) => {
    // Signatures are computed over the exact bytes: keep the body raw, whatever its type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_EVENT_BYTES }, (_req, body, done) => done(null, body));
    const handler = (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => handle(deps, io, req, reply);
    const route = '/channels/:platform/accounts/:accountId/events';
    const rawEvent = documentBody(
      { type: 'string', format: 'binary', description: "the platform's event as it sent it (verified over these bytes); at most 1 MB" },
      ['*/*'],
    );
    // Traced (tracing on), an inbound message's run and its reply's send are one trace under this request.
    const post = tracedRoute(`/api/v1${route}`, handler);
    scope.post<{ Params: Params }>(route, { config: { access: 'public', addressList: 'none', swaggerTransform: rawEvent }, bodyLimit: MAX_EVENT_BYTES }, post);
    scope.get<{ Params: Params }>(route, { config: { access: 'public', addressList: 'none' } }, handler);
  });
}

/** The account an event names, its unsealed context and a logger for both; none is an unverifiable event. */
type Target = { platform: Platform; accountId: string; record: ChannelAccountRecord; account: AccountContext; log: FastifyBaseLogger };

async function handle(deps: GatewayDeps, io: AdapterIo, req: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<unknown> {
  const platform = requirePlatform(req.params.platform);
  const accountId = req.params.accountId;
  const log = req.log.child({ platform, accountId });
  const adapter = adapterFor(platform);
  if (!adapter) throw new Errors.VALIDATION('the api platform receives no events (its clients call /chat/completions)');
  if (!adapter.supports.inbound) throw new Errors.VALIDATION(`${platform} accounts receive no events (webhook-only)`);
  const record = await getChannelAccount(deps.db.db, platform, accountId);
  if (!record) {
    log.warn({ reason: 'no such account' }, 'inbound event refused: verification failed');
    throw new Errors.UNAUTHORIZED(UNVERIFIED);
  }
  const target: Target = { platform, accountId, record, account: accountContext(record, deps.secrets), log };
  const result = await parseEvent(adapter, target, io, inboundRequest(req));
  const signature = await spendSignature(deps, target, result.singleUse);

  const inbound = serviceMetrics.inboundEvents(deps.metrics);
  const ack = (outcome: string) => {
    inbound.inc({ platform, outcome });
    const a = adapter.ack ?? { contentType: 'application/json', body: '{"success":true}' };
    return reply.status(200).type(a.contentType).send(a.body);
  };
  switch (result.kind) {
    case 'challenge':
      log.info('platform URL verification answered');
      return reply.status(200).type(result.contentType).send(result.body);
    case 'ignored':
      log.debug({ reason: result.reason }, 'inbound event ignored');
      return ack('ignored');
    case 'message':
      return ack(await admitMessage(deps, target, result.message, signature));
    default: {
      const never: never = result;
      throw new Errors.INTERNAL(`unknown inbound result ${String(never)}`);
    }
  }
}

/** What the adapter reads of a request: lower-cased headers, string query values, the raw body. */
function inboundRequest(req: FastifyRequest): InboundRequest {
  return {
    method: req.method,
    headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v.join(', ') : v])),
    query: Object.fromEntries(Object.entries((req.query ?? {}) as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? v : undefined])),
    rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
  };
}

/** The adapter's verified reading of the event; a failed verification says no more than UNVERIFIED. */
async function parseEvent(adapter: ChannelAdapter, target: Target, io: AdapterIo, request: InboundRequest): Promise<InboundResult> {
  try {
    return await adapter.parseInbound(target.account, io, request);
  } catch (err) {
    if (err instanceof InboundAuthError) {
      target.log.warn({ reason: err.message }, 'inbound event refused: verification failed');
      throw new Errors.UNAUTHORIZED(UNVERIFIED);
    }
    if (err instanceof InboundParseError || err instanceof UnsupportedOperationError) throw new Errors.VALIDATION(err.message);
    if (isAppError(err)) throw err;
    target.log.error({ err }, 'inbound event could not be parsed');
    throw new Errors.VALIDATION('the event could not be read');
  }
}

type EventKey = { platform: Platform; accountId: string; eventId: string };

/**
 * Recorded where the platforms' message ids are (Postgres or PGlite), so every replica refuses
 * the second use; kept as long as they are, well past the platform's timestamp window.
 */
async function spendSignature(deps: GatewayDeps, target: Target, singleUse: string | undefined): Promise<EventKey | undefined> {
  if (singleUse === undefined) return undefined;
  const signature = { platform: target.platform, accountId: target.accountId, eventId: singleUseId(singleUse) };
  if (!(await recordInboundEvent(deps.db.db, signature))) {
    target.log.warn({ reason: 'signature used before' }, 'inbound event refused: replayed signature');
    throw new Errors.UNAUTHORIZED('this signature was used already; a platform signs each event anew');
  }
  return signature;
}

/** Turns a verified message into a run of the bound agent, or says why not (the outcome counted). */
async function admitMessage(deps: GatewayDeps, target: Target, message: InboundMessage, signature: EventKey | undefined): Promise<string> {
  const { platform, accountId, record, account } = target;
  const mlog = target.log.child({ eventId: message.eventId, chatType: message.chatType });
  // Verified but switched off: acknowledged so the platform stops redelivering, and logged.
  if (!record.enabled || deps.config.current.channels[platform]?.enabled === false) {
    mlog.info('inbound message on a disabled account dropped');
    return 'disabled';
  }
  const event = { platform, accountId, eventId: message.eventId };
  if (!(await recordInboundEvent(deps.db.db, event))) {
    mlog.info('duplicate inbound event dropped');
    return 'duplicate';
  }
  const decision = applyPolicy(account, message);
  if (!decision.admitted) {
    mlog.info({ reason: decision.reason }, 'inbound message blocked by policy');
    return 'blocked';
  }
  const binding = resolveBinding(await listBindings(deps.db.db), platform, accountId);
  const agent = binding ? await getRuleChain(deps.db.db, binding.agentId) : undefined;
  if (!binding || !agent || agent.kind !== 'agent') {
    mlog.warn('inbound message with no agent bound to this account (PUT /api/v1/bindings)');
    return 'unbound';
  }
  const scope = isSessionScope(record.settings.session_scope) ? record.settings.session_scope : 'per_peer';
  try {
    const { run } = await submitRun(
      { db: deps.db.db, queue: deps.bus.queue },
      {
        agentId: binding.agentId,
        session: { key: sessionKeyFor(scope, platform, accountId, message), channel: platform, scope },
        source: platform,
        // The peer who wrote, not the binding's owner: its usage shows under it, and the worker
        // gives it no owner's or admin's standing (it uses the agent the binding shares with the chat).
        principal: channelPeerPrincipal(platform, accountId, message.senderId),
        request: {
          messages: [{ role: 'user', content: message.text }],
          reply: { platform, accountId, chatId: message.chatId },
        },
      },
    );
    await setInboundEventRun(deps.db.db, event, run.id);
    mlog.info({ runId: run.id, agentId: binding.agentId }, 'inbound message accepted');
  } catch (err) {
    // Not seen after all: the platform's redelivery gets another chance.
    await forgetInboundEvent(deps.db.db, event).catch(() => undefined);
    if (signature) await forgetInboundEvent(deps.db.db, signature).catch(() => undefined);
    throw err;
  }
  return 'accepted';
}
