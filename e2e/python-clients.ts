/**
 * The official OpenAI Python SDK against Agentry (issue 38): most Python apps, and the Python agent
 * frameworks built on it, reach a model through `openai.OpenAI(base_url=..., api_key=...)`. Each
 * case runs one scenario of e2e/python/openai_client.py in one Python child process kept for the
 * file (the SDK's own HTTP stack, pydantic models and retry rules) and asserts the JSON it prints.
 *
 * The interpreter is $AGENTRY_PYTHON, else `.venv-py/bin/python` (made by `npm run setup:python`,
 * and by .ci/run). Without one that imports `openai` the cases are skipped with a loud reason,
 * and fail under CI=true.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import readline from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { skipLoudly, waitFor } from '@agentry/testing';
import { CASE_TIMEOUT_MS, USAGE, failProvider, scriptFresh } from './clients-conformance.js';
import type { ResponsesTarget } from './responses-conformance.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = path.join(root, 'e2e/python/openai_client.py');
const REQUIREMENTS = path.join(root, 'e2e/python/requirements.txt');

/** The pinned SDK version, read from requirements.txt so the check cannot drift from the install. */
const PINNED = /^openai==(\S+)/m.exec(fs.readFileSync(REQUIREMENTS, 'utf8'))![1]!;

