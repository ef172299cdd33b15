import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { SessionList, SessionMessages, SuccessBody } from '@agentry/contracts';
import { clearSessions as clearStoredSessions, getSession, listSessionMessages, listSessions as listStoredSessions } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { visibleSessionOwner } from '../auth/ownership.js';
import { PageQuery, iso, pageOf, typed, type TypedRequest } from './common.js';

const ClearBody = Type.Object(
  {
    agentId: Type.Optional(Type.String()),
    sessionKey: Type.Optional(Type.String()),
    channel: Type.Optional(Type.String()),
    scope: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

const ClearSessions = { body: ClearBody, response: { 200: SuccessBody } };
const ListSessions = {
  querystring: Type.Object({
    agentId: Type.Optional(Type.String()),
    owner: Type.Optional(Type.String({ description: 'admins: only sessions of this principal (`user:<name>`, `api:<account>`, or empty for channels)' })),
    ...PageQuery,
  }),
  response: { 200: SessionList },
};
const ListMessages = { params: Type.Object({ id: Type.String() }), response: { 200: SessionMessages } };

/**
 * Conversations: clear (spec), and list/read for the UI and CLI. A user sees and clears only
 * the sessions it opened; admins (and open mode) all of them, narrowed with `owner`.
 */
export function sessionRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  api.post('/sessions/clear', { config: { access: 'user' }, schema: ClearSessions }, clearSessions(deps));
  api.get('/sessions', { config: { access: 'user' }, schema: ListSessions }, listSessions(deps));
  api.get('/sessions/:id/messages', { config: { access: 'user' }, schema: ListMessages }, listMessages(deps));
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
    const { data, total } = await listStoredSessions(deps.db.db, { agentId: req.query.agentId, owner, page, size });
    return {
      data: data.map((s) => ({
        id: s.id,
        agentId: s.agentId,
        sessionKey: s.sessionKey,
        channel: s.channel,
        scope: s.scope,
        owner: s.owner,
        title: s.title,
        messageCount: s.messageCount,
        createdAt: iso(s.createdAt),
        updatedAt: iso(s.updatedAt),
      })),
      total,
      page,
      size,
    };
  };
}

function listMessages(deps: GatewayDeps) {
  return async function listMessages(req: TypedRequest<typeof ListMessages>): Promise<SessionMessages> {
    const session = await getSession(deps.db.db, req.params.id);
    const mine = visibleSessionOwner(req.principal);
    // Another principal's session answers as a missing one: its id tells nothing.
    if (!session || (mine !== undefined && session.owner !== mine)) throw new Errors.NOT_FOUND(`session "${req.params.id}"`);
    const messages = await listSessionMessages(deps.db.db, session.id);
    return messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.toolCalls ? { toolCalls: m.toolCalls } : {}),
      ...(m.toolCallId ? { toolCallId: m.toolCallId } : {}),
      ...(m.name ? { name: m.name } : {}),
      runId: m.runId,
      createdAt: iso(m.createdAt),
    }));
  };
}
