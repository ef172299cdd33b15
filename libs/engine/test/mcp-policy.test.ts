import { ADMIN } from './fake-run-deps.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as Dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { answerMcp } from '@agentry/testing';

/**
 * The outbound-address policy on MCP servers and on `policyFetch`, the fetch the MCP client is
 * given. DNS is scripted here (names ending in `.test`) so that a name can answer a public
 * address first and loopback when the socket connects: DNS rebinding.
 */
const answers = new Map<string, string[]>();
vi.mock('node:dns', async (importOriginal) => {
  const real = await importOriginal<typeof Dns>();
  const lookup = (host: string, options: unknown, callback: (err: Error | null, addresses: LookupAddress[] | string, family?: number) => void) => {
    const queue = answers.get(host);
    if (!queue) return (real.lookup as unknown as (...args: unknown[]) => void)(host, options, callback);
    const address = queue.length > 1 ? queue.shift()! : queue[0]!;
    const list = [{ address, family: address.includes(':') ? 6 : 4 }];
    if ((options as { all?: boolean }).all) return callback(null, list);
    return callback(null, address, list[0]!.family);
  };
  return { ...real, default: { ...real, lookup }, lookup };
});

const { AddressNotAllowedError, policyFetch, resolveTools } = await import('@agentry/engine');

const logger = pino({ level: 'silent' });
const seen: string[] = [];
let server: http.Server;
let port = 0;

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (req.url === '/mcp') {
      await answerMcp(req, res, 'ping', (mcp) =>
        mcp.registerTool('ping', { description: 'Answers pong.' }, async () => ({ content: [{ type: 'text', text: 'pong' }] })),
      );
      return;
    }
    if (req.url === '/moved') {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      return;
    }
    if (req.url === '/odd') {
      res.writeHead(999).end();
      return;
    }
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-seen': 'yes' });
      res.write('data: first\n\n');
      setTimeout(() => res.end('data: second\n\n'), 300).unref();
      return;
    }
    let body = '';
    for await (const chunk of req) body += chunk;
    res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, body, header: req.headers['x-test'] ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
  answers.clear();
});

describe('policyFetch', () => {
  it('refuses a name that resolves to a public address when checked and to loopback when the socket connects (DNS rebinding)', async () => {
    answers.set('rebind.test', ['93.184.216.34', '127.0.0.1']);
    const err = await policyFetch({})(`http://rebind.test:${port}/echo`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AddressNotAllowedError);
    expect((err as Error).message).toMatch(/"rebind\.test" resolves to 127\.0\.0\.1, a loopback address/);
    expect(seen).toEqual([]);
  }, 10_000);

  it.each([
    ['loopback', 'http://127.0.0.1:9/', /loopback/],
    ['IPv6 loopback', 'http://[::1]:9/', /loopback/],
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data/', /link-local/],
    ['10/8', 'http://10.0.0.1/', /private \(10\/8\)/],
    ['a name resolving to 10/8', 'http://intranet.test/', /"intranet\.test" resolves to 10\.1\.2\.3/],
    ['another scheme', 'file:///etc/passwd', /only http and https/],
  ])('refuses %s before connecting', async (_what, url, message) => {
    answers.set('intranet.test', ['10.1.2.3']);
    await expect(policyFetch({})(url)).rejects.toThrow(message);
  }, 10_000);

  it('sends method, headers and body where allowed, streams the answer, and hands redirects back unfollowed', async () => {
    const fetch = policyFetch({ allowHosts: ['127.0.0.1'] });
    const echo = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', headers: { 'x-test': 'yes' }, body: '{"q":1}' });
    expect(echo.status).toBe(201);
    expect(await echo.json()).toEqual({ method: 'POST', body: '{"q":1}', header: 'yes' });

    const stream = await fetch(`http://127.0.0.1:${port}/stream`);
    expect(stream.headers.get('x-seen')).toBe('yes');
    const reader = stream.body!.getReader();
    // The first event arrives while the server still holds the second one back.
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: first\n\n');
    await reader.cancel();

    const moved = await fetch(`http://127.0.0.1:${port}/moved`);
    expect(moved.status).toBe(302);
    expect(moved.headers.get('location')).toBe('http://169.254.169.254/latest/meta-data/');
    await expect(fetch(moved.headers.get('location')!)).rejects.toThrow(/link-local/);
  }, 10_000);

  it('rejects an answer no Response can carry instead of crashing', async () => {
    await expect(policyFetch({ allowPrivateNetworks: true })(`http://127.0.0.1:${port}/odd`)).rejects.toThrow(RangeError);
  }, 10_000);
});

describe('MCP servers under the outbound-address policy', () => {
  const deps = { logger, authority: ADMIN, builtin: {}, context: { db: undefined as never, agentId: 'a', runId: 'r', sessionId: null, logger }, runSubagent: async () => '', runChain: async () => '' };
  const mcp = (config: Record<string, unknown>) => resolveTools([{ type: 'mcp', name: 'srv', config }], deps);

  it.each([
    ['loopback', () => `http://127.0.0.1:${port}/mcp`, /127\.0\.0\.1 is a loopback address/],
    ['a name resolving to loopback', () => `http://localhost:${port}/mcp`, /"localhost" resolves to .* loopback/],
    ['cloud metadata', () => 'http://169.254.169.254/mcp', /link-local/],
  ])('leaves out a server on %s, with a warning, without connecting', async (_what, url, message) => {
    const resolved = await mcp({ url: url() });
    expect(resolved.tools).toEqual([]);
    expect(resolved.warnings).toHaveLength(1);
    expect(resolved.warnings[0]).toMatch(/^MCP server "srv" is unreachable: refused by the outbound-address policy: /);
    expect(resolved.warnings[0]).toMatch(message);
    expect(seen).toEqual([]);
  }, 10_000);

  it('refuses a server whose name rebinds to loopback between the check and the connection', async () => {
    // Public for the check before connecting and for the request's own check; loopback for the socket.
    answers.set('mcp.test', ['93.184.216.34', '93.184.216.34', '127.0.0.1']);
    const resolved = await mcp({ url: `http://mcp.test:${port}/mcp` });
    expect(resolved.tools).toEqual([]);
    expect(resolved.warnings[0]).toMatch(/MCP server "srv" is unreachable: .*"mcp\.test" resolves to 127\.0\.0\.1, a loopback address/);
    expect(seen).toEqual([]);
  }, 10_000);

  it.each([
    ['allowHosts', { allowHosts: ['127.0.0.1'] }],
    ['allowPrivateNetworks', { allowPrivateNetworks: true }],
  ])('connects when the entry allows it (%s) and calls its tools', async (_what, allow) => {
    const resolved = await mcp({ url: `http://127.0.0.1:${port}/mcp`, ...allow });
    try {
      expect(resolved.warnings).toEqual([]);
      expect(resolved.tools.map((t) => [t.name, t.toolType])).toEqual([['srv__ping', 'mcp']]);
      expect(await resolved.tools[0]!.run({}, new AbortController().signal)).toBe('pong');
    } finally {
      await resolved.close();
    }
  }, 15_000);
});
