import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { ChainError, ChainRunner, KeyedLimiter, ScriptSandbox, createRuleMsg, type ChainContext, type RuleMsg } from '../src/index.js';
import { type ParsedChain, parseChain } from '@agentry/definitions';

/** The restApiCall node against a local HTTP server, and the outbound-address policy. */

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const seen: Seen[] = [];
let server: http.Server;
let port = 0;
let sandbox: ScriptSandbox;
/** Requests to /hold in progress now, and the most at once. */
let holding = 0;
let maxHolding = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (req.url?.startsWith('/slow')) {
        setTimeout(() => res.end('late'), 2000).unref();
        return;
      }
      if (req.url?.startsWith('/hold')) {
        maxHolding = Math.max(maxHolding, ++holding);
        setTimeout(() => {
          holding--;
          res.end('{"held":true}');
        }, 150).unref();
        return;
      }
      if (req.url?.startsWith('/broken')) {
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"broken"}');
        return;
      }
      if (req.url?.startsWith('/created')) {
        res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":7}');
        return;
      }
      if (req.url?.startsWith('/empty')) {
        res.writeHead(204).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, method: req.method }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  sandbox = new ScriptSandbox({ workers: 1 });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await sandbox.close();
});

const runner = new ChainRunner();

function context(http?: ChainContext['http']): ChainContext {
  return {
    logger: pino({ level: 'silent' }),
    signal: new AbortController().signal,
    sandbox,
    runChain: () => Promise.reject(new Error('no sub-chains here')),
    complete: () => Promise.reject(new Error('no model here')),
    runAgent: () => Promise.reject(new Error('no agent here')),
    ...(http ? { http } : {}),
  };
}

function restChain(configuration: Record<string, unknown>, failureEdge = false): ParsedChain {
  const loaded = parseChain({
    id: 'rest',
    dsl: {
      ruleChain: { id: 'rest', name: 'REST' },
      metadata: {
        nodes: [{ id: 'call', type: 'restApiCall', configuration }, { id: 'ok', type: 'end' }, { id: 'failed', type: 'end' }],
        connections: [{ fromId: 'call', toId: 'ok', type: 'Success' }, ...(failureEdge ? [{ fromId: 'call', toId: 'failed', type: 'Failure' }] : [])],
      },
    },
  });
  if (!loaded.ok) throw new Error(loaded.error);
  return loaded.chain;
}

async function call(configuration: Record<string, unknown>, msg: RuleMsg, policy: ChainContext['http'], failureEdge = false) {
  return runner.run(restChain(configuration, failureEdge), msg, context(policy));
}