function findPython(): { python?: string; reason?: string } {
  const python = process.env.AGENTRY_PYTHON || path.join(root, '.venv-py/bin/python');
  if (!fs.existsSync(python)) return { reason: `${python} is missing (npm run setup:python)` };
  return { python };
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export function pythonClientsConformance(target: () => ResponsesTarget, opts: { runStatus: boolean } = { runStatus: true }): void {
  const { python, reason } = findPython();
  const name = 'the OpenAI Python SDK';
  if (!python) {
    skipLoudly(name, reason!, () => it('needs python', () => undefined));
    return;
  }

  // One interpreter for the file, started at the first case (the target's URL is known by then):
  // loading Python and the SDK costs a second or more each time on a busy machine.
  let proc: ChildProcessWithoutNullStreams | undefined;
  let lines: AsyncIterator<string> | undefined;
  let stderr = '';
  afterAll(() => {
    proc?.stdin.end();
    proc?.kill();
  });

  async function scenario(which: string): Promise<Json> {
    if (!proc) {
      const t = target();
      proc = spawn(python!, [SCRIPT], { env: { ...process.env, AGENTRY_BASE_URL: t.baseURL, AGENTRY_API_KEY: t.apiKey, AGENTRY_AGENT: t.agentId } });
      proc.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
      lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
    }
    proc.stdin.write(`${which}\n`);
    const next = await lines!.next();
    if (next.done) throw new Error(`the Python SDK process ended: ${stderr}`);
    const result = JSON.parse(next.value) as Json;
    if (result.crashed) throw new Error(`${which}: ${result.crashed}`);
    return result;
  }

  describe(name, () => {
    it(`is the pinned release (${PINNED})`, { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: 'hi' });
      expect((await scenario('chat')).sdk_version).toBe(PINNED);
    });

    it('models.list names the agent and models.retrieve returns it', { timeout: CASE_TIMEOUT_MS }, async () => {
      const r = await scenario('models');
      expect(r.ids).toContain(target().agentId);
      expect(r).toMatchObject({ retrieved: target().agentId, object: 'model' });
    });

    it('chat.completions.create returns the text, finish_reason and usage', { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: 'Hello from the agent', usage: USAGE });
      const r = await scenario('chat');
      expect(r).toMatchObject({ object: 'chat.completion', content: 'Hello from the agent', finish_reason: 'stop' });
      expect(r.usage).toMatchObject(USAGE);
      expect(r.id).toMatch(/^chatcmpl-/);
    });

    it('a stream with include_usage concatenates to the text, one id, usage on the last chunk', { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: ['Hel', 'lo ', 'world'], usage: USAGE });
      const r = await scenario('chat_stream');
      expect(r).toMatchObject({ content: 'Hello world', finish_reason: 'stop', ids: 1 });
      expect(r.usage).toMatchObject(USAGE);
    });

    it('closing a stream early stops the provider call and cancels the run', { timeout: CASE_TIMEOUT_MS }, async () => {
      const t = target();
      scriptFresh(t.fake, { text: Array.from({ length: 80 }, (_, i) => `w${i} `), chunkDelayMs: 100 });
      const r = await scenario('chat_abort');
      const seen = await t.fake.waitForAbort({ index: 0, timeoutMs: 10_000 });
      // The provider saw the abort before the 80 chunks (8 s) could have ended by themselves.
      expect(seen.abortedAt! - r.closed_at_ms).toBeLessThan(6_000);
      if (opts.runStatus) {
        const runId = String(r.id).replace(/^chatcmpl-/, '');
        await waitFor(async () => (await t.runStatus(runId)) === 'cancelled', 10_000);
      }
    });

    it('responses.create continues a conversation through previous_response_id', { timeout: CASE_TIMEOUT_MS }, async () => {
      const t = target();
      scriptFresh(t.fake, { text: 'Hello Ada' }, { text: 'You are Ada' });
      const r = await scenario('responses');
      expect(r.first).toMatchObject({ object: 'response', status: 'completed', text: 'Hello Ada' });
      expect(r.first.id).toMatch(/^resp_/);
      expect(r.second).toMatchObject({ status: 'completed', text: 'You are Ada' });
      const second = t.fake.requests[1]!.body.messages.map((m) => m.content);
      expect(second).toEqual(expect.arrayContaining(['my name is Ada', 'Hello Ada', 'what is my name?']));
    });

    it('responses.stream yields typed events and the final response', { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: ['Str', 'eam'] });
      const r = await scenario('responses_stream');
      expect(r).toMatchObject({ text: 'Stream', status: 'completed' });
      expect(r.types[0]).toBe('response.created');
      expect(r.types).toContain('response.output_text.delta');
      expect(r.types.at(-1)).toBe('response.completed');
    });

    it('an unknown model is NotFoundError with OpenAI’s error object', { timeout: CASE_TIMEOUT_MS }, async () => {
      const r = await scenario('error_unknown_model');
      expect(r).toMatchObject({ class: 'NotFoundError', status: 404 });
      expect(r.body).toMatchObject({ message: expect.stringContaining('no-such-agent') });
      expect(typeof r.type).toBe('string');
    });

    it('a wrong API key is AuthenticationError (401) whose message says how to get a key', { timeout: CASE_TIMEOUT_MS }, async () => {
      const r = await scenario('error_bad_key');
      expect(r).toMatchObject({ class: 'AuthenticationError', status: 401 });
      expect(r.body.message).toMatch(/key/i);
    });

    it('invalid parameters are BadRequestError (400) naming the field', { timeout: CASE_TIMEOUT_MS }, async () => {
      const r = await scenario('error_bad_request');
      expect(r).toMatchObject({ class: 'BadRequestError', status: 400 });
      expect(r.body.message).toMatch(/temperature|content/);
    });

    it('a failing provider is InternalServerError (502), not retried by the SDK: the gateway already retried', { timeout: CASE_TIMEOUT_MS }, async () => {
      const t = target();
      failProvider(t.fake);
      const r = await scenario('error_provider');
      expect(r).toMatchObject({ class: 'InternalServerError', status: 502 });
      // One request from the SDK: the gateway's 3 provider attempts, not 9.
      expect(t.fake.requests.length).toBe(3);
    });

    it('a background response: queued at once, polled to completed, its input items listed, then deleted (404 after)', { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: ['Done ', 'later'], chunkDelayMs: 100 });
      const r = await scenario('responses_background');
      expect(['queued', 'in_progress']).toContain(r.created_status);
      expect(r).toMatchObject({ background: true, status: 'completed', text: 'Done later' });
      expect(r.items).toEqual([{ type: 'message', role: 'user' }]);
      expect(r.after_delete).toMatchObject({ class: 'NotFoundError', status: 404 });
    });

    it("the app's own function tool: the call comes back with finish_reason tool_calls, the tool result continues the turn", { timeout: CASE_TIMEOUT_MS }, async () => {
      const t = target();
      scriptFresh(t.fake, { toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] }, { text: 'Sunny in Paris' });
      const r = await scenario('chat_client_tool');
      expect(r).toMatchObject({ finish_reason: 'tool_calls', calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
      expect(r).toMatchObject({ answer: 'Sunny in Paris', second_finish_reason: 'stop' });
      // The model saw the tool offered, then its result.
      expect(JSON.stringify(t.fake.requests[0]!.body.tools)).toContain('get_weather');
      expect(t.fake.requests[1]!.body.messages.some((m) => m.role === 'tool' && String(m.content).includes('sunny'))).toBe(true);
    });
  });
}
