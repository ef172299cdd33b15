import type { FastifyInstance } from 'fastify';
import { HealthRegistry } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';

/** Liveness, readiness and metrics: outside `/api/v1`, never authenticated, quiet in logs. */
export function probeRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  app.get('/health', { config: { access: 'public' }, logLevel: 'warn' }, async (_req, reply) => {
    return reply.type('text/plain; charset=utf-8').send('OK');
  });

  app.get('/ready', { config: { access: 'public' }, logLevel: 'warn' }, async (_req, reply) => {
    const report = await deps.health.check();
    if (report.ok) return { status: 'ready', checks: report.checks };
    return reply.status(503).send({ error: `not ready: ${HealthRegistry.describeFailure(report)}`, checks: report.checks });
  });

  app.get('/metrics', { config: { access: 'public' }, logLevel: 'warn' }, async (_req, reply) => {
    const text = await deps.metrics.metrics();
    return reply.type(deps.metrics.contentType).send(text);
  });
}
