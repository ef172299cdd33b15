import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { HealthRegistry } from './health.js';
import { metricsAccess, type MetricsAccessConfig } from './metrics-access.js';

/**
 * The small HTTP endpoint of services that have no API of their own (agent-worker,
 * scheduler, channel-connector): `/health`, `/ready` and `/metrics` for probes and scraping.
 */
export async function startHealthServer(opts: {
  host: string;
  port: number;
  health: HealthRegistry;
  metrics: Registry;
  /** The live configuration `/metrics` is guarded by (metrics.token, the management allow-list). */
  config: () => MetricsAccessConfig;
}): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
    if (req.method !== 'GET') return send(405, 'application/json', JSON.stringify({ error: 'Method not allowed' }));
    if (url === '/health') return send(200, 'text/plain; charset=utf-8', 'OK');
    if (url === '/ready') {
      void opts.health.check().then((report) => {
        if (report.ok) send(200, 'application/json', JSON.stringify({ status: 'ready', checks: report.checks }));
        else send(503, 'application/json', JSON.stringify({ error: `not ready: ${HealthRegistry.describeFailure(report)}`, checks: report.checks }));
      });
      return;
    }
    if (url === '/metrics') {
      // No proxy in front of a health server: the peer's address is the client's.
      const verdict = metricsAccess(opts.config(), { authorization: req.headers.authorization, ip: req.socket.remoteAddress ?? '' });
      if (!verdict.ok) {
        if (verdict.status === 401) res.setHeader('www-authenticate', 'Bearer');
        return send(verdict.status, 'application/json', JSON.stringify({ error: verdict.error }));
      }
      void opts.metrics.metrics().then((text) => send(200, opts.metrics.contentType, text));
      return;
    }
    send(404, 'application/json', JSON.stringify({ error: `Route GET ${url} not found` }));
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Serves the probes of a runtime and closes them with it. Port 0 picks a free port. */
export async function serveProbes(
  runtime: { health: HealthRegistry; metrics: Registry; config: { current: MetricsAccessConfig }; lifecycle: { add(name: string, close: () => Promise<void>): void }; logger: { info(obj: object, msg: string): void } },
  opts: { host: string; port: number },
): Promise<number> {
  const server = await startHealthServer({ ...opts, health: runtime.health, metrics: runtime.metrics, config: () => runtime.config.current });
  runtime.lifecycle.add('probes', async () => {
    runtime.health.markStopping();
    await server.close();
  });
  runtime.logger.info({ host: opts.host, port: server.port }, 'probes listening');
  return server.port;
}