async function refused(url: string, policy?: ChainContext['http']): Promise<string> {
  const err = await call({ restEndpointUrlPattern: url, requestMethod: 'GET' }, createRuleMsg(), policy).then(
    () => {
      throw new Error(`expected ${url} to be refused`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ChainError);
  return (err as Error).message;
}

const ALLOW = { allowPrivateNetworks: true };

describe('restApiCall against a local server (private networks allowed explicitly)', () => {
  it('sends templated URL and headers with the data as body; the response becomes the message', async () => {
    seen.length = 0;
    const msg = createRuleMsg({ data: { q: 'a b', n: 1 }, metadata: { id: '42', token: 'secret-token' } });
    const result = await call(
      {
        restEndpointUrlPattern: `http://127.0.0.1:${port}/items/\${metadata.id}?n=\${msg.n}`,
        headers: { Authorization: 'Bearer ${metadata.token}', 'X-Item': '${msg.q}' },
      },
      msg,
      ALLOW,
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/items/42?n=1', body: msg.data });
    expect(seen[0]?.headers).toMatchObject({ authorization: 'Bearer secret-token', 'x-item': 'a b', 'content-type': 'application/json' });
    expect(result.ends[0]?.nodeId).toBe('ok');
    expect(result.msg.data).toBe('{"ok":true,"method":"POST"}');
    expect(result.msg.metadata).toEqual({ id: '42', token: 'secret-token', status: '200 OK', statusCode: '200' });
  });

  it('sends no body for GET or withoutRequestBody', async () => {
    seen.length = 0;
    await call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/get`, requestMethod: 'GET' }, createRuleMsg({ data: 'ignored' }), ALLOW);
    await call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/put`, requestMethod: 'PUT', withoutRequestBody: true }, createRuleMsg({ data: 'ignored' }), ALLOW);
    expect(seen.map((s) => [s.method, s.body, s.headers['content-type']])).toEqual([
      ['GET', '', undefined],
      ['PUT', '', undefined],
    ]);
  });

  it('allows hosts named in allowHosts, by name or address', async () => {
    const byAddress = await call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/x`, requestMethod: 'GET' }, createRuleMsg(), { allowHosts: ['127.0.0.1'] });
    expect(byAddress.msg.metadata.statusCode).toBe('200');
    const byName = await call({ restEndpointUrlPattern: `http://localhost:${port}/x`, requestMethod: 'GET' }, createRuleMsg(), { allowHosts: ['localhost'] });
    expect(byName.msg.metadata.statusCode).toBe('200');
  });

  it('routes any answer but 200 along Failure with the data unchanged and the body in errorBody, or fails the run', async () => {
    const url = `http://127.0.0.1:${port}/broken?key=do-not-show`;
    const result = await call({ restEndpointUrlPattern: url }, createRuleMsg({ data: '{}' }), ALLOW, true);
    expect(result.ends[0]?.nodeId).toBe('failed');
    expect(result.msg.data).toBe('{}');
    expect(result.msg.metadata).toMatchObject({ status: '500 Internal Server Error', statusCode: '500', errorBody: '{"error":"broken"}' });
    expect(result.msg.metadata.error).toBe(`POST http://127.0.0.1:${port}/broken answered 500 Internal Server Error`);

    const err = await call({ restEndpointUrlPattern: url }, createRuleMsg({ data: '{}' }), ALLOW).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChainError);
    expect((err as Error).message).toBe(`chain "rest", node "call" (restApiCall): POST http://127.0.0.1:${port}/broken answered 500 Internal Server Error`);
  });

  it('takes only 200 as Success, as RuleGo: 201 and 204 go along Failure', async () => {
    for (const [path, status, body] of [['created', '201 Created', '{"id":7}'], ['empty', '204 No Content', '']]) {
      const result = await call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/${path}` }, createRuleMsg({ data: 'sent' }), ALLOW, true);
      expect(result.ends[0]?.nodeId, path).toBe('failed');
      expect(result.msg.data).toBe('sent');
      expect(result.msg.metadata).toMatchObject({ status, errorBody: body });
    }
  });

  it('gives up after readTimeoutMs, with the reason in errorBody', async () => {
    const result = await call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/slow`, readTimeoutMs: 150 }, createRuleMsg({ data: 'sent' }), ALLOW, true);
    expect(result.ends[0]?.nodeId).toBe('failed');
    expect(result.msg.data).toBe('sent');
    expect(result.msg.metadata.error).toBe(`POST http://127.0.0.1:${port}/slow timed out after 150 ms`);
    expect(result.msg.metadata.errorBody).toBe(`POST http://127.0.0.1:${port}/slow timed out after 150 ms`);
  });
});

