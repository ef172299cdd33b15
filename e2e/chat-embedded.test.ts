import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { getRun } from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeModel, type FakeModel } from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { API_KEY, PROVIDER_KEY, agentDeletionConformance, agentDsl, chatConformance, requestTimeoutConformance, sessionConformance, skillsConformance, type ChatTarget } from './chat-conformance.js';

/** The conformance suite against embedded mode: one process, PGlite, the in-process bus. */
describe('chat completions, embedded mode', () => {
  let runtime: Runtime;
  let fake: FakeModel;
  let target: ChatTarget;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-chat-'));

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'server: {host: 127.0.0.1, port: 0, request_timeout_ms: 1000}',
        'reliability: {relay_check_ms: 1000}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {name: Conformance, api_key: "${API_KEY}"}}}}`,
      ].join('\n'),
    );
    runtime = await bootstrap({
      service: 'standalone',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'chat-embedded-master-key-0123456789' },
      cwd,
      logDestination: { write: () => {} },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    const { port } = await startStandalone(runtime);
    const baseURL = `http://127.0.0.1:${port}/api/v1`;
    const created = await fetch(`${baseURL}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(agentDsl('conformance')),
    });
    if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${await created.text()}`);
    target = { baseURL, apiKey: API_KEY, fake, agentId: 'conformance', runStatus: async (id) => (await getRun(runtime.db.db, id))?.status };
  }, 60_000);

  afterAll(async () => {
    await runtime?.lifecycle.shutdown('test');
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  chatConformance(() => target);
  agentDeletionConformance(() => target);
  requestTimeoutConformance(() => target);
  sessionConformance(() => target);
  skillsConformance(() => target);

  it('a provider 4xx reaches the client as 502 naming the provider and its message', async () => {
    target.fake.reset();
    target.fake.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error', param: null, code: null } } });
    const res = await fetch(`${target.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${target.apiKey}` },
      body: JSON.stringify({ model: target.agentId, messages: [{ role: 'user', content: 'too much' }] }),
    });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: string }).error).toMatch(/HTTP 400.*context too long/);
  });

  it('/metrics reports the runs, model calls, queues and HTTP latency the conformance suite caused', async () => {
    const text = await (await fetch(target.baseURL.replace('/api/v1', '/metrics'))).text();
    const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
    expect(value(/^agentry_runs_total\{[^}]*status="succeeded"[^}]*source="api"[^}]*\} (\d+)/m)).toBeGreaterThan(5);
    expect(value(/^agentry_provider_calls_total\{[^}]*provider="fake"[^}]*outcome="ok"[^}]*\} (\d+)/m)).toBeGreaterThan(5);
    expect(value(/^agentry_run_ttft_seconds_count\{[^}]*source="api"[^}]*\} (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^agentry_job_duration_seconds_count\{[^}]*queue="agent-run"[^}]*\} (\d+)/m)).toBeGreaterThan(5);
    expect(text).toMatch(/^agentry_queue_jobs\{[^}]*queue="agent-run"[^}]*state="waiting"[^}]*\} \d+/m);
    expect(text).toMatch(/^agentry_chat_active_streams\{[^}]*\} 0$/m);
    expect(value(/^http_request_duration_seconds_count\{[^}]*route="\/api\/v1\/chat\/completions"[^}]*\} (\d+)/m)).toBeGreaterThan(5);
  });
});
