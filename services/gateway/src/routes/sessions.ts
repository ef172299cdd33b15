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
import { cancelRun, requestCompaction } from '@agentry/runs';
import {
  activeRunIdsOfSession,
  clearSessions as clearStoredSessions,
  deleteSession as deleteStoredSession,
  findSessionByKey,
  getSession,
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
  api.post('/sessions/:id/compact', { config: { access: 'user' }, schema: CompactSession }, compactSession(deps));
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
 * Compacts on request: the session is checked here (owner-only, as every session route), then
 * an agent worker summarises it with its model client, budgeted and recorded under the caller
 * (who asked pays, as for chat), and this waits for its answer up to `worker.max_run_ms` once a
 * worker has taken the job (and 30 s for one to take it).
 */
function compactSession(deps: GatewayDeps) {
  return async function compactSession(req: TypedRequest<typeof CompactSession>, reply: FastifyReply): Promise<SessionCompaction> {
    const session = await namedSession(deps, req.principal, req.params, {});
    const principal = sessionOwner(req.principal);
    try {
      return await requestCompaction({ bus: deps.bus, logger: deps.logger }, { sessionId: session.id, principal }, { waitMs: deps.config.current.worker.max_run_ms });
    } catch (err) {
      if (hasCode(err, Errors.RATE_LIMITED)) {
        const resetsAt = budgetCounter('tokensPerDay', principal).resetsAt;
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
