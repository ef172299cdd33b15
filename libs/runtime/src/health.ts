export interface CheckResult {
  ok: boolean;
  ms: number;
  error?: string;
}

export interface HealthReport {
  ok: boolean;
  checks: Record<string, CheckResult>;
}

/**
 * Readiness checks by name (database, redis, ...). A check passes by resolving; it fails by
 * throwing or by not answering within the timeout. Until `markStarted()` the service is not
 * ready whatever its checks say, and after `markStopping()` it is not ready again, so a load
 * balancer drains it before it closes.
 */
export class HealthRegistry {
  #checks = new Map<string, () => Promise<void>>();
  #started = false;
  #stopping = false;

  register(name: string, check: () => Promise<void>): void {
    this.#checks.set(name, check);
  }

  markStarted(): void {
    this.#started = true;
  }

  markStopping(): void {
    this.#stopping = true;
  }

  async check(timeoutMs = 2000): Promise<HealthReport> {
    const checks: Record<string, CheckResult> = {};
    await Promise.all(
      [...this.#checks].map(async ([name, fn]) => {
        const started = Date.now();
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            fn(),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
          checks[name] = { ok: true, ms: Date.now() - started };
        } catch (err) {
          checks[name] = { ok: false, ms: Date.now() - started, error: (err as Error).message || String(err) };
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    if (!this.#started) checks.startup = { ok: false, ms: 0, error: 'still starting' };
    if (this.#stopping) checks.shutdown = { ok: false, ms: 0, error: 'shutting down' };
    return { ok: Object.values(checks).every((c) => c.ok), checks };
  }

  /** One line naming what is not ready, for `{error}` bodies. */
  static describeFailure(report: HealthReport): string {
    return Object.entries(report.checks)
      .filter(([, c]) => !c.ok)
      .map(([name, c]) => `${name}: ${c.error ?? 'failed'}`)
      .join('; ');
  }
}
