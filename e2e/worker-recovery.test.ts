import { afterAll, beforeAll, expect, it } from 'vitest';
import { getRun } from '@agentry/db';
import { describeWithServers, startFakeModel, startTestCluster, type FakeModel, type TestCluster } from '@agentry/testing';
import { API_KEY, agentDsl } from './chat-conformance.js';

/**
 * A worker process dies mid-run (SIGKILL). Its run is taken over by another worker after the
 * stall timeout: re-run when it had not streamed anything, failed with a clean error event
 * when the client had already seen part of the answer. Never a hung request.
 */
describeWithServers('a worker dies mid-run (cluster mode)', () => {
  let fake: FakeModel;
  let cluster: TestCluster;
  let baseURL = '';
  const startWorker = () => cluster.startWorker();

  beforeAll(async () => {
    fake = await startFakeModel();
    cluster = await startTestCluster({
      workers: 0,
      configLines: [
        'worker: {stall_timeout_ms: 2000}',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        `channels: {api: {accounts: {conformance: {api_key: "${API_KEY}"}}}}`,
      ],
    });
    baseURL = cluster.baseURL;
    const created = await fetch(`${baseURL}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(agentDsl('conformance')) });
    expect(created.status).toBe(201);
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  const post = (stream: boolean) =>
    fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: 'conformance', messages: [{ role: 'user', content: 'hello' }], stream }),
    });

  it('re-runs a run that had not streamed yet, and the client gets the answer', async () => {
    const first = await startWorker();
    const index = fake.requests.length;
    fake.script({ hang: true }, { text: 'answered by the second worker' });
    const pending = post(false);
    await fake.waitForRequest(index + 1, 10_000);
    await first.stop('SIGKILL');
    await startWorker();
    const res = await pending;
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('answered by the second worker');
    expect(await getRun(cluster.db.handle.db, body.id.replace('chatcmpl-', ''))).toMatchObject({ status: 'succeeded', attempts: 2 });
  }, 60_000);

  it('fails cleanly when the dead worker had already streamed part of the answer', async () => {
    const worker = cluster.processes.at(-1)!;
    fake.script({ text: Array.from({ length: 40 }, (_, i) => `t${i} `), chunkDelayMs: 200 });
    const res = await post(true);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!/"content":"t\d/.test(text)) text += decoder.decode((await reader.read()).value);
    await worker.stop('SIGKILL');
    await startWorker();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events.at(-1)).toMatch(/^data: \{"error":\{"message":"the worker running this request stopped after it had started answering/);
    expect(text).not.toMatch(/\[DONE\]/);
  }, 60_000);
});
