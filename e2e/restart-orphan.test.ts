import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnService, startFakeModel, waitFor, type FakeModel, type SpawnedService } from '@agentry/testing';
import { agentDsl } from './chat-conformance.js';

/**
 * Issue 20 finding 11 as it was found: embedded mode, a chat in a session waiting behind another
 * turn, the server killed with SIGKILL and started again. The runs come back through the sweep;
 * their clients are gone, so they must be cancelled, not answered into the session, and the
 * user's retry must be the only turn. A chat outside a session, which its insert claimed
 * (running, attempt 1) and which was at the provider, comes back the same way.
 */
const running: SpawnedService[] = [];
let cwd: string;
let fake: FakeModel;

beforeAll(async () => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-restart-orphan-'));
  fake = await startFakeModel();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
});
afterAll(async () => {
  await fake?.close();
  fs.rmSync(cwd, { recursive: true, force: true });
});

describe('embedded mode killed with chats queued', () => {
  it('after the restart those chats are cancelled, never answered; the retry is the only turn', async () => {
    const port = await freePort();
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'server: {host: 127.0.0.1, port: ' + String(port) + '}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        // The sweep takes runs left behind after a second, not after the default 30 s.
        'worker: {stall_timeout_ms: 1000}',
        'reliability: {run_sweep_ms: 500, listener_check_ms: 100}',
      ].join('\n'),
    );
    const start = async () => {
      const svc = spawnService('services/standalone/src/main.ts', { cwd, env: {} });
      running.push(svc);
      // The first start runs initdb (a child process: 13-15 s at load 13, 34 s seen at load 14).
      await svc.waitForLine(/gateway listening/, 120_000);
      return svc;
    };
    const base = `http://127.0.0.1:${port}/api/v1`;
    const chat = (content: string, signal?: AbortSignal, inSession = true) =>
      fetch(`${base}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'helper', ...(inSession ? { sessionId: 'the-user' } : {}), messages: [{ role: 'user', content }] }),
        ...(signal ? { signal } : {}),
      });

    let svc = await start();
    expect((await fetch(`${base}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl('helper')) })).status).toBe(201);
    // The first turn is at the provider (which never answers), the second waits for its turn;
    // the chat outside the session is at the provider too.
    fake.script({ hang: true }, { hang: true });
    const gone = new AbortController();
    void chat('first question', gone.signal).catch(() => undefined);
    await fake.waitForRequest(1, 10_000);
    void chat('second question', gone.signal).catch(() => undefined);
    void chat('a question alone', gone.signal, false).catch(() => undefined);
    await fake.waitForRequest(2, 10_000);
    await waitForLines(svc, /"msg":"run enqueued"/, 3);
    await svc.stop('SIGKILL');
    running.splice(running.indexOf(svc), 1);
    gone.abort();

    svc = await start();
    const sessions = (await (await fetch(`${base}/sessions?agentId=helper`)).json()) as { data: Array<{ id: string }> };
    expect(sessions.data).toHaveLength(1);
    const messages = async () => (await (await fetch(`${base}/sessions/${sessions.data[0]!.id}/messages`)).json()) as Array<{ role: string; content: string }>;
    // Until the three runs are dealt with: cancelled (logged), or answered.
    const cancelled = () => svc.output().split('\n').filter((l) => l.includes('its client left before it started')).length;
    await waitFor(async () => cancelled() === 3 || (await messages()).length > 0, 30_000, 100);
    expect(await messages()).toEqual([]);
    expect(fake.requests).toHaveLength(2);

    // The user asks again: one answer, one turn.
    const retry = await chat('second question');
    expect(retry.status).toBe(200);
    expect((await messages()).map((m) => [m.role, m.content])).toEqual([
      ['user', 'second question'],
      ['assistant', expect.stringContaining('second question')],
    ]);
  }, 300_000);
});

/** Waits until `count` lines of the service's output match. */
async function waitForLines(svc: SpawnedService, pattern: RegExp, count: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (svc.output().split('\n').filter((l) => pattern.test(l)).length < count) {
    if (Date.now() > deadline) throw new Error(`fewer than ${count} lines match ${pattern}:\n${svc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
