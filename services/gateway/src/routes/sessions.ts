import type { FastifyInstance, FastifyReply } from 'fastify';
import { Errors, hasCode } from '@agentry/errors';
import {
  SESSION_BY_KEY,
  Session,
  SessionCompaction,
  SessionList,
  SessionListQuery,
  SessionMessages,
  SessionMessagesParams,
  SessionMessagesQuery,
  SessionParams,
  SessionRename,
  SessionsClearBody,
  SuccessBody,
  budgetCounter,
} from '@agentry/contracts';
import { agentNode, compactionSettings, compactSessionNow, estimateCallTokens, ModelProviders, type ModelCallRequest, type ModelEvent } from '@agentry/engine';
import { TokenBudgets, cancelRun } from '@agentry/runs';
import {
  activeRunIdsOfSession,
  clearSessions as clearStoredSessions,
  deleteSession as deleteStoredSession,
  findSessionByKey,
  getRuleChain,
  getSession,
  insertRunUsage,
  listSessionMessages,
  listSessions as listStoredSessions,
  renameSession as renameStoredSession,
  type SessionRecord,
} from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from '../auth/credentials.js';
import { sessionOwner, visibleSessionOwner } from '../auth/ownership.js';
import { iso, pageOf, typed, type TypedRequest } from './common.js';

const ClearSessions = { body: SessionsClearBody, response: { 200: SuccessBody } };
const ListSessions = { querystring: SessionListQuery, response: { 200: SessionList } };
const RenameSession = { params: SessionParams, body: SessionRename, response: { 200: Session } };
const DeleteSession = { params: SessionParams, response: { 200: SuccessBody } };
const BY_KEY = SESSION_BY_KEY;
const CompactSession = { params: SessionParams, response: { 200: SessionCompaction } };
const ListMessages = { params: SessionMessagesParams, querystring: SessionMessagesQuery, response: { 200: SessionMessages } };

/**
 * Conversations: clear (spec), and list/read for the UI and CLI. A user sees and clears only
 * the sessions it opened; admins (and open mode) all of them, narrowed with `owner`.
 */
export function sessionRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  api.post('/sessions/clear', { config: { access: 'user' }, schema: ClearSessions }, clearSessions(deps));
  api.get('/sessions', { config: { access: 'user' }, schema: ListSessions }, listSessions(deps));
  api.get('/sessions/:id/messages', { config: { access: 'user' }, schema: ListMessages }, listMessages(deps));
  // Owner-only like every session route: another principal's session answers as a missing one.
  api.patch('/sessions/:id', { config: { access: 'user' }, schema: RenameSession }, renameSession(deps));
  api.delete('/sessions/:id', { config: { access: 'user' }, schema: DeleteSession }, deleteSession(deps));
  const models = lazyModels(deps);
  app.addHook('onClose', () => models.close());
  api.post('/sessions/:id/compact', { config: { access: 'user' }, schema: CompactSession }, compactSession(deps, models));
}

/** The session `id` names if the caller may see it (its own; any for admins), else a 404. */
async function ownSession(deps: GatewayDeps, p: Principal, id: string): Promise<SessionRecord> {
  const mine = visibleSessionOwner(p);
  const session = await getSession(deps.db.db, id);
  if (!session || (mine !== undefined && session.owner !== mine)) throw new Errors.NOT_FOUND(`session "${id}"`);
  return session;
}

function sessionView(s: SessionRecord): Session {
  return {
    id: s.id,
    agentId: s.agentId,
    sessionKey: s.sessionKey,
    channel: s.channel,
    scope: s.scope,
    owner: s.owner,
    title: s.title,
    messageCount: s.messageCount,
    turnCount: s.turnCount,
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.updatedAt),
  };
}

function renameSession(deps: GatewayDeps) {
  return async function renameSession(req: TypedRequest<typeof RenameSession>): Promise<Session> {
    const session = await ownSession(deps, req.principal, req.params.id);
    const title = req.body.title.trim();
    if (!title) throw new Errors.VALIDATION('title: must not be blank');
    await renameStoredSession(deps.db.db, session.id, title);
    return sessionView({ ...session, title });
  };
}

