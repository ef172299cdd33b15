import { randomUUID } from 'node:crypto';
import { announceChange, type InvalidatePublisher, type WarnLogger } from '@agentry/contracts';
import { insertCronJob, type CronDeliver, type CronJobRecord, type Db } from '@agentry/db';
import { checkSchedule } from './schedule.js';

/** A job as a caller asks for it; the defaults are filled in here, once for every caller. */
interface CronJobDraft {
  agentId: string;
  name: string;
  schedule: string;
  message: string;
  /** Default `UTC`. */
  timezone?: string;
  /** Default false. */
  disabled?: boolean;
  /** Default none. */
  deliver?: CronDeliver | null;
  /** Default: the table's (`admin`). */
  owner?: string;
}

/**
 * What differs between the callers (the gateway's cron routes, the agent's `cron` tool): how a
 * refusal reads to their client (a 400 or a ToolError), their own rules, and how a failed write
 * is reported. The operation itself (check the schedule, insert, announce) is the same.
 */
interface CronCreateRules {
  /** The error for a schedule `checkSchedule` refuses, given its reason. */
  invalidSchedule(reason: string): Error;
  /**
   * The caller's own checks, run after the schedule passed and before the write, on the
   * normalised schedule; may throw. What it returns is added to the row (the tool finds the
   * owner there, after its limits, as it always did).
   */
  beforeInsert?(schedule: string, timezone: string): Promise<Pick<CronJobDraft, 'owner'> | void>;
  /** Runs the insert, so that the caller maps database errors its own way. */
  write?(insert: () => Promise<CronJobRecord>): Promise<CronJobRecord>;
}

interface CronCreatePorts {
  db: Db;
  /** Absent where there is no bus: the schedulers then find the job at their periodic reconcile. */
  pubsub?: InvalidatePublisher;
  logger: WarnLogger;
}

/**
 * Creates a cron job: checks its schedule the way both scheduler adapters read it, inserts the
 * row (schedule normalised), and, once it committed, announces `{area: 'cron', id}` so every
 * scheduler replica adds it at once. A failed announcement is logged: the job stands.
 */
export async function createCronJob(ports: CronCreatePorts, draft: CronJobDraft, rules: CronCreateRules): Promise<CronJobRecord> {
  const timezone = draft.timezone ?? 'UTC';
  const checked = checkSchedule(draft.schedule, timezone);
  if (!checked.ok) throw rules.invalidSchedule(checked.reason);
  const extra = (await rules.beforeInsert?.(checked.schedule, timezone)) ?? {};
  const owner = extra.owner ?? draft.owner;
  const insert = () =>
    insertCronJob(ports.db, {
      id: randomUUID(),
      agentId: draft.agentId,
      name: draft.name,
      schedule: checked.schedule,
      message: draft.message,
      timezone,
      disabled: draft.disabled ?? false,
      deliver: draft.deliver ?? null,
      ...(owner !== undefined ? { owner } : {}),
    });
  const job = await (rules.write ? rules.write(insert) : insert());
  if (ports.pubsub) await announceChange(ports.pubsub, ports.logger, 'cron', [job.id]);
  return job;
}
