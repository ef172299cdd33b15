import type { FastifyInstance, FastifyReply } from 'fastify';
import { Errors } from '@agentry/errors';
import { AgentRunsParams, PageQuery, REFUSED_TOOL_STEP, RunCancelResult, RunEventsQuery, RunParams, RunSteps, RunSummaryPage, type RunStep } from '@agentry/contracts';
import { getRuleChain, getRunOutcome, getRunSteps, isFinalRunStatus, listRunsOfAgent, type RunSummary } from '@agentry/db';
import { cancelRun } from '@agentry/runs';
import type { Principal } from '../auth/credentials.js';
import { isAdmin, mayChange, sessionOwner } from '../auth/ownership.js';
import type { GatewayDeps } from '../deps.js';
import { parseLastEventId, resumableRun, resumeChatStream } from '../chat/resume.js';
import { iso, pageOf, requireAgent, typed, type TypedRequest } from './common.js';

const ListRuns = { params: AgentRunsParams, querystring: PageQuery, response: { 200: RunSummaryPage } };
const RunEvents = { params: RunParams, querystring: RunEventsQuery };
const CancelRun = { params: RunParams, response: { 200: RunCancelResult } };
const GetSteps = { params: RunParams, response: { 200: RunSteps } };

/**
 * A run's record for the canvas (issue 23 item 14): an agent's runs, newest first, and the
 * steps of one (its chain's trace, stored by the worker with the run's finish). Both are for the
 * agent's owner or an admin. The list carries no request or answer: an owner sees that another
 * user's session ran (and failed), not what was said in it nor the error, which can quote it. The steps route names a run only: another user
 * gets the 404 an unknown run gets, so run ids cannot be probed.
 */
export function runRoutes(app: FastifyInstance, deps: GatewayDeps, heartbeatMs: number): void {
  const api = typed(app);
  api.get('/agents/:agentId/runs', { config: { access: 'owner', owns: 'agent' }, schema: ListRuns }, listRuns(deps));
  api.get('/runs/:runId/steps', { config: { access: 'user' }, schema: GetSteps }, getSteps(deps));
  // A chat client resumes its stream here (or by sending its request again with Last-Event-ID).
  api.get('/runs/:runId/events', { config: { access: 'chat', rateLimit: 'chat' }, schema: RunEvents }, runEvents(deps, heartbeatMs));
  // A client that stops an answer on purpose (Stop, Ctrl-C) says so: no resume grace for it.
  api.post('/runs/:runId/cancel', { config: { access: 'chat', bodyless: true }, schema: CancelRun }, cancelOwnRun(deps));
}

/**
 * `POST /runs/{runId}/cancel`: the caller's own chat run is cancelled now, without the grace a
 * dropped stream gets (its client might come back; this one said it will not). A run that had
 * already ended keeps its status, which is answered.
 */
function cancelOwnRun(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CancelRun>) => {
    const run = await resumableRun(deps, req, req.params.runId);
    if (isFinalRunStatus(run.status)) return { runId: run.id, status: run.status };
    await cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, run.id, 'cancelled by its client');
    req.log.info({ runId: run.id }, 'run cancelled by its client');
    const now = await getRunOutcome(deps.db.db, run.id);
    return { runId: run.id, status: now?.status ?? 'cancelled' };
  };
}

/**
 * `GET /runs/{runId}/events`: the run's stream as chat completion chunks, after `Last-Event-ID`
 * (an EventSource's reconnect sends it) or `?after=`, to the run's own client only.
 */
function runEvents(deps: GatewayDeps, heartbeatMs: number) {
  return async (req: TypedRequest<typeof RunEvents>, reply: FastifyReply) => {
    const { runId } = req.params;
    let after = req.query.after ?? -1;
    const header = req.headers['last-event-id'];
    if (typeof header === 'string' && header !== '') {
      const point = parseLastEventId(header);
      if (point.runId !== runId) throw new Errors.VALIDATION(`Last-Event-ID names run "${point.runId}", not "${runId}"`);
      after = point.after;
    }
    const run = await resumableRun(deps, req, runId);
    const agui = String(req.headers['x-stream-protocol'] ?? '').toLowerCase() === 'agui';
    return resumeChatStream(deps, req, reply, run, after, { agui, includeUsage: req.query.include_usage === true, heartbeatMs });
  };
}

function listRuns(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListRuns>) => {
    await requireAgent(deps.db.db, req.params.agentId);
    const { page, size, limit, offset } = pageOf(req.query);
    const { rows, total } = await listRunsOfAgent(deps.db.db, req.params.agentId, { limit, offset });
    return { data: rows.map((r) => summaryView(r, mayReadContents(req.principal, r.principal))), total, page, size };
  };
}

/**
 * Message contents (prompts, answers, tool arguments and results) are the conversation's: the
 * run's own principal and admins read them; the agent's owner sees another principal's run (or
 * a channel's, a cron fire's: nobody named) without them.
 */
function mayReadContents(caller: Principal, runPrincipal: string): boolean {
  return isAdmin(caller) || (runPrincipal !== '' && runPrincipal === sessionOwner(caller));
}

function summaryView(r: RunSummary, readable: boolean) {
  return {
    id: r.id,
    status: r.status,
    source: r.source,
    createdAt: iso(r.createdAt),
    finishedAt: r.finishedAt ? iso(r.finishedAt) : null,
    durationMs: r.finishedAt ? Math.max(0, r.finishedAt.getTime() - r.createdAt.getTime()) : null,
    hasSteps: r.hasSteps,
    // An error can quote what the run's principal sent: another principal's run only says it failed.
    error: readable || r.error === null ? r.error : REDACTED_ERROR,
    ...(readable ? { firstWords: r.asked ?? '' } : {}),
  };
}

/** What another principal's step says in place of its error: a node's error text can quote the message it failed on. */
const REDACTED_ERROR = 'failed';

/**
 * A step with its debug messages and error text left out (its node, relations and time stay; a
 * failure still shows as one). A refused tool's step keeps its words: they name the owner's own
 * configuration, not the message, and the owner is who can mend it.
 */
function withoutContents(step: RunStep): RunStep {
  const out: RunStep = step.error === undefined || step.type === REFUSED_TOOL_STEP ? step : { ...step, error: REDACTED_ERROR };
  return out.debug === undefined ? out : { ...out, debug: { chainId: out.debug.chainId, redacted: true } };
}

function getSteps(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetSteps>): Promise<RunSteps> => {
    const { runId } = req.params;
    const run = await getRunSteps(deps.db.db, runId);
    const agent = run ? await getRuleChain(deps.db.db, run.agentId) : undefined;
    if (!run || !agent || !mayChange(req.principal, agent.owner)) throw new Errors.NOT_FOUND(`run "${runId}"`);
    const steps = Array.isArray(run.steps) ? (run.steps as unknown as RunStep[]) : [];
    const redacted = !mayReadContents(req.principal, run.principal);
    return { runId, agentId: run.agentId, status: run.status, recorded: Array.isArray(run.steps), redacted, steps: redacted ? steps.map(withoutContents) : steps };
  };
}
