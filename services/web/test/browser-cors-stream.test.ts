import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@agentry/testing';
import { browserTarget } from './browser-target.js';

/**
 * A browser app on another origin reading Agentry's streams with fetch (issue 38: streamed
 * answers once lacked the CORS header, so a browser could not read them). The app's page is served
 * on loopback (Chromium lets only loopback pages call loopback) under two origins, two ports of
 * one server: the first in `server.cors_origins`, the other not.
 */
const PASSWORD = 'cors-stream-password-0123';
const origins = { allowed: '', other: '' };
const servers: http.Server[] = [];
// Filled before the target's own beforeAll reads it (hooks run in the order they are registered).
const config: string[] = [];

beforeAll(async () => {
  for (const which of ['allowed', 'other'] as const) {
    const port = await freePort();
    const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    servers.push(server);
    origins[which] = `http://127.0.0.1:${port}`;
  }
  config.push('server:', `  cors_origins: ["${origins.allowed}"]`);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

const t = browserTarget({ name: 'cors-stream', users: { admin: PASSWORD }, config });

interface Read {
  status?: number;
  contentType?: string | null;
  text?: string;
  failed?: string;
}

/** Opens a blank page of `origin` and, from it, POSTs `body` to `path` and reads the stream to its end. */
async function readFrom(origin: string, path: string, body: unknown): Promise<Read> {
  await t.page.goto(`${origin}/app`);
  const login = await fetch(`${t.base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) });
  const { token } = (await login.json()) as { token: string };
  return t.page.evaluate(
    async ({ url, token, body }) => {
      try {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
        const reader = res.body!.getReader();
        const decoder = new TextDecoder();
        let text = '';
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
        return { status: res.status, contentType: res.headers.get('content-type'), text };
      } catch (err) {
        return { failed: String(err) };
      }
    },
    { url: `${t.base}/api/v1${path}`, token, body },
  );
}

describe('a browser page on another origin reads streams', () => {
  it('creates the agent', async () => {
    const made = await t.api('POST', '/agents', {
      ruleChain: { id: 'cors', name: 'Cors' },
      metadata: { nodes: [{ id: 'agent', type: 'ai/agent', name: 'agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    });
    expect(made.status, made.text).toBe(201);
  });

  it('a streamed chat completion from an allowed origin: read to [DONE]', async () => {
    t.fake.script({ text: ['Hello ', 'browser'] });
    const r = await readFrom(origins.allowed, '/chat/completions', { model: 'cors', messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(r.failed, t.problems.join('\n')).toBeUndefined();
    expect(r).toMatchObject({ status: 200, contentType: 'text/event-stream' });
    expect(r.text).toContain('"content":"Hello "');
    expect(r.text).toContain('"content":"browser"');
    expect(r.text!.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('a streamed Responses answer from an allowed origin: read to response.completed', async () => {
    t.fake.script({ text: ['Hi ', 'there'] });
    const r = await readFrom(origins.allowed, '/responses', { model: 'cors', input: 'hi', stream: true });
    expect(r.failed).toBeUndefined();
    expect(r.status).toBe(200);
    expect(r.text).toContain('event: response.output_text.delta');
    expect(r.text).toContain('event: response.completed');
  });

  it('another origin cannot read the answer: the browser refuses it', async () => {
    t.fake.script({ text: 'not for you' });
    const r = await readFrom(origins.other, '/chat/completions', { model: 'cors', messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(r.failed).toMatch(/TypeError|Failed to fetch/);
  });
});
