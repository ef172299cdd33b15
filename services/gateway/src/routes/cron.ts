import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import {
  AgentCronJobCreateBody,
  AgentCronJobParams,
  AgentParams,
  CronJob,
  CronJobCreateBody,
  CronJobList,
  CronJobListQuery,
  CronJobParams,
  CronJobToggleBody,
  CronJobUpdateBody,
  CronRunPage,
  PageQuery,
  SuccessBody,
  announceChange,
  type CronRun,
} from '@agentry/contracts';
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
import { checkSchedule, createCronJob, cronJobView, isHeartbeatJob, shortestGapSeconds } from '@agentry/runs';
import { PLATFORMS } from '@agentry/runtime';
import { agentMaySendThrough, deliverChatRefusal, notBoundMessage } from '@agentry/channels';
import { isAdmin, mayChange, ownerName } from '../auth/ownership.js';
import type { Principal } from '../auth/credentials.js';
import { mayChatWith } from '../auth/audience.js';
import type { GatewayDeps } from '../deps.js';
import { iso, pageOf, requireAgent, typed, type TypedReply, type TypedRequest } from './common.js';

type Db = GatewayDeps['db']['db'];

const one = { 200: CronJob };
const created = { 201: CronJob };
const list = { 200: CronJobList };
const deleted = { 200: SuccessBody };
const runPage = { 200: CronRunPage };
const ListJobs = { querystring: CronJobListQuery, response: list };
const GetJob = { params: CronJobParams, response: one };
const CreateJob = { body: CronJobCreateBody, response: created };
const UpdateJob = { params: CronJobParams, body: CronJobUpdateBody, response: one };
const DeleteJob = { params: CronJobParams, response: deleted };
const ToggleJob = { params: CronJobParams, body: CronJobToggleBody, response: one };
const ListJobRuns = { params: CronJobParams, querystring: PageQuery, response: runPage };
const ListAgentJobs = { params: AgentParams, response: list };
const CreateAgentJob = { params: AgentParams, body: AgentCronJobCreateBody, response: created };
const GetAgentJob = { params: AgentCronJobParams, response: one };
const UpdateAgentJob = { params: AgentCronJobParams, body: CronJobUpdateBody, response: one };
const DeleteAgentJob = { params: AgentCronJobParams, response: deleted };
const ToggleAgentJob = { params: AgentCronJobParams, body: CronJobToggleBody, response: one };
const ListAgentJobRuns = { params: AgentCronJobParams, querystring: PageQuery, response: runPage };

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
async function create(deps: GatewayDeps, agentId: string, body: AgentCronJobCreateBody, principal: Principal): Promise<CronJob> {
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
  return cronJobView(job);
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

async function update(deps: GatewayDeps, current: CronJobRecord, body: CronJobUpdateBody, principal: Principal): Promise<CronJob> {
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
  return cronJobView(job);
}

async function toggle(deps: GatewayDeps, current: CronJobRecord, disabled: boolean): Promise<CronJob> {
  notHeartbeat(current);
  const job = await updateCronJob(deps.db.db, current.id, { disabled });
  if (!job) throw new Errors.NOT_FOUND(`cron job "${current.id}"`);
  await announce(deps, job.id);
  return cronJobView(job);
}

async function remove(deps: GatewayDeps, job: CronJobRecord): Promise<SuccessBody> {
  notHeartbeat(job);
  if (!(await deleteCronJob(deps.db.db, job.id))) throw new Errors.NOT_FOUND(`cron job "${job.id}"`);
  await announce(deps, job.id);
  return { success: true };
}

async function runs(db: Db, job: CronJobRecord, query: PageQuery): Promise<CronRunPage> {
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
  return async (req: TypedRequest<typeof ListJobs>): Promise<CronJobList> => {
    const jobs = await listCronJobs(deps.db.db, { ...(req.query.agentId ? { agentId: req.query.agentId } : {}), ...mine(req.principal) });
    return jobs.filter(listed).map((job) => cronJobView(job));
  };
}

function getJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetJob>): Promise<CronJob> => cronJobView(await requireJob(deps.db.db, req.params.id));
}

function createJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateJob>, reply: TypedReply<typeof CreateJob>): Promise<CronJob> => {
    await checkTarget(deps.db.db, req.body.target);
    const job = await create(deps, req.body.target, req.body, req.principal);
    reply.code(201);
    return job;
  };
}

function updateJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof UpdateJob>): Promise<CronJob> => update(deps, await requireJob(deps.db.db, req.params.id), req.body, req.principal);
}

function deleteJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteJob>): Promise<SuccessBody> => remove(deps, await requireJob(deps.db.db, req.params.id));
}

function toggleJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ToggleJob>): Promise<CronJob> => toggle(deps, await requireJob(deps.db.db, req.params.id), req.body.disabled);
}

function listJobRuns(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListJobRuns>): Promise<CronRunPage> => runs(deps.db.db, await requireJob(deps.db.db, req.params.id), req.query);
}

// Agent-level routes: the agent must exist (404), and only its jobs are visible.

/** The agent's job named in the path, or 404 (for the agent or the job). */
async function agentJob(db: Db, params: AgentCronJobParams): Promise<CronJobRecord> {
  await requireAgent(db, params.agentId);
  return requireJob(db, params.id, params.agentId);
}

function listAgentJobs(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListAgentJobs>): Promise<CronJobList> => {
    await requireAgent(deps.db.db, req.params.agentId);
    return (await listCronJobs(deps.db.db, { agentId: req.params.agentId, ...mine(req.principal) })).filter(listed).map((job) => cronJobView(job));
  };
}

function createAgentJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateAgentJob>, reply: TypedReply<typeof CreateAgentJob>): Promise<CronJob> => {
    const { agentId } = req.params;
    await requireAgent(deps.db.db, agentId);
    checkSameTarget(req.body.target, agentId);
    const job = await create(deps, agentId, req.body, req.principal);
    reply.code(201);
    return job;
  };
}

function getAgentJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetAgentJob>): Promise<CronJob> => cronJobView(await agentJob(deps.db.db, req.params));
}

function updateAgentJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof UpdateAgentJob>): Promise<CronJob> => {
    const { agentId, id } = req.params;
    await requireAgent(deps.db.db, agentId);
    checkSameTarget(req.body.target, agentId);
    return update(deps, await requireJob(deps.db.db, id, agentId), req.body, req.principal);
  };
}

function deleteAgentJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteAgentJob>): Promise<SuccessBody> => remove(deps, await agentJob(deps.db.db, req.params));
}

function toggleAgentJob(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ToggleAgentJob>): Promise<CronJob> => toggle(deps, await agentJob(deps.db.db, req.params), req.body.disabled);
}

function listAgentJobRuns(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListAgentJobRuns>): Promise<CronRunPage> => runs(deps.db.db, await agentJob(deps.db.db, req.params), req.query);
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

  api.get('/cron', { config: user, schema: ListJobs }, listJobs(deps));
  api.get('/cron/:id', { config: jobOwner, schema: GetJob }, getJob(deps));
  api.post('/cron', { config: user, schema: CreateJob }, createJob(deps));
  api.put('/cron/:id', { config: jobOwner, schema: UpdateJob }, updateJob(deps));
  api.delete('/cron/:id', { config: jobOwner, schema: DeleteJob }, deleteJob(deps));
  api.put('/cron/:id/toggle', { config: jobOwner, schema: ToggleJob }, toggleJob(deps));
  api.get('/cron/:id/runs', { config: jobOwner, schema: ListJobRuns }, listJobRuns(deps));

  api.get('/agents/:agentId/cron', { config: user, schema: ListAgentJobs }, listAgentJobs(deps));
  api.post('/agents/:agentId/cron', { config: user, schema: CreateAgentJob }, createAgentJob(deps));
  api.get('/agents/:agentId/cron/:id', { config: jobOwner, schema: GetAgentJob }, getAgentJob(deps));
  api.put('/agents/:agentId/cron/:id', { config: jobOwner, schema: UpdateAgentJob }, updateAgentJob(deps));
  api.delete('/agents/:agentId/cron/:id', { config: jobOwner, schema: DeleteAgentJob }, deleteAgentJob(deps));
  api.put('/agents/:agentId/cron/:id/toggle', { config: jobOwner, schema: ToggleAgentJob }, toggleAgentJob(deps));
  api.get('/agents/:agentId/cron/:id/runs', { config: jobOwner, schema: ListAgentJobRuns }, listAgentJobRuns(deps));
}
