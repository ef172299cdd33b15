import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import { Errors } from '@agentry/errors';
import { CronJob, CronJobList, CronRunPage, SuccessBody, announceChange, type CronRun } from '@agentry/contracts';
import {
  deleteCronJob,
  getCronJob,
  getRuleChain,
  isForeignKeyViolation,
  listChannelAccounts,
  listCronJobs,
  listCronRuns,
  updateCronJob,
  type CronDeliver,
  type CronJobRecord,
  type CronRunRecord,
} from '@agentry/db';
import { Id } from '@agentry/definitions';
import { checkSchedule, createCronJob, isHeartbeatJob, nextTick, shortestGapSeconds } from '@agentry/runs';
import { PLATFORMS } from '@agentry/runtime';
import { agentMaySendThrough, deliverChatRefusal, notBoundMessage } from '@agentry/channels';
import { isAdmin, mayChange, ownerName } from '../auth/ownership.js';
import type { Principal } from '../auth/credentials.js';
import { mayChatWith } from '../auth/audience.js';
import type { GatewayDeps } from '../deps.js';
import { PageQuery, iso, pageOf, requireAgent, typed } from './common.js';

const Deliver = Type.Object(
  {
    platform: Type.String({ minLength: 1, maxLength: 64 }),
    accountId: Type.String({ minLength: 1, maxLength: 128 }),
    chatId: Type.String({ minLength: 1, maxLength: 512 }),
  },
  { additionalProperties: false },
);

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  schedule: Type.String({ minLength: 1, maxLength: 256 }),
  message: Type.String({ minLength: 1, maxLength: 100_000 }),
  timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  disabled: Type.Optional(Type.Boolean()),
  deliver: Type.Optional(Type.Union([Deliver, Type.Null()])),
};

// Closed: an unknown field (`timeZone`, `agentId`...) is a 400 naming it, not a setting lost.
const Closed = { additionalProperties: false } as const;
const CreateBody = Type.Object({ ...fields, target: Type.String({ minLength: 1 }) }, Closed);
const AgentCreateBody = Type.Object({ ...fields, target: Type.Optional(Type.String({ minLength: 1 })) }, Closed);
const UpdateBody = Type.Object({
  name: Type.Optional(fields.name),
  schedule: Type.Optional(fields.schedule),
  message: Type.Optional(fields.message),
  timezone: fields.timezone,
  disabled: fields.disabled,
  deliver: fields.deliver,
  target: Type.Optional(Type.String({ minLength: 1 })),
}, Closed);
const ToggleBody = Type.Object({ disabled: Type.Boolean() }, Closed);
type CreateBody = Static<typeof AgentCreateBody>;
type UpdateBody = Static<typeof UpdateBody>;

const CronId = Type.String({ minLength: 1, maxLength: 128 });
const IdParams = Type.Object({ id: CronId });
const AgentParams = Type.Object({ agentId: Id });
const AgentIdParams = Type.Object({ agentId: Id, id: CronId });

type Db = GatewayDeps['db']['db'];
type IdParams = Static<typeof IdParams>;
type AgentParams = Static<typeof AgentParams>;
type AgentIdParams = Static<typeof AgentIdParams>;
type PageParams = { page?: number; size?: number };
/**
 * What a handler reads of its request. Narrow, so handlers can be named functions apart from the
 * registration; registering one still checks it against the route's schemas (type provider).
 */
interface Req<P = unknown, Q = unknown, B = unknown> {
  params: P;
  query: Q;
  body: B;
  principal: Principal;
}
/** The reply, only to set a create's 201; the handler returns the body, serialized by the route's schema. */
interface Reply {
  code(status: 201): unknown;
}

function jobView(job: CronJobRecord): CronJob {
  const next = job.disabled ? null : nextTick(job.schedule, job.timezone);
  return {
    id: job.id,
    name: job.name,
    schedule: job.schedule,
    message: job.message,
    target: job.agentId,
    disabled: job.disabled,
    timezone: job.timezone,
    deliver: job.deliver,
    owner: job.owner,
    nextRunAt: next ? iso(next) : null,
    lastRunAt: job.lastRunAt ? iso(job.lastRunAt) : null,
    lastStatus: job.lastStatus,
    createdAt: iso(job.createdAt),
    updatedAt: iso(job.updatedAt),
  };
}

