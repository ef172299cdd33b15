import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { UsageQuery, UsageReport } from '@agentry/contracts';
import { usageTotals } from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { visibleSessionOwner } from '../auth/ownership.js';
import { typed, type TypedRequest } from './common.js';

const DAY_MS = 86_400_000;
/** The window a report covers when `from` is not given. */
const DEFAULT_DAYS = 30;
/** A date without a time (`YYYY-MM-DD`): `to` then means the end of that UTC day. */
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

const GetUsage = { querystring: UsageQuery, response: { 200: UsageReport } };

/** Token totals of model calls (`run_usage`): admins see everyone's, anyone else only their own. */
export function usageRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  typed(app).get('/usage', { config: { access: 'user' }, schema: GetUsage }, getUsage(deps));
}

function getUsage(deps: GatewayDeps) {
  return async function getUsage(req: TypedRequest<typeof GetUsage>): Promise<UsageReport> {
    const q = req.query;
    const groupBy = q.groupBy ?? 'day';
    const to = q.to === undefined ? new Date() : parseDate('to', q.to, true);
    const from = q.from === undefined ? new Date(to.getTime() - DEFAULT_DAYS * DAY_MS) : parseDate('from', q.from, false);
    if (from.getTime() >= to.getTime()) throw new Errors.VALIDATION('from: must be before to');
    // Undefined for admins (and open mode): every principal, or the one asked for.
    const own = visibleSessionOwner(req.principal);
    if (own !== undefined && q.principal !== undefined && q.principal !== own) throw new Errors.FORBIDDEN('only an admin may read the usage of another principal');
    const principal = own ?? q.principal;
    const data = await usageTotals(deps.db.db, { groupBy, from, to, ...(principal !== undefined ? { principal } : {}) });
    return { data, from: from.toISOString(), to: to.toISOString(), groupBy };
  };
}

function parseDate(field: string, value: string, endOfDay: boolean): Date {
  const ms = Date.parse(DATE_ONLY.test(value) ? `${value}T00:00:00Z` : value);
  if (!Number.isFinite(ms)) throw new Errors.VALIDATION(`${field}: not an ISO 8601 date or time ("${value}")`);
  return new Date(DATE_ONLY.test(value) && endOfDay ? ms + DAY_MS : ms);
}
