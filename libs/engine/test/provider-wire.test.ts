import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createMemoryBus, type Bus } from '@agentry/bus';
import { insertProvider, type DbHandle } from '@agentry/db';
import { Sealer } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { ModelProviders, type ModelEvent } from '../src/index.js';
import { SseParser, type SseMessage } from '../src/models/http.js';

/**
 * The provider client's own wire handling (http.ts): event-stream parsing at every chunk seam, and
 * what a provider may send that the fake model never does (error events, non-JSON events, text
 * after [DONE], plain-text error bodies), answered by a raw node:http server.
 */

describe('SseParser', () => {
  const stream = ': keep-alive\r\ndata: {"a":1}\r\n\r\nevent: note\ndata: line one\ndata: line two\n\nid: 7\nretry: 10\ndata:no-space\n\ndata: [DONE]\n\n';
  const expected: SseMessage[] = [
    { event: null, data: '{"a":1}' },
    { event: 'note', data: 'line one\nline two' },
    { event: null, data: 'no-space' },
    { event: null, data: '[DONE]' },
  ];

  it('answers the same messages wherever the chunks split the stream', () => {
    for (let i = 0; i <= stream.length; i++) {
      for (const j of [i, Math.min(stream.length, i + 1), Math.min(stream.length, i + 7)]) {
        const p = new SseParser();
        const out = [...p.push(stream.slice(0, i)), ...p.push(stream.slice(i, j)), ...p.push(stream.slice(j)), ...p.end()];
        expect(out, `split at ${i}/${j}`).toEqual(expected);
      }
    }
  });

  it('completes a last event that has no blank line (or no newline) after it', () => {
    const p = new SseParser();
    expect(p.push('data: x\n\ndata: tail')).toEqual([{ event: null, data: 'x' }]);
    expect(p.end()).toEqual([{ event: null, data: 'tail' }]);
  });

  it('refuses an event that never ends (a hostile provider cannot fill the memory)', () => {
    const p = new SseParser();
    const mib = 'x'.repeat(1024 * 1024);
    expect(() => {
      p.push('data: ');
      for (let i = 0; i < 17; i++) p.push(mib);
    }).toThrow(/over 16 MiB/);
    const lines = new SseParser();
    expect(() => {
      for (let i = 0; i < 17; i++) lines.push(`data: ${mib}\n`);
    }).toThrow(/over 16 MiB/);
  });
});

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

describe('ModelProviders against a raw provider', () => {
  const secrets = new Sealer('test-master-key-0123456789-abcdefghij');
  const logger = pino({ level: 'silent' });
  let handle: DbHandle;
  let bus: Bus;
  let server: http.Server;
  const handlers: Handler[] = [];
  const seen: Array<{ url: string; headers: http.IncomingHttpHeaders; body: unknown }> = [];
  let providers: ModelProviders;

  beforeAll(async () => {
    handle = await createTestPglite();
    bus = createMemoryBus({ logger });
    server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push({ url: req.url ?? '', headers: req.headers, body: JSON.parse(body) });
        const h = handlers.shift();
        if (h) h(req, res);
        else res.writeHead(500).end('no handler');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
    await insertProvider(handle.db, { id: 'raw', name: 'raw', baseUrl: base, model: 'm', models: [], apiKeySealed: secrets.seal('sk-raw-secret'), fileHmac: null });
    providers = new ModelProviders({ db: handle.db, secrets, config: () => ({ models: { default_provider: 'raw' } }), bus, logger, timeouts: { backoffMs: 5, retries: 1 } });
  });

  afterEach(() => {
    handlers.length = 0;
    seen.length = 0;
  });

  afterAll(async () => {
    await providers?.close();
    await new Promise((r) => server?.close(r));
    await bus?.close();
    await handle?.close();
  });

  const sse = (...events: string[]): Handler => (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events) res.write(e);
    res.end();
  };
  const chunk = (content: string, finish: string | null = null) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;

  async function settle(): Promise<{ events: ModelEvent[]; error: Error | undefined }> {
    const events: ModelEvent[] = [];
    try {
      for await (const ev of providers.stream({ messages: [{ role: 'user', content: 'hi' }], signal: new AbortController().signal })) events.push(ev);
      return { events, error: undefined };
    } catch (err) {
      return { events, error: err as Error };
    }
  }
  const text = (events: ModelEvent[]) => events.flatMap((e) => (e.type === 'text' ? [e.text] : [])).join('');

  it('posts to <base>/chat/completions with the key as a Bearer and a streamed body', async () => {
    handlers.push(sse(chunk('ok', 'stop'), 'data: [DONE]\n\n'));
    const { events, error } = await settle();
    expect(error).toBeUndefined();
    expect(text(events)).toBe('ok');
    expect(seen[0]).toMatchObject({ url: '/v1/chat/completions', headers: { authorization: 'Bearer sk-raw-secret', 'content-type': 'application/json' } });
    expect(seen[0]?.body).toMatchObject({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
  });

  it('ignores what comes after [DONE]', async () => {
    handlers.push(sse(chunk('one '), chunk('two', 'stop'), 'data: [DONE]\n\n', chunk(' three')));
    const { events, error } = await settle();
    expect(error).toBeUndefined();
    expect(text(events)).toBe('one two');
  });

  it("ends with the provider's words when it reports an error inside the stream, without retrying", async () => {
    handlers.push(sse(`data: ${JSON.stringify({ error: { message: 'quota exhausted for sk-raw-secret', type: 'server_error' } })}\n\n`));
    const { error } = await settle();
    expect(error?.message).toBe('Upstream failure: provider "raw" (model m): the provider reported an error: quota exhausted for [redacted]');
    expect(seen).toHaveLength(1);
  });

  it('retries an answer whose first event is not JSON; after text, the break is thrown', async () => {
    handlers.push(sse('data: <html>oops\n\n'), sse(chunk('fine', 'stop'), 'data: [DONE]\n\n'));
    const first = await settle();
    expect(first.error).toBeUndefined();
    expect(text(first.events)).toBe('fine');
    expect(seen).toHaveLength(2);

    handlers.push(sse(chunk('half '), 'data: {not json\n\n'));
    const second = await settle();
    expect(text(second.events)).toBe('half ');
    expect(second.error?.message).toBe(
      'Upstream failure: provider "raw" (model m): the answer broke off after it had started: the provider sent an event that is not JSON: {not json',
    );
  });

  it('reads a plain-text error body and honours Retry-After', async () => {
    handlers.push(
      (_req, res) => res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '0' }).end('upstream busy\n'),
      (_req, res) => res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'bad gateway' })),
    );
    const { error } = await settle();
    expect(error?.message).toBe('Upstream failure: provider "raw" (model m): HTTP 502: {"detail":"bad gateway"} (2 attempts)');
    expect(seen).toHaveLength(2);
  });

  it('cuts a long error body short', async () => {
    handlers.push((_req, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('e'.repeat(1024 * 1024));
    });
    const { error } = await settle();
    expect(error?.message).toMatch(/^Upstream failure: provider "raw" \(model m\): HTTP 400: e{290}\.\.\.$/);
  });
});
