import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotReadyReport, ReadyReport } from '@agentry/contracts';
import { HealthRegistry } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { typed, type TypedReply } from './common.js';

const Ready = { response: { 200: ReadyReport, 503: NotReadyReport } };

/**
 * Liveness, readiness and metrics: outside `/api/v1`, never authenticated, quiet in logs.
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
  return async function metrics(_req: unknown, reply: FastifyReply) {
    const text = await deps.metrics.metrics();
    return reply.type(deps.metrics.contentType).send(text);
  };
}
