import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobinProxy {
  url: string;
  port: number;
  /** Requests sent to each upstream so far, by upstream URL. */
  counts(): Record<string, number>;
  close(): Promise<void>;
}

/**
 * A tiny HTTP load balancer standing in for the ingress of a deployment: each request goes to the
 * next upstream in turn, bodies and answers are streamed both ways unbuffered (SSE passes through
 * as it is written), a client that goes away aborts the upstream request, and an upstream that
 * cannot be reached answers 502 `{error}`.
 */
export async function startRoundRobinProxy(upstreams: readonly string[], opts: { host?: string; port?: number } = {}): Promise<RoundRobinProxy> {
  if (upstreams.length === 0) throw new Error('the proxy needs at least one upstream');
  const targets = upstreams.map((u) => new URL(u));
  const counts = new Map<string, number>(upstreams.map((u) => [u, 0]));
  let next = 0;

  const server = http.createServer((req, res) => {
    const i = next++ % targets.length;
    const target = targets[i]!;
    counts.set(upstreams[i]!, (counts.get(upstreams[i]!) ?? 0) + 1);
    const headers = { ...req.headers, host: target.host, 'x-forwarded-for': req.socket.remoteAddress ?? '' };
    const upstream = http.request(
      { hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on('error', (err) => {
      if (res.headersSent) return void res.destroy();
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `upstream ${upstreams[i]} unreachable: ${(err as NodeJS.ErrnoException).code ?? err.message}` }));
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    port,
    counts: () => Object.fromEntries(counts),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
