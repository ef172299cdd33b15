import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface CuttingProxy {
  /** `http://127.0.0.1:<port>`: what a client is pointed at instead of the upstream. */
  url: string;
  /** `METHOD path` of each request that went through, in order (HTTP/1.1 request lines). */
  requests(): string[];
  /** How many connections were cut so far. */
  cuts(): number;
  /** From now on every new connection is closed at once (a gateway that is gone for good). */
  refuseAll(): void;
  close(): Promise<void>;
}

export interface CuttingProxyOptions {
  /**
   * Cut a connection once the answer bytes it forwarded contain this text: those bytes go out,
   * then both sides are destroyed, as a network that drops in the middle of a stream.
   */
  cutAfter: string;
  /** How many connections to cut that way (default 1: only the first that matches). */
  times?: number;
  /** After the last cut, refuse every new connection (a gateway gone for good); default: pass them. */
  thenRefuse?: boolean;
}

/**
 * A TCP proxy in front of an HTTP server that drops connections mid-answer: the bytes pass
 * through unchanged until the answer holds `cutAfter`, then the connection is destroyed both
 * ways (no FIN, no [DONE]), the way a Wi-Fi switch or a restarted ingress cuts a chat stream.
 * It speaks no HTTP beyond noting the request lines, so what the client sees is a real drop.
 */
export async function startCuttingProxy(upstream: string, opts: CuttingProxyOptions): Promise<CuttingProxy> {
  const target = new URL(upstream);
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  let cutsLeft = opts.times ?? 1;
  let cuts = 0;
  let refusing = false;

  const server = net.createServer((client) => {
    if (refusing) return void client.destroy();
    const server = net.connect({ host: target.hostname, port: Number(target.port) });
    sockets.add(client).add(server);
    const drop = () => {
      client.destroy();
      server.destroy();
      sockets.delete(client);
      sockets.delete(server);
    };
    client.on('error', drop).on('close', drop);
    server.on('error', drop).on('close', drop);
    client.on('data', (b: Buffer) => {
      for (const m of b.toString('latin1').matchAll(/^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\S+) HTTP\/1\.1\r$/gm)) requests.push(`${m[1]} ${m[2]}`);
      server.write(b);
    });
    let seen = '';
    server.on('data', (b: Buffer) => {
      if (cutsLeft <= 0) return void client.write(b);
      // Kept short: only a match across two reads needs the tail of the previous ones.
      seen = (seen + b.toString('utf8')).slice(-(b.length + opts.cutAfter.length));
      if (!seen.includes(opts.cutAfter)) return void client.write(b);
      cutsLeft--;
      cuts++;
      if (cutsLeft === 0 && opts.thenRefuse) refusing = true;
      client.write(b, () => client.resetAndDestroy());
      server.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => [...requests],
    cuts: () => cuts,
    refuseAll() {
      refusing = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