function runView(run: CronRunRecord): CronRun {
  return {
    id: run.id,
    cronJobId: run.cronJobId,
    scheduledAt: iso(run.scheduledAt),
    runId: run.runId,
    startedAt: iso(run.startedAt),
    finishedAt: run.finishedAt ? iso(run.finishedAt) : null,
    status: run.status,
    outputExcerpt: run.outputExcerpt,
    error: run.error,
    deliveryStatus: run.deliveryStatus,
    deliveryError: run.deliveryError,
  };
}

// A lost message is healed by the schedulers' periodic reconcile, within a minute.
const announce = (deps: GatewayDeps, id: string) => announceChange(deps.bus.pubsub, deps.logger, 'cron', [id]);

/** The job, or 404; with `agentId`, only that agent's job. */
async function requireJob(db: Db, id: string, agentId?: string): Promise<CronJobRecord> {
  const job = await getCronJob(db, id);
  if (!job || (agentId !== undefined && job.agentId !== agentId)) throw new Errors.NOT_FOUND(`cron job "${id}"`);
  return job;
}

/** A target named in a body must be an existing agent: 400 otherwise (the job is the resource). */
async function checkTarget(db: Db, target: string): Promise<void> {
  const row = await getRuleChain(db, target);
  if (!row || row.kind !== 'agent') throw new Errors.VALIDATION(`target: agent "${target}" does not exist`);
}

/** An agent-level body may repeat its agent as target, never name another. */
function checkSameTarget(target: string | undefined, agentId: string): void {
  if (target !== undefined && target !== agentId) throw new Errors.VALIDATION(`target "${target}" does not match the agent in the path ("${agentId}")`);
}

/**
 * A delivery must name a messaging platform's account that a binding connects to the agent.
 * `bound: false` skips the binding (a new agent has none yet; every fire checks it again).
 */
export async function checkDeliver(db: Db, deliver: CronDeliver | null | undefined, agentId: string, bound = true, field: 'deliver' | 'heartbeat.target' = 'deliver'): Promise<void> {
  if (!deliver) return;
  const [platformField, accountField] = field === 'deliver' ? ['deliver.platform', 'deliver.accountId'] : ['heartbeat.target platform', 'heartbeat.target account'];
  const platforms = PLATFORMS.filter((p) => p !== 'api');
  if (!(platforms as readonly string[]).includes(deliver.platform)) {
    throw new Errors.VALIDATION(`${platformField} "${deliver.platform}" is not a messaging platform (one of ${platforms.join(', ')})`);
  }
  const accounts = await listChannelAccounts(db, deliver.platform);
  const account = accounts.find((a) => a.id === deliver.accountId);
  if (!account) {
    throw new Errors.VALIDATION(`${accountField} "${deliver.accountId}" is not a ${deliver.platform} account`);
  }
  const refusal = deliverChatRefusal(account, deliver.platform, deliver.chatId);
  if (refusal) throw new Errors.FORBIDDEN(refusal);
  if (bound && !(await agentMaySendThrough(db, agentId, deliver.platform, deliver.accountId))) {
    throw new Errors.FORBIDDEN(notBoundMessage(agentId, deliver.platform, deliver.accountId));
  }
}

/** An agent deleted between the check and the write breaks the foreign key: still a 400. */
async function noVanishedAgent<T>(agentId: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isForeignKeyViolation(err)) throw new Errors.VALIDATION(`target: agent "${agentId}" does not exist`);
    throw err;
  }
}

function checkedSchedule(schedule: string, timezone: string): string {
  const result = checkSchedule(schedule, timezone);
  if (!result.ok) throw new Errors.VALIDATION(result.reason);
  return result.schedule;
}

/**
 * A job runs its target as its owner: the owner must be allowed to chat with that agent, and
 * only the agent's owner or an admin may have it deliver (speak through the agent's bound
 * channel accounts); 403 otherwise.
 */
async function checkMayTarget(db: Db, p: Principal, agentId: string, deliver: CronDeliver | null | undefined): Promise<void> {
  const row = await getRuleChain(db, agentId);
  if (!row || row.kind !== 'agent') return;
  if (!mayChatWith(p, row)) throw new Errors.FORBIDDEN(`agent "${agentId}" is not shared with you: a cron job may target only an agent you may chat with`);
  if (deliver && !mayChange(p, row.owner)) throw new Errors.FORBIDDEN(`only the owner of agent "${agentId}" or an admin may have a cron job deliver its answers`);
}

