import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import { Errors } from '@agentry/errors';
import { announceChange } from '@agentry/contracts';
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
import { Id, checkSchedule, createCronJob, nextTick } from '@agentry/engine';
import { PLATFORMS } from '@agentry/runtime';
import { agentMaySendThrough, notBoundMessage } from '@agentry/channels';
import { isAdmin, ownerName } from '../auth/ownership.js';
import type { Principal } from '../auth/credentials.js';
import type { GatewayDeps } from '../deps.js';
import { PageQuery, iso, pageOf, requireAgent, typed, type Paged } from './common.js';

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

const CreateBody = Type.Object({ ...fields, target: Type.String({ minLength: 1 }) });
const AgentCreateBody = Type.Object({ ...fields, target: Type.Optional(Type.String({ minLength: 1 })) });
const UpdateBody = Type.Object({
  name: Type.Optional(fields.name),
  schedule: Type.Optional(fields.schedule),
  message: Type.Optional(fields.message),
  timezone: fields.timezone,
  disabled: fields.disabled,
  deliver: fields.deliver,
  target: Type.Optional(Type.String({ minLength: 1 })),
});
const ToggleBody = Type.Object({ disabled: Type.Boolean() });
type CreateBody = Static<typeof AgentCreateBody>;
type UpdateBody = Static<typeof UpdateBody>;

const CronId = Type.String({ minLength: 1, maxLength: 128 });
const IdParams = Type.Object({ id: CronId });
const AgentParams = Type.Object({ agentId: Id });
const AgentIdParams = Type.Object({ agentId: Id, id: CronId });

/** A cron job as the API returns it. */
export interface CronJobView {
  id: string;
  name: string;
  schedule: string;
  message: string;
  target: string;
  disabled: boolean;
  timezone: string;
  deliver: CronDeliver | null;
  /** Username of the creator: only they (or an admin) may change the job. */
  owner: string;
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastStatus: string | null;
  createdAt: string;
  updatedAt: string;
}