/** Deletes the conversation for good; a turn still running in it is cancelled first. */
function deleteSession(deps: GatewayDeps) {
  return async function deleteSession(req: TypedRequest<typeof DeleteSession>): Promise<SuccessBody> {
    const session = await ownSession(deps, req.principal, req.params.id);
    const active = await activeRunIdsOfSession(deps.db.db, session.id);
    await Promise.all(active.map((runId) => cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, runId, 'the session was deleted')));
    await deleteStoredSession(deps.db.db, session.id);
    return { success: true, message: `deleted session "${session.title || session.sessionKey}"` };
  };
}

/**
 * The gateway's own model client, made on the first forced compaction: the summary is one
 * model call with no tools, so the route makes it itself and answers with the result, rather
 * than enqueueing a job for a worker and waiting for its answer on the bus.
 */
function lazyModels(deps: GatewayDeps): { get(): Promise<ModelProviders>; close(): Promise<void> } {
  let started: Promise<ModelProviders> | undefined;
  return {
    get() {
      started ??= (async () => {
        const r = deps.config.current.reliability;
        const providers = new ModelProviders({
          db: deps.db.db,
          secrets: deps.secrets,
          config: () => deps.config.current,
          bus: deps.bus,
          logger: deps.logger,
          timeouts: { connectMs: r.provider_connect_ms, firstTokenMs: r.provider_first_token_ms, totalMs: r.provider_total_ms, retries: r.provider_retries, backoffMs: r.provider_backoff_ms },
        });
        await providers.start();
        return providers;
      })();
      return started;
    },
    async close() {
      if (started) await (await started).close();
    },
  };
}

/**
 * The summary call of a forced compaction, as a run's calls are: its estimate reserved on the
 * caller's `tokensPerDay` first (refused with the budget's 429 and Retry-After when the day is
 * spent), settled to the reported usage, and recorded in `run_usage` as kind `compaction` under
 * the caller (who asked pays, as for chat), with run id `compaction:<session id>`.
 */
function budgetedSummary(deps: GatewayDeps, budgets: TokenBudgets, providers: ModelProviders, req: TypedRequest<typeof CompactSession>, agentId: string, sessionId: string) {
  const principal = sessionOwner(req.principal);
  const limit = req.principal.kind === 'user' || req.principal.kind === 'account' ? req.principal.budget?.tokensPerDay : undefined;
  return async function* (r: ModelCallRequest): AsyncIterable<ModelEvent> {
    const reservation = await budgets.reserve(principal, estimateCallTokens(r, deps.config.current.security.budgetReserveTokens), limit);
    let settled = false;
    try {
      for await (const ev of providers.stream(r)) {
        if (ev.type === 'done') {
          settled = true;
          const promptTokens = Math.max(0, ev.usage?.promptTokens ?? 0) || 0;
          const completionTokens = Math.max(0, ev.usage?.completionTokens ?? 0) || 0;
          await reservation.settle(promptTokens + completionTokens);
          await insertRunUsage(deps.db.db, { runId: `compaction:${sessionId}`, agentId, principal, provider: ev.provider, model: ev.model, promptTokens, completionTokens, kind: 'compaction' }).catch((err: unknown) =>
            deps.logger.warn({ err, sessionId }, 'the usage of a forced compaction was not recorded'),
          );
        }
        yield ev;
      }
    } finally {
      if (!settled) await reservation.release();
    }
  };
}