/**
 * A plain user's schedule fires at most every `security.cronMinIntervalSeconds`, and they own at
 * most `security.cronMaxJobsPerUser` jobs (`creating`); admins are not held. 400 and 409 name the limit.
 */
async function checkUserLimits(deps: GatewayDeps, p: Principal, schedule: string | undefined, timezone: string, creating: boolean): Promise<void> {
  if (isAdmin(p)) return;
  const { cronMinIntervalSeconds: minInterval, cronMaxJobsPerUser: maxJobs } = deps.config.current.security;
  if (schedule !== undefined) {
    const gap = shortestGapSeconds(schedule, timezone);
    if (gap < minInterval) {
      throw new Errors.VALIDATION(`schedule: "${schedule}" fires every ${gap} s; your jobs must be at least ${minInterval} s apart (security.cronMinIntervalSeconds)`);
    }
  }
  if (creating) {
    const owned = await listCronJobs(deps.db.db, { owner: ownerName(p) });
    if (owned.length >= maxJobs) {
      throw new Errors.QUOTA(`you already own ${owned.length} cron jobs (the limit is ${maxJobs}, security.cronMaxJobsPerUser): delete one first`);
    }
  }
}

/** The shared cron operation, with the route's own rules: the delivery must be allowed, and the job is the caller's. */
async function create(deps: GatewayDeps, agentId: string, body: CreateBody, principal: Principal): Promise<CronJob> {
  const db = deps.db.db;
  await checkMayTarget(db, principal, agentId, body.deliver);
  const { name, schedule, message, timezone, disabled, deliver } = body;
  const draft = { agentId, owner: ownerName(principal), name, schedule, message, timezone, disabled, deliver };
  const job = await createCronJob({ db, pubsub: deps.bus.pubsub, logger: deps.logger }, draft, {
    invalidSchedule: (reason) => new Errors.VALIDATION(reason),
    beforeInsert: async (checked, tz) => {
      await checkUserLimits(deps, principal, checked, tz, true);
      await checkDeliver(db, body.deliver, agentId);
    },
    write: (insert) => noVanishedAgent(agentId, insert),
  });
  return jobView(job);
}

/**
 * A heartbeat job is derived from its agent's DSL (every save rewrites it): changed here, it
 * would silently revert, so it is refused with the way to change it.
 */
function notHeartbeat(job: CronJobRecord): void {
  if (isHeartbeatJob(job.id)) {
    throw new Errors.VALIDATION(`cron job "${job.id}" is the heartbeat of agent "${job.agentId}": change it in the agent (configuration.heartbeat, PUT /agents/{id}/heartbeat or agentry agents heartbeat)`);
  }
}

async function update(deps: GatewayDeps, current: CronJobRecord, body: UpdateBody, principal: Principal): Promise<CronJob> {
  notHeartbeat(current);
  const db = deps.db.db;
  if (body.target !== undefined && body.target !== current.agentId) await checkTarget(db, body.target);
  if (body.target !== undefined || body.deliver) await checkMayTarget(db, principal, body.target ?? current.agentId, body.deliver === undefined ? current.deliver : body.deliver);
  const timezone = body.timezone ?? current.timezone;
  const schedule = body.schedule !== undefined || body.timezone !== undefined ? checkedSchedule(body.schedule ?? current.schedule, timezone) : undefined;
  await checkUserLimits(deps, principal, schedule, timezone, false);
  // A new target must be allowed the delivery the job keeps, and a new delivery the target.
  if (body.deliver !== undefined || body.target !== undefined) await checkDeliver(db, body.deliver === undefined ? current.deliver : body.deliver, body.target ?? current.agentId);
  const job = await noVanishedAgent(body.target ?? current.agentId, () =>
    updateCronJob(db, current.id, {
      agentId: body.target,
      name: body.name,
      schedule,
      message: body.message,
      timezone: body.timezone,
      disabled: body.disabled,
      deliver: body.deliver,
    }),
  );
  if (!job) throw new Errors.NOT_FOUND(`cron job "${current.id}"`);
  await announce(deps, job.id);
  return jobView(job);
}

