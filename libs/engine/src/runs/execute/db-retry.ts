import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '@agentry/db';

/**
 * How long a worker keeps retrying a statement that decides a run's fate (its claim, its
 * outcome, the session turn) while the database is unreachable. Past it the job fails and the
 * sweep (`reliability.run_sweep_ms`) picks the run up again once the database is back.
 */
const DB_RETRY_MS = 60_000;

/**
 * Runs `fn`, and runs it again with backoff (0.2 s doubling to 2 s) while it fails because the
 * database is unreachable, for up to `maxMs`. Any other error, or the last one, is thrown. Only
 * for statements that are safe to repeat (each run write is conditional on the run's status).
 */
export async function retryWhileDbDown<T>(logger: Logger, what: string, fn: () => Promise<T>, maxMs = DB_RETRY_MS): Promise<T> {
  const deadline = Date.now() + maxMs;
  let wait = 200;
  let warned = false;
  for (;;) {
    try {
      const result = await fn();
      if (warned) logger.info({ what }, 'database reachable again');
      return result;
    } catch (err) {
      if (!isDatabaseUnavailable(err) || Date.now() + wait > deadline) throw err;
      if (!warned) logger.warn({ what, err: (err as Error).message }, 'database unreachable; retrying');
      warned = true;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 2_000);
    }
  }
}
