import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AgentryClient, ApiError, ConnectionError, StreamError, chunkText, chunkToolEvent, normaliseUrl, parseWarnings, type ChatChunk, type Purpose } from '@agentry/client';
import { freePort } from '@agentry/testing';

/**
 * The client against a small HTTP server that records what it gets and answers what each test
 * sets: request shapes, credentials per purpose, error mapping, the 401 retry, and streaming.
 */
interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void | Promise<void>;

let server: http.Server;
let url: string;
let seen: Seen[] = [];
let handler: Handler;

const json = (res: http.ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify(value));
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      void handler(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  seen = [];
  handler = (_req, res) => json(res, 200, { ok: true });
});

describe('requests', () => {
  it('builds paths, queries and bodies under /api/v1 (a base URL ending in /api/v1 works too)', async () => {
    expect(normaliseUrl('http://h:1/api/v1/')).toBe('http://h:1');
    expect(normaliseUrl('https://h/prefix/')).toBe('https://h/prefix');
    expect(() => normaliseUrl('ftp://h')).toThrow(/not an http/);

    const c = new AgentryClient({ url: `${url}/api/v1` });
    await c.workspace.rename('my agent', 'a b.md', '/c.md');
    await c.skills.list({ scope: 'local', agentId: 'x', page: 2 });
    await c.cron.toggle('job/1', true);
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'PATCH /api/v1/agents/my%20agent/workspace/rename?path=a+b.md',
      'GET /api/v1/skills?scope=local&agentId=x&page=2',
      'PUT /api/v1/cron/job%2F1/toggle',
    ]);
    expect(JSON.parse(seen[0]!.body.toString())).toEqual({ newName: '/c.md' });
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen[2]!.body.toString())).toEqual({ disabled: true });
  });

  it('sends bytes as base64 and uploads archives as multipart with their fields', async () => {
    const c = new AgentryClient({ url });
    await c.workspace.write('a', 'f.bin', new Uint8Array([0, 255, 1]));
    expect(JSON.parse(seen[0]!.body.toString())).toEqual({ content: 'AP8B', encoding: 'base64' });
    await c.skills.upload(new Uint8Array([80, 75, 3, 4]), { scope: 'local', agentId: 'a', filename: 's.zip' });
    const upload = seen[1]!;
    expect(upload.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const text = upload.body.toString('latin1');
    expect(text).toMatch(/name="scope"\r\n\r\nlocal\r\n/);
    expect(text).toMatch(/name="agentId"\r\n\r\na\r\n/);
    expect(text).toMatch(/name="file"; filename="s.zip"\r\nContent-Type: application\/zip\r\n\r\nPK\x03\x04\r\n/);
  });

  it('picks the token by purpose', async () => {
    const purposes: Purpose[] = [];
    const c = new AgentryClient({
      url,
      token: (p) => {
        purposes.push(p);
        return p === 'chat' ? 'sk-key' : p === 'public' ? 'never' : 'jwt.token.x';
      },
    });
    await c.models();
    await c.agents.list();
    await c.auth.apiKey();
    await c.auth.login('u', 'p');
    await c.health();
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer sk-key', 'Bearer jwt.token.x', 'Bearer jwt.token.x', undefined, undefined]);
    expect(purposes).toEqual(['chat', 'management', 'account']);
    expect(seen[4]!.url).toBe('/health');
  });
});

describe('errors', () => {
  it('turns {error} answers into ApiError with status, message and request id', async () => {
    handler = (_req, res) => json(res, 404, { error: 'Not found: agent "x"' }, { 'x-request-id': 'req-9' });
    const err = await new AgentryClient({ url }).agents.get('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 404, message: 'Not found: agent "x"', requestId: 'req-9', body: { error: 'Not found: agent "x"' } });

    handler = (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<h1>Bad Gateway</h1>');
    };
    await expect(new AgentryClient({ url }).agents.list()).rejects.toMatchObject({ status: 502, message: 'HTTP 502 Bad Gateway: <h1>Bad Gateway</h1>' });
  });

  it('reports an unreachable server as ConnectionError', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const err = await new AgentryClient({ url: closed }).agents.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as Error).message).toBe(`cannot reach ${closed} (connection refused)`);
  });

  it('retries once with the token onUnauthorized answers, and not again', async () => {
    handler = (req, res) => (req.headers.authorization === 'Bearer fresh' ? json(res, 200, { data: [], total: 0, page: 1, size: 20 }) : json(res, 401, { error: 'token expired' }));
    const calls: string[] = [];
    const c = new AgentryClient({
      url,
      token: 'stale',
      onUnauthorized: async (purpose, error, token) => {
        calls.push(`${purpose}:${error.message}:${token}`);
        return 'fresh';
      },
    });
    expect(await c.agents.list()).toEqual({ data: [], total: 0, page: 1, size: 20 });
    expect(calls).toEqual(['management:token expired:stale']);
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer stale', 'Bearer fresh']);

    handler = (_req, res) => json(res, 401, { error: 'nope' });
    await expect(c.agents.list()).rejects.toMatchObject({ status: 401, message: 'nope' });
    const giveUp = new AgentryClient({ url, token: 't', onUnauthorized: async () => undefined });
    await expect(giveUp.agents.list()).rejects.toMatchObject({ status: 401 });
  });
});