async function toggle(deps: GatewayDeps, current: CronJobRecord, disabled: boolean): Promise<CronJob> {
  notHeartbeat(current);
  const job = await updateCronJob(deps.db.db, current.id, { disabled });
  if (!job) throw new Errors.NOT_FOUND(`cron job "${current.id}"`);
  await announce(deps, job.id);
  return jobView(job);
}

async function remove(deps: GatewayDeps, job: CronJobRecord): Promise<SuccessBody> {
  notHeartbeat(job);
  if (!(await deleteCronJob(deps.db.db, job.id))) throw new Errors.NOT_FOUND(`cron job "${job.id}"`);
  await announce(deps, job.id);
  return { success: true };
}

async function runs(db: Db, job: CronJobRecord, query: PageParams): Promise<CronRunPage> {
  const { page, size, limit, offset } = pageOf(query);
  const { data, total } = await listCronRuns(db, job.id, { limit, offset });
  return { data: data.map(runView), total, page, size };
}

/**
 * Heartbeat jobs are agent settings (GET /agents/{id}/heartbeat), not jobs to manage here: left
 * out of the lists, still readable by id with their fires (`GET /cron/heartbeat:<agentId>/runs`).
 */
const listed = (job: CronJobRecord): boolean => !isHeartbeatJob(job.id);

/** A user lists its own jobs; admins every job. */
const mine = (p: Principal): { owner?: string } => (isAdmin(p) ? {} : { owner: ownerName(p) });

// Global routes.

function listJobs(deps: GatewayDeps) {
  return async (req: Req<unknown, { agentId?: string }>): Promise<CronJobList> => {
    const jobs = await listCronJobs(deps.db.db, { ...(req.query.agentId ? { agentId: req.query.agentId } : {}), ...mine(req.principal) });
    return jobs.filter(listed).map(jobView);
  };
}

function getJob(deps: GatewayDeps) {
  return async (req: Req<IdParams>): Promise<CronJob> => jobView(await requireJob(deps.db.db, req.params.id));
}

function createJob(deps: GatewayDeps) {
  return async (req: Req<unknown, unknown, Static<typeof CreateBody>>, reply: Reply): Promise<CronJob> => {
    await checkTarget(deps.db.db, req.body.target);
    const job = await create(deps, req.body.target, req.body, req.principal);
    reply.code(201);
    return job;
  };
}

function updateJob(deps: GatewayDeps) {
  return async (req: Req<IdParams, unknown, UpdateBody>): Promise<CronJob> => update(deps, await requireJob(deps.db.db, req.params.id), req.body, req.principal);
}

function deleteJob(deps: GatewayDeps) {
  return async (req: Req<IdParams>): Promise<SuccessBody> => remove(deps, await requireJob(deps.db.db, req.params.id));
}

function toggleJob(deps: GatewayDeps) {
  return async (req: Req<IdParams, unknown, { disabled: boolean }>): Promise<CronJob> => toggle(deps, await requireJob(deps.db.db, req.params.id), req.body.disabled);
}

function listJobRuns(deps: GatewayDeps) {
  return async (req: Req<IdParams, PageParams>): Promise<CronRunPage> => runs(deps.db.db, await requireJob(deps.db.db, req.params.id), req.query);
}

// Agent-level routes: the agent must exist (404), and only its jobs are visible.

/** The agent's job named in the path, or 404 (for the agent or the job). */
async function agentJob(db: Db, params: AgentIdParams): Promise<CronJobRecord> {
  await requireAgent(db, params.agentId);
  return requireJob(db, params.id, params.agentId);
}

function listAgentJobs(deps: GatewayDeps) {
  return async (req: Req<AgentParams>): Promise<CronJobList> => {
    await requireAgent(deps.db.db, req.params.agentId);
    return (await listCronJobs(deps.db.db, { agentId: req.params.agentId, ...mine(req.principal) })).filter(listed).map(jobView);
  };
}

function createAgentJob(deps: GatewayDeps) {
  return async (req: Req<AgentParams, unknown, CreateBody>, reply: Reply): Promise<CronJob> => {
    const { agentId } = req.params;
    await requireAgent(deps.db.db, agentId);
    checkSameTarget(req.body.target, agentId);
    const job = await create(deps, agentId, req.body, req.principal);
    reply.code(201);
    return job;
  };
}

