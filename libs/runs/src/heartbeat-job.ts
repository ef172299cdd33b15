import { announceChange, type InvalidatePublisher, type WarnLogger } from '@agentry/contracts';
import { getCronJob, insertCronJob, isUniqueViolation, updateCronJob, type CronJobRecord, type Db } from '@agentry/db';
import { DEFAULT_HEARTBEAT_PROMPT, heartbeatOfDsl, heartbeatSchedule, parseHeartbeatTarget } from './heartbeat.js';

/** The id of an agent's heartbeat job; cron jobs made by people have UUIDs, so it never collides. */
export function heartbeatJobId(agentId: string): string {
  return `heartbeat:${agentId}`;
}

/** Is this cron job an agent's heartbeat (derived from its DSL, not edited as a cron job)? */
export function isHeartbeatJob(cronJobId: string): boolean {
  return cronJobId.startsWith('heartbeat:');
}

interface HeartbeatPorts {
  db: Db;
  /** Absent where there is no bus: the schedulers find the change at their periodic reconcile. */
  pubsub?: InvalidatePublisher;
  logger: WarnLogger;
}

/**
 * Brings an agent's heartbeat job in step with its DSL (call it after every save of the agent).
 * The heartbeat is a cron job, so that it fires exactly once per tick across scheduler replicas
 * by the same UNIQUE (cron_job_id, scheduled_at) row as any cron job, and shows in the cron run
 * history. A removed or disabled heartbeat disables the job rather than deleting it: its history
 * stays. Answers the job, or undefined when the agent never had a heartbeat.
 */
export async function syncHeartbeatJob(ports: HeartbeatPorts, agent: { id: string; dsl: unknown; owner?: string }): Promise<CronJobRecord | undefined> {
  const id = heartbeatJobId(agent.id);
  const hb = heartbeatOfDsl(agent.dsl);
  const schedule = hb ? heartbeatSchedule(hb.interval) : undefined;
  const existing = await getCronJob(ports.db, id);
  let job: CronJobRecord | undefined;
  if (!hb || hb.disabled || !schedule?.ok) {
    // The DSL's validation refuses a bad interval; a stored one (older rules) is simply off.
    if (!existing || existing.disabled) return existing;
    job = await updateCronJob(ports.db, id, { disabled: true });
  } else {
    const fields = {
      schedule: schedule.schedule,
      message: hb.prompt?.trim() ? hb.prompt : DEFAULT_HEARTBEAT_PROMPT,
      timezone: hb.timezone || 'UTC',
      disabled: false,
      deliver: parseHeartbeatTarget(hb.target) ?? null,
    };
    job = existing ? await updateCronJob(ports.db, id, fields) : await insertOrUpdate(ports.db, { id, agentId: agent.id, name: 'heartbeat', ...fields, ...(agent.owner ? { owner: agent.owner } : {}) });
  }
  if (ports.pubsub && job) await announceChange(ports.pubsub, ports.logger, 'cron', [job.id]);
  return job;
}

/** Two saves at once: the second insert finds the row and updates it instead. */
async function insertOrUpdate(db: Db, job: Parameters<typeof insertCronJob>[1]): Promise<CronJobRecord | undefined> {
  try {
    return await insertCronJob(db, job);
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    const { id, agentId: _a, name: _n, owner: _o, ...fields } = job;
    return updateCronJob(db, id, fields);
  }
}