describe('chat', () => {
  it('streams chunks as the server writes them, with agui tool events', async () => {
    let sendNext!: () => void;
    handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const write = (delta: unknown) => res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'a', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
      write({ role: 'assistant', content: '' });
      write({ tool_calls: [{ type: 'TOOL_CALL_START', toolCallId: 't1', toolCallName: 'read', arguments: '{}', toolType: 'builtin' }] });
      write({ content: 'first' });
      // The rest only once the client has seen "first": proof that it reads incrementally.
      await new Promise<void>((r) => (sendNext = r));
      write({ content: ' second' });
      res.end('data: [DONE]\n\n');
    };
    const c = new AgentryClient({ url });
    const stream = await c.chat.stream({ model: 'a', messages: [{ role: 'user', content: 'hi' }], sessionId: 's' }, { agui: true });
    const texts: string[] = [];
    const tools: string[] = [];
    for await (const chunk of stream) {
      const tool = chunkToolEvent(chunk);
      if (tool) tools.push(`${tool.type}:${tool.toolCallName}`);
      const t = chunkText(chunk);
      if (t) texts.push(t);
      if (t === 'first') sendNext();
    }
    expect(texts).toEqual(['first', ' second']);
    expect(tools).toEqual(['TOOL_CALL_START:read']);
    expect(seen[0]!.headers['x-stream-protocol']).toBe('agui');
    expect(JSON.parse(seen[0]!.body.toString())).toEqual({ model: 'a', messages: [{ role: 'user', content: 'hi' }], sessionId: 's', stream: true });
  });

  it('throws the HTTP error before any chunk', async () => {
    handler = (_req, res) => json(res, 404, { error: 'Not found: agent "ghost"' });
    await expect(new AgentryClient({ url }).chat.stream({ model: 'ghost', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
  });
});

describe('chat stream resume', () => {
  const RUN = 'ab'.repeat(16);
  const chunkOf = (delta: unknown, finish: string | null = null) =>
    JSON.stringify({ id: `chatcmpl-${RUN}`, object: 'chat.completion.chunk', created: 1, model: 'a', choices: [{ index: 0, delta, finish_reason: finish }] });
  const sse = (res: http.ServerResponse, delta: unknown, id?: number, finish: string | null = null) =>
    res.write(`${id === undefined ? '' : `id: ${RUN}:${id}\n`}data: ${chunkOf(delta, finish)}\n\n`);
  const open = (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
  };
  // Later, so that what was written goes out first.
  const cut = (res: http.ServerResponse) => setTimeout(() => res.socket?.destroy(), 20);
  const ask = (c: AgentryClient, opts: Parameters<AgentryClient['chat']['stream']>[1] = {}) =>
    c.chat.stream({ model: 'a', messages: [{ role: 'user', content: 'hi' }] }, { resume: { delayMs: 5 }, ...opts });
  async function collect(stream: AsyncGenerator<ChatChunk>): Promise<{ text: string; roles: number; finishes: number }> {
    let text = '';
    let roles = 0;
    let finishes = 0;
    for await (const chunk of stream) {
      text += chunkText(chunk);
      if (chunk.choices[0]?.delta.role) roles++;
      if (chunk.choices[0]?.finish_reason) finishes++;
    }
    return { text, roles, finishes };
  }

  it('goes on over GET /runs/{id}/events after the last id when the connection drops: every chunk once', async () => {
    handler = (req, res) => {
      open(res);
      if (req.method === 'POST') {
        sse(res, { role: 'assistant', content: '' });
        sse(res, { content: 'one ' }, 0);
        sse(res, { content: 'two ' }, 1);
        // Half an event, then the connection is gone.
        res.write(`id: ${RUN}:2\ndata: {"id":`);
        cut(res);
        return;
      }
      sse(res, { content: 'three' }, 2);
      sse(res, { content: '' }, undefined, 'stop');
      res.end(`id: ${RUN}:3\ndata: [DONE]\n\n`);
    };
    const resumes: number[] = [];
    const got = await collect(await ask(new AgentryClient({ url, token: 'key' }), { agui: true, onResume: (n) => resumes.push(n) }));
    expect(got).toEqual({ text: 'one two three', roles: 1, finishes: 1 });
    expect(resumes).toEqual([1]);
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /api/v1/chat/completions', `GET /api/v1/runs/${RUN}/events`]);
    expect(seen[1]!.headers).toMatchObject({ 'last-event-id': `${RUN}:1`, 'x-stream-protocol': 'agui', authorization: 'Bearer key' });
    // It asked for the run to outlive a dropped connection: otherwise the server cancels it at once.
    expect(seen[0]!.headers['x-agentry-resumable']).toBe('true');
  });

  it('resumes from the start when no id came yet (the role chunk once), and a body that ends without [DONE] is a drop too', async () => {
    handler = (req, res) => {
      open(res);
      if (req.method === 'POST') {
        sse(res, { role: 'assistant', content: '' });
        return void res.end();
      }
      sse(res, { role: 'assistant', content: '' });
      sse(res, { content: 'all' }, 0);
      sse(res, { content: '' }, undefined, 'stop');
      res.end(`id: ${RUN}:1\ndata: [DONE]\n\n`);
    };
    const got = await collect(await ask(new AgentryClient({ url }), { agui: false }));
    expect(got).toEqual({ text: 'all', roles: 1, finishes: 1 });
    expect(seen[1]!.url).toBe(`/api/v1/runs/${RUN}/events`);
    expect(seen[1]!.headers['last-event-id']).toBeUndefined();
  });

  it('skips the chunks it had after the last id (finish, usage), and asks for usage when the request did', async () => {
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
    handler = (req, res) => {
      open(res);
      if (req.method === 'POST') sse(res, { role: 'assistant', content: '' });
      if (req.method === 'POST') sse(res, { content: 'x' }, 0);
      sse(res, { content: '' }, undefined, 'stop');
      res.write(`data: ${JSON.stringify({ id: `chatcmpl-${RUN}`, object: 'chat.completion.chunk', created: 1, model: 'a', choices: [], usage })}\n\n`);
      if (req.method === 'POST') return void cut(res);
      res.end(`id: ${RUN}:1\ndata: [DONE]\n\n`);
    };
    const c = new AgentryClient({ url });
    const chunks: ChatChunk[] = [];
    const stream = await c.chat.stream({ model: 'a', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } }, { resume: { delayMs: 5 } });
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((ch) => (ch.usage ? 'usage' : (ch.choices[0]!.finish_reason ?? chunkText(ch)) || 'role'))).toEqual(['role', 'x', 'stop', 'usage']);
    expect(seen[1]!.url).toBe(`/api/v1/runs/${RUN}/events?include_usage=true`);
    expect(seen[1]!.headers['last-event-id']).toBe(`${RUN}:0`);
  });

  it('resumes as often as the connection drops while the answer moves on; reconnections that bring nothing end after the tries', async () => {
    handler = (req, res) => {
      open(res);
      const n = seen.length - 1;
      sse(res, { content: ['a', 'b', 'c'][n] }, n);
      if (n < 2) return void cut(res);
      sse(res, { content: '' }, undefined, 'stop');
      res.end(`id: ${RUN}:3\ndata: [DONE]\n\n`);
    };
    const resumes: number[] = [];
    const got = await collect(await ask(new AgentryClient({ url }), { onResume: (n) => resumes.push(n), resume: { delayMs: 5, tries: 2 } }));
    expect(got).toEqual({ text: 'abc', roles: 0, finishes: 1 });
    expect(resumes).toEqual([1, 2]);
    expect(seen.map((s) => s.headers['last-event-id'])).toEqual([undefined, `${RUN}:0`, `${RUN}:1`]);

    // Every reconnection is answered, then cut before anything new: counted as failed tries, not a loop.
    seen = [];
    handler = (req, res) => {
      open(res);
      if (req.method === 'POST') sse(res, { content: 'a' }, 0);
      cut(res);
    };
    const stuck = await collect(await ask(new AgentryClient({ url }), { resume: { delayMs: 5, tries: 3 } })).catch((e: unknown) => e);
    expect(stuck).toMatchObject({ name: 'StreamError', message: 'the connection dropped and the stream could not be resumed: it dropped again each time' });
    expect(seen.filter((s) => s.method === 'GET')).toHaveLength(3);
  });

  it('ends with a sentence when the run cannot be resumed (410), and after the tries when the server stays away', async () => {
    handler = (req, res) => {
      if (req.method === 'GET') return json(res, 410, { error: `the events of run "${RUN}" after 0 are no longer kept` });
      open(res);
      sse(res, { content: 'x' }, 0);
      cut(res);
    };
    const gone = await collect(await ask(new AgentryClient({ url }))).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(StreamError);
    expect(gone).toMatchObject({ status: 410, message: `the connection dropped and the stream could not be resumed: the events of run "${RUN}" after 0 are no longer kept` });

    seen = [];
    handler = (req, res) => {
      if (req.method === 'GET') return void res.socket!.destroy();
      open(res);
      sse(res, { content: 'x' }, 0);
      cut(res);
    };
    const away = await collect(await ask(new AgentryClient({ url }), { resume: { delayMs: 5, tries: 3 } })).catch((e: unknown) => e);
    expect(away).toBeInstanceOf(StreamError);
    expect((away as Error).message).toMatch(/^the connection dropped and the stream could not be resumed: cannot reach http:\/\/127\.0\.0\.1:\d+ \(/);
    expect(seen.filter((s) => s.method === 'GET')).toHaveLength(3);
  });

  it('does not resume after an {error} event, on the caller\'s abort, or when told not to', async () => {
    handler = (_req, res) => {
      open(res);
      sse(res, { content: 'x' }, 0);
      res.end(`id: ${RUN}:1\ndata: ${JSON.stringify({ error: { message: 'provider broke', code: 502 } })}\n\n`);
    };
    await expect(collect(await ask(new AgentryClient({ url })))).rejects.toMatchObject({ name: 'StreamError', message: 'provider broke', status: 502 });
    expect(seen).toHaveLength(1);

    // The caller's abort is a stop, not a drop: no resume, and the run is cancelled on the
    // server at once (before the abort reaches the caller) rather than left to the resume grace.
    seen = [];
    handler = (req, res) => {
      if (req.url!.endsWith('/cancel')) return json(res, 200, { runId: RUN, status: 'cancelled' });
      open(res);
      sse(res, { content: 'x' }, 0);
    };
    const abort = new AbortController();
    const stream = await ask(new AgentryClient({ url }), { signal: abort.signal });
    const first = await stream.next();
    expect(chunkText(first.value as ChatChunk)).toBe('x');
    abort.abort();
    await expect(stream.next()).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /api/v1/chat/completions', `POST /api/v1/runs/${RUN}/cancel`]);

    seen = [];
    handler = (_req, res) => {
      open(res);
      sse(res, { content: 'x' }, 0);
      cut(res);
    };
    const refused = collect(await ask(new AgentryClient({ url }), { resume: false }));
    await expect(refused).rejects.toMatchObject({ name: 'StreamError', message: expect.stringMatching(/^the stream broke before it was complete/) });
    expect(seen).toHaveLength(1);
    // A client that will not resume does not ask the server to keep the run.
    expect(seen[0]!.headers['x-agentry-resumable']).toBeUndefined();
  });
});

describe('in a browser', () => {
  it('calls fetch with no receiver: a browser fetch called as a method of the client throws "Illegal invocation"', async () => {
    const receivers: unknown[] = [];
    const fetch = function (this: unknown) {
      receivers.push(this);
      return Promise.resolve(new Response('OK', { status: 200, headers: { 'content-type': 'text/plain' } }));
    } as unknown as typeof globalThis.fetch;
    expect(await new AgentryClient({ url: 'http://ui.invalid', fetch }).health()).toBe('OK');
    expect(receivers).toEqual([undefined]);
  });
});

describe('Warning headers', () => {
  it('reads each warn-text of a joined header, commas and escaped quotes inside the text included', () => {
    expect(parseWarnings('299 - "unknown field \\"a, b\\" (did you mean x?)", 299 - "second \\\\ one"')).toEqual(['unknown field "a, b" (did you mean x?)', 'second \\ one']);
    expect(parseWarnings('no warning here')).toEqual([]);
  });
});
