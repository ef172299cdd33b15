import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobinProxy {
  url: string;
  port: number;
  /** Requests sent to each upstream so far, by upstream URL (a refused attempt is not counted). */
  counts(): Record<string, number>;
  close(): Promise<void>;
}

/**
 * A tiny HTTP load balancer standing in for the ingress of a deployment: each request goes to the
 * next upstream in turn, bodies and answers are streamed both ways unbuffered (SSE passes through
 * as it is written), a client that goes away aborts the upstream request, and an upstream that
 * cannot be reached answers 502 `{error}`.
 *
 * `upstreams` is read at each request, so a gateway the cluster starts later is served too. An
 * upstream that refuses the connection (its process died) is skipped for the next one, as an
 * ingress whose endpoint went unready would: nothing of the request reached it, so sending it
 * elsewhere cannot do it twice. Only when every upstream refuses does the client get the 502.
 */
export async function startRoundRobinProxy(upstreams: readonly string[], opts: { host?: string; port?: number } = {}): Promise<RoundRobinProxy> {
  if (upstreams.length === 0) throw new Error('the proxy needs at least one upstream');
  const counts = new Map<string, number>();
  let next = 0;

  const server = http.createServer((req, res) => {
    const first = next++;
    // The body read so far, kept only until an upstream takes the connection: a refused one got none of it.
    let replay: Buffer[] | undefined = [];
    let bodyEnded = false;
    const keep = (chunk: Buffer) => replay?.push(chunk);
    req.on('data', keep);
    req.once('end', () => (bodyEnded = true));

    const attempt = (tries: number): void => {
      const list = [...upstreams];
      const url = list[(first + tries) % list.length]!;
      const target = new URL(url);
      const headers = { ...req.headers, host: target.host, 'x-forwarded-for': req.socket.remoteAddress ?? '' };
      const upstream = http.request({ hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.flushHeaders();
        // An upstream that dies mid-answer (its process killed) must break the client's connection too, not leave it hanging.
        answer.once('error', () => res.destroy());
        answer.once('close', () => {
          if (!answer.complete) res.destroy();
        });
        answer.pipe(res);
      });
      upstream.once('socket', (socket) => {
        const taken = () => {
          replay = undefined;
          req.off('data', keep);
          counts.set(url, (counts.get(url) ?? 0) + 1);
        };
        // A kept-alive socket is connected already; a new one is once it says so.
        if (socket.connecting) socket.once('connect', taken);
        else taken();
      });
      upstream.on('error', (err) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ECONNREFUSED' && replay && tries + 1 < list.length && !res.headersSent) {
          req.unpipe(upstream);
          return attempt(tries + 1);
        }
        if (res.headersSent) return void res.destroy();
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: `upstream ${url} unreachable: ${code ?? err.message}` }));
      });
      res.once('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      // What a refused upstream was given goes to this one first, then the rest as it comes.
      for (const chunk of replay ?? []) upstream.write(chunk);
      if (bodyEnded) upstream.end();
      else req.pipe(upstream);
    };
    attempt(0);
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
    counts: () => Object.fromEntries(upstreams.map((u) => [u, counts.get(u) ?? 0])),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
