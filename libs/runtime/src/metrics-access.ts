import { createHash, timingSafeEqual } from 'node:crypto';
import { AddressList } from './address-list.js';

/** What `/metrics` reads of the configuration: `metrics.token` and `security.allowFrom.management`. */
export interface MetricsAccessConfig {
  metrics: { token: string };
  security: { allowFrom: { management: readonly string[] } };
}

/** May this request read `/metrics`: `ok`, or the status and human message of the refusal. */
export type MetricsVerdict = { ok: true } | { ok: false; status: 401 | 403; error: string };

/** Equal strings, compared in time that does not depend on where they differ (nor on their lengths). */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

let cached: { entries: readonly string[]; list: AddressList } | undefined;
function managementList(entries: readonly string[]): AddressList {
  if (cached?.entries !== entries) cached = { entries, list: new AddressList(entries) };
  return cached.list;
}

/**
 * The one rule of `/metrics`, for the gateway and the other services' health servers alike.
 * With `metrics.token` set, the scrape sends `Authorization: Bearer <token>` (compared in
 * constant time), from any address; without it, the management allow-list decides (empty: every
 * address, as before).
 */
export function metricsAccess(config: MetricsAccessConfig, req: { authorization: string | undefined; ip: string }): MetricsVerdict {
  const token = config.metrics.token;
  if (token !== '') {
    const match = /^Bearer\s+(.+)$/i.exec(req.authorization?.trim() ?? '');
    if (match && sameSecret(match[1]!.trim(), token)) return { ok: true };
    return { ok: false, status: 401, error: 'send the metrics token (metrics.token) as "Authorization: Bearer <token>" to read /metrics' };
  }
  if (managementList(config.security.allowFrom.management).allows(req.ip)) return { ok: true };
  return { ok: false, status: 403, error: `address ${req.ip} is not in security.allowFrom.management (set metrics.token to scrape /metrics from elsewhere)` };
}