function getAgentJob(deps: GatewayDeps) {
  return async (req: Req<AgentIdParams>): Promise<CronJob> => jobView(await agentJob(deps.db.db, req.params));
}

function updateAgentJob(deps: GatewayDeps) {
  return async (req: Req<AgentIdParams, unknown, UpdateBody>): Promise<CronJob> => {
    const { agentId, id } = req.params;
    await requireAgent(deps.db.db, agentId);
    checkSameTarget(req.body.target, agentId);
    return update(deps, await requireJob(deps.db.db, id, agentId), req.body, req.principal);
  };
}

function deleteAgentJob(deps: GatewayDeps) {
  return async (req: Req<AgentIdParams>): Promise<SuccessBody> => remove(deps, await agentJob(deps.db.db, req.params));
}

function toggleAgentJob(deps: GatewayDeps) {
  return async (req: Req<AgentIdParams, unknown, { disabled: boolean }>): Promise<CronJob> => toggle(deps, await agentJob(deps.db.db, req.params), req.body.disabled);
}

function listAgentJobRuns(deps: GatewayDeps) {
  return async (req: Req<AgentIdParams, PageParams>): Promise<CronRunPage> => runs(deps.db.db, await agentJob(deps.db.db, req.params), req.query);
}

/**
 * Cron jobs (spec "Cron jobs"): the global routes under `/cron` and the agent-level ones under
 * `/agents/{agentId}/cron`, whose target is that agent (another agent's job is a 404 there).
 * Every change is committed, then announced as `{area: 'cron', id}` on `invalidate`: each
 * scheduler replica then brings that job's BullMQ scheduler in step (its periodic full
 * reconcile heals a lost message).
 */
export function cronRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const user = { access: 'user' } as const;
  const jobOwner = { access: 'owner', owns: 'cron' } as const;
  const one = { 200: CronJob };
  const created = { 201: CronJob };
  const list = { 200: CronJobList };
  const deleted = { 200: SuccessBody };
  const runPage = { 200: CronRunPage };
  const pageQuery = Type.Object(PageQuery);

  api.get('/cron', { config: user, schema: { querystring: Type.Object({ agentId: Type.Optional(Type.String()) }), response: list } }, listJobs(deps));
  api.get('/cron/:id', { config: jobOwner, schema: { params: IdParams, response: one } }, getJob(deps));
  api.post('/cron', { config: user, schema: { body: CreateBody, response: created } }, createJob(deps));
  api.put('/cron/:id', { config: jobOwner, schema: { params: IdParams, body: UpdateBody, response: one } }, updateJob(deps));
  api.delete('/cron/:id', { config: jobOwner, schema: { params: IdParams, response: deleted } }, deleteJob(deps));
  api.put('/cron/:id/toggle', { config: jobOwner, schema: { params: IdParams, body: ToggleBody, response: one } }, toggleJob(deps));
  api.get('/cron/:id/runs', { config: jobOwner, schema: { params: IdParams, querystring: pageQuery, response: runPage } }, listJobRuns(deps));

  api.get('/agents/:agentId/cron', { config: user, schema: { params: AgentParams, response: list } }, listAgentJobs(deps));
  api.post('/agents/:agentId/cron', { config: user, schema: { params: AgentParams, body: AgentCreateBody, response: created } }, createAgentJob(deps));
  api.get('/agents/:agentId/cron/:id', { config: jobOwner, schema: { params: AgentIdParams, response: one } }, getAgentJob(deps));
  api.put('/agents/:agentId/cron/:id', { config: jobOwner, schema: { params: AgentIdParams, body: UpdateBody, response: one } }, updateAgentJob(deps));
  api.delete('/agents/:agentId/cron/:id', { config: jobOwner, schema: { params: AgentIdParams, response: deleted } }, deleteAgentJob(deps));
  api.put('/agents/:agentId/cron/:id/toggle', { config: jobOwner, schema: { params: AgentIdParams, body: ToggleBody, response: one } }, toggleAgentJob(deps));
  api.get('/agents/:agentId/cron/:id/runs', { config: jobOwner, schema: { params: AgentIdParams, querystring: pageQuery, response: runPage } }, listAgentJobRuns(deps));
}
