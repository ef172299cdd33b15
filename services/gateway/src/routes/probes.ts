import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors } from '@agentry/errors';
import { NotReadyReport, ReadyReport } from '@agentry/contracts';
import { HealthRegistry, metricsAccess } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { typed, type TypedReply } from './common.js';

const Ready = { response: { 200: ReadyReport, 503: NotReadyReport } };

/**
 * Liveness, readiness and metrics: outside `/api/v1`, quiet in logs. `/health` and `/ready` are
 * never authenticated; `/metrics` asks metricsAccess (the bearer `metrics.token` when set, else
 * the management allow-list), the same rule as the other services' health servers.
 * `/health` (the spec's plain `OK`) and `/metrics` (Prometheus' text format) are not JSON, so
 * they declare no response schema: a serializer schema applies to JSON answers only.
 */
export function probeRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  api.get('/health', { config: { access: 'public', addressList: 'none' }, logLevel: 'warn' }, health);
  api.get('/ready', { config: { access: 'public', addressList: 'none' }, logLevel: 'warn', schema: Ready }, ready(deps));
  api.get('/metrics', { config: { access: 'public', addressList: 'none' }, logLevel: 'warn' }, metrics(deps));
}

async function health(_req: unknown, reply: FastifyReply) {
  return reply.type('text/plain; charset=utf-8').send('OK');
}

function ready(deps: GatewayDeps) {
  return async function ready(_req: unknown, reply: TypedReply<typeof Ready>) {
    const report = await deps.health.check();
    if (report.ok) return reply.status(200).send({ status: 'ready', checks: report.checks });
    return reply.status(503).send({ error: `not ready: ${HealthRegistry.describeFailure(report)}`, checks: report.checks });
  };
}

function metrics(deps: GatewayDeps) {
  return async function metrics(req: FastifyRequest, reply: FastifyReply) {
    const verdict = metricsAccess(deps.config.current, { authorization: req.headers.authorization, ip: req.ip });
    if (!verdict.ok) {
      if (verdict.status === 401) {
        void reply.header('www-authenticate', 'Bearer');
        throw new Errors.UNAUTHORIZED(verdict.error);
      }
      req.log.warn({ ip: req.ip, list: 'security.allowFrom.management', route: '/metrics' }, 'address refused by the allow-list');
      throw new Errors.FORBIDDEN(verdict.error);
    }
    const text = await deps.metrics.metrics();
    return reply.type(deps.metrics.contentType).send(text);
  };
}