function jobView(job: CronJobRecord): CronJobView {
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

function runView(run: CronRunRecord) {
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

/**
 * Cron jobs (spec "Cron jobs"): the global routes under `/cron` and the agent-level ones under
 * `/agents/{agentId}/cron`, whose target is that agent (another agent's job is a 404 there).
 * Every change is committed, then announced as `{area: 'cron', id}` on `invalidate`: each
 * scheduler replica then brings that job's BullMQ scheduler in step (its periodic full
 * reconcile heals a lost message).
 */
export function cronRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const db = () => deps.db.db;

  // A lost message is healed by the schedulers' periodic reconcile, within a minute.
  const announce = (id: string) => announceChange(deps.bus.pubsub, deps.logger, 'cron', [id]);

  /** The job, or 404; with `agentId`, only that agent's job. */
  const requireJob = async (id: string, agentId?: string): Promise<CronJobRecord> => {
    const job = await getCronJob(db(), id);
    if (!job || (agentId !== undefined && job.agentId !== agentId)) throw new Errors.NOT_FOUND(`cron job "${id}"`);
    return job;
  };

  /** A target named in a body must be an existing agent: 400 otherwise (the job is the resource). */
  const checkTarget = async (target: string): Promise<void> => {
    const row = await getRuleChain(db(), target);
    if (!row || row.kind !== 'agent') throw new Errors.VALIDATION(`target: agent "${target}" does not exist`);
  };

  const checkDeliver = async (deliver: CronDeliver | null | undefined, agentId: string): Promise<void> => {
    if (!deliver) return;
    const platforms = PLATFORMS.filter((p) => p !== 'api');
    if (!(platforms as readonly string[]).includes(deliver.platform)) {
      throw new Errors.VALIDATION(`deliver.platform "${deliver.platform}" is not a messaging platform (one of ${platforms.join(', ')})`);
    }
    const accounts = await listChannelAccounts(db(), deliver.platform);
    if (!accounts.some((a) => a.id === deliver.accountId)) {
      throw new Errors.VALIDATION(`deliver.accountId "${deliver.accountId}" is not a ${deliver.platform} account`);
    }
    if (!(await agentMaySendThrough(db(), agentId, deliver.platform, deliver.accountId))) {
      throw new Errors.FORBIDDEN(notBoundMessage(agentId, deliver.platform, deliver.accountId));
    }
  };

  /** An agent deleted between the check and the write breaks the foreign key: still a 400. */
  const noVanishedAgent = async <T>(agentId: string, write: () => Promise<T>): Promise<T> => {
    try {
      return await write();
    } catch (err) {
      if (isForeignKeyViolation(err)) throw new Errors.VALIDATION(`target: agent "${agentId}" does not exist`);
      throw err;
    }
  };

  const checkedSchedule = (schedule: string, timezone: string): string => {
    const result = checkSchedule(schedule, timezone);
    if (!result.ok) throw new Errors.VALIDATION(result.reason);
    return result.schedule;
  };

  /** The shared cron operation, with the route's own rules: the delivery must be allowed, and the job is the caller's. */
  const create = async (agentId: string, body: CreateBody, owner: string): Promise<CronJobView> => {
    const { name, schedule, message, timezone, disabled, deliver } = body;
    const draft = { agentId, owner, name, schedule, message, timezone, disabled, deliver };
    const job = await createCronJob({ db: db(), pubsub: deps.bus.pubsub, logger: deps.logger }, draft, {
      invalidSchedule: (reason) => new Errors.VALIDATION(reason),
      beforeInsert: () => checkDeliver(body.deliver, agentId),
      write: (insert) => noVanishedAgent(agentId, insert),
    });
    return jobView(job);
  };

  const update = async (current: CronJobRecord, body: UpdateBody): Promise<CronJobView> => {
    if (body.target !== undefined && body.target !== current.agentId) await checkTarget(body.target);
    const timezone = body.timezone ?? current.timezone;
    const schedule = body.schedule !== undefined || body.timezone !== undefined ? checkedSchedule(body.schedule ?? current.schedule, timezone) : undefined;
    // A new target must be allowed the delivery the job keeps, and a new delivery the target.
    if (body.deliver !== undefined || body.target !== undefined) await checkDeliver(body.deliver === undefined ? current.deliver : body.deliver, body.target ?? current.agentId);
    const job = await noVanishedAgent(body.target ?? current.agentId, () =>
      updateCronJob(db(), current.id, {
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
    await announce(job.id);
    return jobView(job);
  };

  const toggle = async (current: CronJobRecord, disabled: boolean): Promise<CronJobView> => {
    const job = await updateCronJob(db(), current.id, { disabled });
    if (!job) throw new Errors.NOT_FOUND(`cron job "${current.id}"`);
    await announce(job.id);
    return jobView(job);
  };

  const remove = async (job: CronJobRecord): Promise<{ success: true }> => {
    if (!(await deleteCronJob(db(), job.id))) throw new Errors.NOT_FOUND(`cron job "${job.id}"`);
    await announce(job.id);
    return { success: true };
  };

  const runs = async (job: CronJobRecord, query: { page?: number; size?: number }): Promise<Paged<ReturnType<typeof runView>>> => {
    const { page, size, limit, offset } = pageOf(query);
    const { data, total } = await listCronRuns(db(), job.id, { limit, offset });
    return { data: data.map(runView), total, page, size };
  };

  /** A user lists its own jobs; admins every job. */
  const mine = (p: Principal): { owner?: string } => (isAdmin(p) ? {} : { owner: ownerName(p) });

  // Global routes.
  api.get('/cron', { config: { access: 'user' }, schema: { querystring: Type.Object({ agentId: Type.Optional(Type.String()) }) } }, async (req) => {
    const jobs = await listCronJobs(db(), { ...(req.query.agentId ? { agentId: req.query.agentId } : {}), ...mine(req.principal) });
    return jobs.map(jobView);
  });

  api.get('/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: IdParams } }, async (req) => jobView(await requireJob(req.params.id)));

  api.post('/cron', { config: { access: 'user' }, schema: { body: CreateBody } }, async (req, reply) => {
    await checkTarget(req.body.target);
    return reply.status(201).send(await create(req.body.target, req.body, ownerName(req.principal)));
  });

  api.put('/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: IdParams, body: UpdateBody } }, async (req) => update(await requireJob(req.params.id), req.body));

  api.delete('/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: IdParams } }, async (req) => remove(await requireJob(req.params.id)));

  api.put('/cron/:id/toggle', { config: { access: 'owner', owns: 'cron' }, schema: { params: IdParams, body: ToggleBody } }, async (req) =>
    toggle(await requireJob(req.params.id), req.body.disabled),
  );

  api.get('/cron/:id/runs', { config: { access: 'owner', owns: 'cron' }, schema: { params: IdParams, querystring: Type.Object(PageQuery) } }, async (req) =>
    runs(await requireJob(req.params.id), req.query),
  );

  // Agent-level routes: the agent must exist (404), and only its jobs are visible.
  api.get('/agents/:agentId/cron', { config: { access: 'user' }, schema: { params: AgentParams } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return (await listCronJobs(db(), { agentId: req.params.agentId, ...mine(req.principal) })).map(jobView);
  });

  api.post('/agents/:agentId/cron', { config: { access: 'user' }, schema: { params: AgentParams, body: AgentCreateBody } }, async (req, reply) => {
    const { agentId } = req.params;
    await requireAgent(db(), agentId);
    if (req.body.target !== undefined && req.body.target !== agentId) {
      throw new Errors.VALIDATION(`target "${req.body.target}" does not match the agent in the path ("${agentId}")`);
    }
    return reply.status(201).send(await create(agentId, req.body, ownerName(req.principal)));
  });

  api.get('/agents/:agentId/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: AgentIdParams } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return jobView(await requireJob(req.params.id, req.params.agentId));
  });

  api.put('/agents/:agentId/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: AgentIdParams, body: UpdateBody } }, async (req) => {
    const { agentId, id } = req.params;
    await requireAgent(db(), agentId);
    if (req.body.target !== undefined && req.body.target !== agentId) {
      throw new Errors.VALIDATION(`target "${req.body.target}" does not match the agent in the path ("${agentId}")`);
    }
    return update(await requireJob(id, agentId), req.body);
  });

  api.delete('/agents/:agentId/cron/:id', { config: { access: 'owner', owns: 'cron' }, schema: { params: AgentIdParams } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return remove(await requireJob(req.params.id, req.params.agentId));
  });

  api.put('/agents/:agentId/cron/:id/toggle', { config: { access: 'owner', owns: 'cron' }, schema: { params: AgentIdParams, body: ToggleBody } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return toggle(await requireJob(req.params.id, req.params.agentId), req.body.disabled);
  });

  api.get('/agents/:agentId/cron/:id/runs', { config: { access: 'owner', owns: 'cron' }, schema: { params: AgentIdParams, querystring: Type.Object(PageQuery) } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return runs(await requireJob(req.params.id, req.params.agentId), req.query);
  });
}
