import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentryClient } from '@agentry/client';
import { startCuttingProxy, waitFor, type CuttingProxy } from '@agentry/testing';
import { agentDsl, runCli, startGateway, tempHome, type TestGateway } from './support.js';

/**
 * `agentry chat` when the network drops in the middle of an answer: a real gateway (embedded
 * mode, the fake model streaming slowly) behind a TCP proxy that cuts the connection once it has
 * passed a few words. The CLI picks the stream up again by itself and the answer is whole.
 */
let gw: TestGateway;
let home: string;
let api: AgentryClient;
let proxy: CuttingProxy | undefined;

const words = Array.from({ length: 30 }, (_, i) => `w${i} `);

beforeAll(async () => {
  gw = await startGateway();
  home = tempHome();
  api = new AgentryClient({ url: gw.url });
  await api.agents.create(agentDsl('resume'));
}, 60_000);

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

afterAll(async () => {
  await gw?.stop();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

async function lastRun() {
  const page = await api.agents.runs('resume', { size: 1 });
  return page.data[0]!;
}

describe('agentry chat over a connection that drops', () => {
  it('resumes by itself: the whole answer once on stdout, a note on stderr, the rest from /runs/{id}/events', async () => {
    proxy = await startCuttingProxy(gw.url, { cutAfter: '"content":"w3 "' });
    gw.fake.script({ text: words, chunkDelayMs: 50 });
    const chat = await runCli(['chat', '-a', 'resume', 'count slowly'], home, proxy.url);
    expect(chat.code, chat.stderr).toBe(0);
    expect(proxy.cuts()).toBe(1);
    expect(chat.stdout).toBe(`${words.join('').trimEnd()} \n`);
    expect(chat.stderr).toBe('(connection lost; resumed)\n');
    const run = await lastRun();
    await waitFor(async () => (await lastRun()).status === 'succeeded', 5000);
    expect(proxy.requests()).toEqual(['POST /api/v1/chat/completions', `GET /api/v1/runs/${run.id}/events`]);
  });

  it('ends with a sentence, not a hang, when the stream cannot be resumed', async () => {
    // The gateway is gone for good once the stream was cut: every reconnection is refused.
    proxy = await startCuttingProxy(gw.url, { cutAfter: '"content":"w3 "', thenRefuse: true });
    gw.fake.script({ text: words, chunkDelayMs: 50 });
    const started = Date.now();
    const chat = await runCli(['chat', '-a', 'resume', 'count slowly'], home, proxy.url);
    expect(chat.code).toBe(1);
    expect(chat.stdout).toMatch(/^w0 w1 w2 w3 /);
    expect(chat.stderr).toMatch(/^error: the connection dropped and the stream could not be resumed: cannot reach http:\/\/127\.0\.0\.1:\d+ \(.+\)\n$/);
    // The tries stay inside the server's grace (5 s), then give up.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(proxy.requests()).toEqual(['POST /api/v1/chat/completions']);
  });

  it('says why when the run is no longer there to resume', async () => {
    // Cut after the first chunk that carries a run id, then aim the resume at a gateway that
    // does not know the run: a second gateway on its own database.
    const other = await startGateway();
    try {
      await new AgentryClient({ url: other.url }).agents.create(agentDsl('resume'));
      proxy = await startCuttingProxy(gw.url, { cutAfter: '"content":"w3 "' });
      const cutting = proxy;
      gw.fake.script({ text: words, chunkDelayMs: 50 });
      // The proxy's address answers through the first gateway until the cut, then through the other.
      const switching = await startSwitch(cutting.url, other.url, () => cutting.cuts() > 0);
      try {
        const chat = await runCli(['chat', '-a', 'resume', 'count slowly'], home, switching.url);
        expect(chat.code).toBe(1);
        expect(chat.stderr).toMatch(/^error: the connection dropped and the stream could not be resumed: Not found: run "[0-9a-f]{32}"\n$/);
      } finally {
        await switching.close();
      }
    } finally {
      await other.stop();
    }
  }, 60_000);
});

/** A TCP hop that forwards each new connection to `first`, or to `then` once `switched()` holds. */
async function startSwitch(first: string, then: string, switched: () => boolean): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const target = new URL(switched() ? then : first);
    const upstream = net.connect({ host: target.hostname, port: Number(target.port) });
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