function compactSession(deps: GatewayDeps, models: ReturnType<typeof lazyModels>) {
  const budgets = new TokenBudgets({
    db: deps.db.db,
    counter: deps.bus,
    logger: deps.logger,
    channelPeerTokensPerDay: () => deps.config.current.security.budgets.channelPeerTokensPerDay,
  });
  return async function compactSession(req: TypedRequest<typeof CompactSession>, reply: FastifyReply): Promise<SessionCompaction> {
    const session = await namedSession(deps, req.principal, req.params, {});
    const agent = await getRuleChain(deps.db.db, session.agentId);
    const config = agent?.kind === 'agent' ? agentNode(agent.dsl) : undefined;
    if (!config) throw new Errors.VALIDATION(`agent "${session.agentId}" of the session has no ai/agent node to summarise with`);
    const providers = await models.get();
    const defaults = deps.config.current.agents.defaults.session;
    // The provider's own timeouts bound the call; a client that goes away does not stop it (its summary is kept).
    const signal = new AbortController().signal;
    const stream = budgetedSummary(deps, budgets, providers, req, session.agentId, session.id);
    try {
      return await compactSessionNow(
        { db: deps.db.db, logger: deps.logger, stream },
        {
          sessionId: session.id,
          config,
          settings: compactionSettings(defaults.compaction, config.compaction),
          info: await providers.modelInfo({ provider: config.provider, model: config.model }),
          limit: defaults.max_messages,
          signal,
        },
      );
    } catch (err) {
      if (hasCode(err, Errors.RATE_LIMITED)) {
        const resetsAt = budgetCounter('tokensPerDay', sessionOwner(req.principal)).resetsAt;
        reply.header('retry-after', String(Math.max(1, Math.ceil((resetsAt.getTime() - Date.now()) / 1000))));
      }
      throw err;
    }
  };
}

function clearSessions(deps: GatewayDeps) {
  return async function clearSessions(req: TypedRequest<typeof ClearSessions>): Promise<SuccessBody> {
    const mine = visibleSessionOwner(req.principal);
    const n = await clearStoredSessions(deps.db.db, { ...(req.body ?? {}), ...(mine !== undefined ? { owner: mine } : {}) });
    return { success: true, message: n === 1 ? 'cleared 1 session' : `cleared ${n} sessions` };
  };
}

function listSessions(deps: GatewayDeps) {
  return async function listSessions(req: TypedRequest<typeof ListSessions>): Promise<SessionList> {
    const { page, size } = pageOf(req.query);
    const owner = visibleSessionOwner(req.principal) ?? req.query.owner;
    const { agentId, nonEmpty, search } = req.query;
    const { data, total } = await listStoredSessions(deps.db.db, { agentId, owner, nonEmpty, search, page, size });
    return { data: data.map(sessionView), total, page, size };
  };
}

/**
 * The session `GET /sessions/{id}/messages` names: by id, or with id `-` by the key the client
 * chose (`sessionId` of its chat requests). Keys are per principal, so a key names the caller's
 * own session; an admin may name another's with `owner`. Another principal's session answers as
 * a missing one: its id tells nothing.
 */
async function namedSession(deps: GatewayDeps, p: Principal, params: { id: string }, q: TypedRequest<typeof ListMessages>['query']): Promise<SessionRecord> {
  const mine = visibleSessionOwner(p);
  if (params.id !== BY_KEY) {
    if (q.agentId !== undefined || q.sessionKey !== undefined) {
      throw new Errors.VALIDATION(`agentId and sessionKey name a session only with "${BY_KEY}" as its id (/sessions/${BY_KEY}/messages?agentId=...&sessionKey=...)`);
    }
    return ownSession(deps, p, params.id);
  }
  const missing = (['agentId', 'sessionKey'] as const).filter((k) => !q[k]);
  if (missing.length > 0) throw new Errors.VALIDATION(`${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required to name a session by its key (session id "${BY_KEY}")`);
  const agentId = q.agentId ?? '';
  const sessionKey = q.sessionKey ?? '';
  const owner = mine ?? q.owner ?? sessionOwner(p);
  const session = await findSessionByKey(deps.db.db, { agentId, sessionKey, channel: q.channel || 'api', owner });
  if (!session) throw new Errors.NOT_FOUND(`session "${sessionKey}" of agent "${agentId}"`);
  return session;
}

function listMessages(deps: GatewayDeps) {
  return async function listMessages(req: TypedRequest<typeof ListMessages>): Promise<SessionMessages> {
    const session = await namedSession(deps, req.principal, req.params, req.query);
    const messages = await listSessionMessages(deps.db.db, session.id);
    return messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.toolCalls ? { toolCalls: m.toolCalls } : {}),
      ...(m.toolCallId ? { toolCallId: m.toolCallId } : {}),
      ...(m.name ? { name: m.name } : {}),
      runId: m.runId,
      ...(m.status !== 'ok' ? { status: m.status, error: m.error ?? '' } : {}),
      createdAt: iso(m.createdAt),
      ...(m.compactedAt ? { compactedAt: iso(m.compactedAt) } : {}),
    }));
  };
}
