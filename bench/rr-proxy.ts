/**
 * libs/testing's round-robin proxy as a process of its own, so that a bench can put it in front
 * of several gateways and count its CPU apart from the load generator's.
 *
 *   npx tsx --conditions=@agentry/source bench/rr-proxy.ts --port=18000 http://127.0.0.1:18001 http://127.0.0.1:18002
 *
 * Binds 127.0.0.1 only. Prints `round-robin proxy listening on <url>` when ready; SIGTERM closes it.
 */
import { startRoundRobinProxy } from '@agentry/testing';

const args = process.argv.slice(2);
const port = Number(args.find((a) => a.startsWith('--port='))?.slice('--port='.length) ?? 0);
const upstreams = args.filter((a) => !a.startsWith('--'));
if (!Number.isInteger(port) || upstreams.length === 0 || upstreams.some((u) => new URL(u).hostname !== '127.0.0.1')) {
  console.error('usage: rr-proxy.ts --port=<port> http://127.0.0.1:<port> [http://127.0.0.1:<port> ...]');
  process.exit(2);
}
const proxy = await startRoundRobinProxy(upstreams, { port });
console.log(`round-robin proxy listening on ${proxy.url} -> ${upstreams.join(', ')}`);
const shut = () => {
  void proxy.close().then(() => {
    console.log(`requests per upstream: ${JSON.stringify(proxy.counts())}`);
    process.exit(0);
  });
};
process.once('SIGTERM', shut);
process.once('SIGINT', shut);
