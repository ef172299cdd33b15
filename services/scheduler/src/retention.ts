import { deleteExpired, type Db, type RetentionCounts, type RetentionCutoffs } from '@agentry/db';
import type { AgentryConfig } from '@agentry/runtime';

const DAY_MS = 24 * 3600 * 1000;

/** The instants before which rows expire, from `retention.*` (0 days: kept, no cutoff). */
export function retentionCutoffs(retention: AgentryConfig['retention'], now: Date): RetentionCutoffs {
  const before = (days: number) => (days > 0 ? new Date(now.getTime() - days * DAY_MS) : undefined);
  const cutoffs: RetentionCutoffs = {
    sessions: before(retention.sessions_days),
    runs: before(retention.runs_days),
    cronRuns: before(retention.cron_runs_days),
    outbound: before(retention.outbound_days),
    inbound: before(retention.inbound_events_days),
  };
  return Object.fromEntries(Object.entries(cutoffs).filter(([, v]) => v !== undefined)) as RetentionCutoffs;
}

/**
 * One retention pass: deletes what `retention.*` (read per pass, so a changed configuration
 * applies at the next one) lets expire, and counts what went (startPeriodic logs it). Any number of schedulers may run
 * passes at once: a row deleted twice is deleted once.
 */
export async function retentionPass(db: Db, retention: AgentryConfig['retention'], now = new Date()): Promise<RetentionCounts> {
  return deleteExpired(db, retentionCutoffs(retention, now));
}
