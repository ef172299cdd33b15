import { describe, expect, it } from 'vitest';
import { agentDeletionConformance, chatConformance, requestTimeoutConformance, sessionConformance, skillsConformance } from './chat-conformance.js';
import { embeddedTarget } from './targets.js';
import { openaiErrorMessage } from './openai-error.js';

/** The conformance suite against embedded mode: one process, PGlite, the in-process bus. */
describe('chat completions, embedded mode', () => {
  const target = embeddedTarget('chat');

  chatConformance(target);
  agentDeletionConformance(target);
  requestTimeoutConformance(target);
  sessionConformance(target);
  skillsConformance(target);

  it('a provider 4xx reaches the client as 502 naming the provider and its message', async () => {
    target().fake.reset();
    target().fake.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error', param: null, code: null } } });
    const res = await fetch(`${target().baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${target().apiKey}` },
      body: JSON.stringify({ model: target().agentId, messages: [{ role: 'user', content: 'too much' }] }),
    });
    expect(res.status).toBe(502);
    expect(openaiErrorMessage(await res.json())).toMatch(/HTTP 400.*context too long/);
  });

  it('/metrics reports the runs, model calls, queues and HTTP latency the conformance suite caused', async () => {
    const text = await (await fetch(target().baseURL.replace('/api/v1', '/metrics'))).text();
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