describe('restApiCall outbound-address policy (default: public addresses only)', () => {
  it('refuses loopback, private, link-local, unique-local and unspecified addresses', async () => {
    seen.length = 0;
    expect(await refused(`http://127.0.0.1:${port}/`)).toMatch(/127\.0\.0\.1 is a loopback address/);
    expect(await refused('http://10.1.2.3/')).toMatch(/10\.1\.2\.3 is a private \(10\/8\) address/);
    expect(await refused('http://169.254.169.254/latest/meta-data/')).toMatch(/169\.254\.169\.254 is a link-local address/);
    expect(await refused('http://192.168.0.10/')).toMatch(/private/);
    expect(await refused('http://0.0.0.0/')).toMatch(/unspecified/);
    expect(await refused(`http://[::1]:${port}/`)).toMatch(/::1 is a loopback address/);
    expect(await refused('http://[fd00::1]/')).toMatch(/unique-local/);
    expect(await refused('http://[fe80::1]/')).toMatch(/link-local/);
    expect(await refused(`http://[::ffff:127.0.0.1]:${port}/`)).toMatch(/IPv4-mapped loopback/);
    expect(seen).toHaveLength(0);
  });

  it('refuses a host name that resolves to a loopback address', async () => {
    expect(await refused(`http://localhost:${port}/`)).toMatch(/"localhost" resolves to (127\.0\.0\.1|::1), a loopback address/);
    expect(seen).toHaveLength(0);
  });

  it('refuses other schemes, and allowHosts does not open other hosts', async () => {
    expect(await refused('file:///etc/passwd')).toMatch(/only http and https URLs are allowed, not file/);
    expect(await refused(`http://127.0.0.1:${port}/`, { allowHosts: ['example.com'] })).toMatch(/loopback/);
  });

  it("opens through the node's own allowPrivateNetworks / allowHosts, as http_fetch's config does", async () => {
    const get = { restEndpointUrlPattern: `http://127.0.0.1:${port}/own`, requestMethod: 'GET' };
    for (const own of [{ allowHosts: ['127.0.0.1'] }, { allowPrivateNetworks: true }]) {
      const out = await call({ ...get, ...own }, createRuleMsg(), undefined);
      expect(out.msg.metadata.statusCode).toBe('200');
    }
    expect(await refused(`http://localhost:${port}/`, undefined)).toMatch(/loopback/);
    const other = await call({ ...get, allowHosts: ['example.com'] }, createRuleMsg(), undefined).then(
      () => 'reached',
      (e: unknown) => (e as Error).message,
    );
    expect(other).toMatch(/loopback/);
  });

  it('maxParallelRequestsCount (RuleGo\'s per-node, per-host connection limit): calls beyond it wait for a slot; 0 is unlimited', async () => {
    const callHold = (max: number) => call({ restEndpointUrlPattern: `http://127.0.0.1:${port}/hold`, maxParallelRequestsCount: max }, createRuleMsg({ data: {} }), { allowPrivateNetworks: true });
    maxHolding = 0;
    // Each call parses the chain afresh, as runs do: the limit is the node's (chain id, node id), not an object's.
    const limited = await Promise.all([callHold(1), callHold(1), callHold(1)]);
    expect(limited.map((r) => r.msg.data)).toEqual(['{"held":true}', '{"held":true}', '{"held":true}']);
    expect(maxHolding).toBe(1);
    maxHolding = 0;
    await Promise.all([callHold(0), callHold(0), callHold(0)]);
    expect(maxHolding).toBe(3);
  });
});

describe('KeyedLimiter (restApiCall maxParallelRequestsCount)', () => {
  it('hands a freed slot to the next waiter, times a wait out, stops on abort and forgets an idle key', async () => {
    const limiter = new KeyedLimiter();
    const live = new AbortController().signal;
    const first = await limiter.acquire('k', 1, live, 1000);
    const second = limiter.acquire('k', 1, live, 1000);
    await expect(limiter.acquire('k', 1, live, 30)).rejects.toThrow('timed out after 30 ms waiting for one of 1 parallel requests to finish');
    const aborted = new AbortController();
    const third = limiter.acquire('k', 1, aborted.signal, 1000);
    aborted.abort();
    await expect(third).rejects.toThrow(/cancelled while waiting/);
    first();
    const releaseSecond = await second;
    expect(limiter.active('k')).toBe(1);
    releaseSecond();
    releaseSecond();
    expect(limiter.active('k')).toBe(0);
  });
});
