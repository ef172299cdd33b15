import type { Runtime } from '@agentry/runtime';

/**
 * Keeps the cron scheduler in step with the `cron_jobs` table and turns fires into runs. The reconcile loop arrives with cron jobs; until then the scheduler connects, reports ready and stops cleanly.
 */
export async function startScheduler(runtime: Runtime): Promise<void> {
  runtime.lifecycle.add('scheduler', async () => {
    runtime.logger.info('scheduler stopped');
  });
  runtime.logger.info({ bus: runtime.bus.kind, database: runtime.db.dialect }, 'scheduler started');
}
