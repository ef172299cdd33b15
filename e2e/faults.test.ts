import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getRun } from '@agentry/db';
import {
  describeWithPrivateServers,
  startFakeModel,
  startPrivatePostgres,
  startPrivateRedis,
  startTestCluster,
  waitFor,
  type FakeModel,
  type PrivatePostgres,
  type PrivateRedis,
  type SpawnedService,
  type TestCluster,
  type TestDatabase,
} from '@agentry/testing';
import { ChatSseStream } from './sse-stream.js';

/**
 * Fault injection on a cluster-mode deployment: real processes (a gateway, two agent-workers, a
 * scheduler, a channel-connector) on a Redis and a Postgres of this file's own, which are
 * stopped and restarted for real, and fake model providers that hang, fail or break off. After
 * every fault: no run is left unfinished, no session holds a turn without its run's success,
 * and every service is ready again, without any service being restarted.
 */
const KEY = 'sk-faults-account-0123456789abcdef';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i} `);

describeWithPrivateServers('faults: processes, Redis, Postgres and model providers fail (cluster mode)', () => {
  let redis: PrivateRedis;
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let fake: FakeModel;
  let flaky: FakeModel;
  let cluster: TestCluster;
  /** `<the gateway now serving>/api/v1` (the gateway is replaced in one test). */
  let api = '';

  beforeAll(async () => {
    // Each assigned as soon as it is up, so that afterAll stops whatever started if another failed.
    const started = await Promise.allSettled([
      startPrivateRedis().then((r) => (redis = r)),
      startPrivatePostgres().then((p) => (postgres = p)),
      startFakeModel().then((f) => (fake = f)),
      startFakeModel().then((f) => (flaky = f)),
    ]);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    db = await postgres.createDatabase('agentry_faults');
    cluster = await startTestCluster({
      db,
      redisUrl: redis.url,
      workers: 2,
      schedulers: 1,
      connectors: 1,
      configLines: [
        // One run per worker at a time: a third chat waits in the queue while two are running.
        'worker: {concurrency: 1, stall_timeout_ms: 2000}',
        // Streams open at once, as they did before issue 22: these tests read a stream's id
        // before its first token (a run that hangs, runs queued behind busy workers).
        'server: {stream_headers_after_ms: 0}',
        'reliability:',
        '  provider_first_token_ms: 4000',
        '  provider_retries: 1',
        '  provider_backoff_ms: 100',
        '  listener_check_ms: 400',
        '  run_sweep_ms: 2000',
        '  relay_check_ms: 1000',
        '  resume_grace_ms: 1000',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}, flaky: {base_url: "${flaky.url}", model: fake-model}}`,
        `channels: {api: {accounts: {faults: {api_key: "${KEY}"}}}}`,
      ],
    });
    api = cluster.baseURL;
    const agent = (id: string, configuration: Record<string, unknown>) =>
      fetch(`${api}/agents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ruleChain: { id, name: id }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration }], connections: [] } }),
      });
    for (const res of await Promise.all([
      agent('steady', { provider: 'fake' }),
      agent('resilient', { provider: 'flaky', failover: [{ provider: 'fake' }] }),
      agent('solo', { provider: 'flaky' }),
    ])) {
      expect(res.status, await res.text()).toBe(201);
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await db?.drop();
    await Promise.all([fake?.close(), flaky?.close(), redis?.close(), postgres?.close()]);
  }, 60_000);

  const chat = (agent: string, content: string, opts: { stream?: boolean; sessionId?: string } = {}) =>
    fetch(`${api}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: agent, messages: [{ role: 'user', content }], stream: opts.stream ?? false, ...(opts.sessionId ? { sessionId: opts.sessionId } : {}) }),
    });
  const alive = (svc: SpawnedService) => svc.proc.exitCode === null && svc.proc.signalCode === null;
  const workers = () => cluster.local.byRole.worker.filter(alive);
  /** The worker that logged `run started` for this run. */
  const workerOf = (runId: string) =>
    waitFor(async () => workers().find((w) => w.output().split('\n').some((l) => l.includes('"msg":"run started"') && l.includes(`"runId":"${runId}"`))), 5_000);

  /** Both workers (concurrency 1) busy with a long streamed answer each; the streams, once their first words arrived. */
  async function occupyBothWorkers(): Promise<SseReader[]> {
    fake.script({ text: words('r', 40), chunkDelayMs: 300 }, { text: words('s', 40), chunkDelayMs: 300 });
    const first = new SseReader(await chat('steady', 'long one', { stream: true }));
    await first.until(/"content":"r\d/);
    const second = new SseReader(await chat('steady', 'long two', { stream: true }));
    await second.until(/"content":"s\d/);
    return [first, second];
  }

  /** Non-streamed chats that wait in the queue (every worker busy); resolves once their runs are stored as queued. */
  async function queueBehind(messages: string[]): Promise<Array<{ message: string; response: Promise<Response> }>> {
    const pending = messages.map((message) => ({ message, response: chat('steady', message) }));
    await waitFor(async () => (await sql<{ n: number }>`select count(*)::int as n from runs where status = 'queued'`.execute(db.handle.db)).rows[0]!.n === messages.length, 5_000);
    return pending;
  }

  /** Each chat answered 200 with its own message (the fake echoes when unscripted), within 30 s. */
  async function expectEchoed(pending: Array<{ message: string; response: Promise<Response> }>): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (const { message, response } of pending) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`"${message}" was never answered: its run was not run again`)), Math.max(0, deadline - Date.now()));
      });
      const res = await Promise.race([response, late]).finally(() => clearTimeout(timer));
      expect(res.status, await res.clone().text()).toBe(200);
      expect(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe(message);
    }
  }

  /**
   * What every fault must leave behind: every run in a final state, no session turn without
   * its run's success (a turn is written with the success, whole, or not at all), and every
   * service's `/ready` green.
   */
  async function assertAfterFault(): Promise<void> {
    const unfinished = async () =>
      (await sql<{ id: string; status: string }>`select id, status from runs where status not in ('succeeded', 'failed', 'cancelled')`.execute(db.handle.db)).rows;
    await waitFor(async () => (await unfinished()).length === 0, 20_000, 100).catch(() => undefined);
    expect(await unfinished()).toEqual([]);

    // A completed turn belongs to a succeeded run; a kept failed or stopped turn (shown, never
    // context) to a failed or cancelled one.
    const orphanTurns = await sql<{ run_id: string | null; status: string | null }>`
      select m.run_id, r.status from session_messages m left join runs r on r.id = m.run_id
      where (m.status = 'ok' and r.status is distinct from 'succeeded')
         or (m.status <> 'ok' and (r.status is null or r.status not in ('failed', 'cancelled')))`.execute(db.handle.db);
    expect(orphanTurns.rows).toEqual([]);
    const missingTurns = await sql<{ id: string }>`
      select r.id from runs r
      where r.session_id is not null and r.status = 'succeeded'
        and (not exists (select 1 from session_messages m where m.run_id = r.id and m.role = 'user')
          or not exists (select 1 from session_messages m where m.run_id = r.id and m.role = 'assistant'))`.execute(db.handle.db);
    expect(missingTurns.rows).toEqual([]);

    const urls = cluster.local.readyUrls();
    expect(urls).toHaveLength(5);
    const statuses = async () => Object.fromEntries(await Promise.all(urls.map(async (u) => [u, (await fetch(u).catch(() => undefined))?.status ?? 0])));
    await waitFor(async () => Object.values(await statuses()).every((s) => s === 200), 15_000, 200).catch(() => undefined);
    expect(await statuses()).toEqual(Object.fromEntries(urls.map((u) => [u, 200])));
  }

  it('worker SIGKILL before the first token: another worker runs it again and the client gets the answer', async () => {
    const index = fake.requests.length;
    fake.script({ hang: true }, { text: 'answered by the second worker' });
    const started = Date.now();
    const pending = chat('steady', 'who takes over?');
    await fake.waitForRequest(index + 1, 10_000);
    const victim = await waitFor(async () => workers().find((w) => lastStartedAfter(w, started)), 5_000);
    await victim.stop('SIGKILL');
    const replacement = cluster.startWorker();
    const res = await pending;
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('answered by the second worker');
    expect(await getRun(db.handle.db, body.id.replace('chatcmpl-', ''))).toMatchObject({ status: 'succeeded', attempts: 2 });
    await replacement;
    await assertAfterFault();
  }, 60_000);

  it('worker SIGKILL mid-stream: one clean error event, no [DONE], the run failed', async () => {
    fake.script({ text: words('t', 40), chunkDelayMs: 200 });
    const stream = new SseReader(await chat('steady', 'stream until you die', { stream: true }));
    // Two tokens: the first is published while the run is being marked `streamed`, the second only after.
    await stream.until(/"content":"t1 /);
    const runId = stream.runId();
    (await workerOf(runId)).proc.kill('SIGKILL');
    const replacement = cluster.startWorker();
    await stream.rest();
    expect(stream.events().at(-1)).toMatch(/^data: \{"error":\{"message":"the worker running this request stopped after it had started answering/);
    expect(stream.text).not.toMatch(/\[DONE\]/);
    // The gateway ends the stream as soon as the worker's lease lapses; the run row is failed by
    // the worker that takes the handed-off run (a streamed run is never answered twice).
    await replacement;
    await waitFor(async () => (await getRun(db.handle.db, runId))?.status === 'failed', 30_000, 100);
    await assertAfterFault();
  }, 60_000);

  it('gateway SIGKILL with open streams: their runs are cancelled and no orphan keeps calling the provider', async () => {
    const first = fake.requests.length;
    fake.script({ text: words('g', 60), chunkDelayMs: 200 }, { hang: true });
    const answering = new SseReader(await chat('steady', 'mid-answer when the gateway dies', { stream: true }));
    await answering.until(/"content":"g\d/);
    const waiting = new SseReader(await chat('steady', 'no token yet when the gateway dies', { stream: true }));
    await waiting.until(/"id":"chatcmpl-/);
    await fake.waitForRequest(first + 2, 10_000);
    const runIds = [answering.runId(), waiting.runId()];

    const gateway = cluster.local.byRole.gateway.find(alive)!;
    const killedAt = Date.now();
    await gateway.stop('SIGKILL');
    await Promise.all([answering.rest(), waiting.rest()]);
    // Nobody can tell the workers (the gateway that would have is gone): they notice that no
    // gateway listens on the runs' channels any more, cancel them and abort the provider calls.
    const aborted = await Promise.all([fake.waitForAbort({ index: first, timeoutMs: 10_000 }), fake.waitForAbort({ index: first + 1, timeoutMs: 10_000 })]);
    for (const r of aborted) expect(r.abortedAt! - killedAt).toBeLessThan(5_000);
    await waitFor(async () => (await Promise.all(runIds.map((id) => getRun(db.handle.db, id)))).every((r) => r?.status === 'cancelled'), 5_000);
    const calls = fake.requests.length;
    await sleep(1_000);
    expect(fake.requests.length).toBe(calls);

    await cluster.local.start('gateway');
    api = `${cluster.local.gatewayUrls.at(-1)!}/api/v1`;
    const res = await chat('steady', 'the new gateway answers');
    expect(res.status).toBe(200);
    await assertAfterFault();
  }, 60_000);

  it('Redis stopped for 5 s: chats fail fast with 503, running streams end cleanly, queued runs survive, all recover alone', async () => {
    // Both workers busy with long answers; three more chats wait in the queue behind them.
    const streams = await occupyBothWorkers();
    const queued = await queueBehind(['queued 1', 'queued 2', 'queued 3']);

    await redis.stop();
    const down = Date.now();
    const before = Date.now();
    const refused = await chat('steady', 'during the outage');
    expect(Date.now() - before).toBeLessThan(2_000);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/not ready|Redis/i) } });
    const gatewayReady = `${cluster.local.gatewayUrls.at(-1)!}/ready`;
    const workerReady = cluster.local.readyUrl(workers()[0]!);
    await waitFor(async () => (await fetch(gatewayReady)).status === 503 && (await fetch(workerReady)).status === 503, 5_000, 100);
    // The workers cannot publish any more: their runs fail, and the relays, hearing nothing,
    // read the stored outcome and end the streams with an error event instead of hanging.
    await Promise.all(streams.map((s) => s.rest()));
    for (const s of streams) {
      expect(s.events().at(-1)).toMatch(/^data: \{"error":/);
      expect(s.text).not.toMatch(/\[DONE\]/);
    }
    await sleep(Math.max(0, 5_000 - (Date.now() - down)));

    await redis.start();
    const restarted = Date.now();
    // Nothing is restarted: every service reconnects by itself.
    await waitFor(async () => (await chat('steady', 'after the outage').catch(() => undefined))?.status === 200, 5_000, 200);
    expect(Date.now() - restarted).toBeLessThan(5_000);
    // The runs queued before the outage were kept (AOF) and all answered.
    await expectEchoed(queued);
    await assertAfterFault();
  }, 90_000);

  it('Redis restarted empty (no persistence): queued runs whose jobs are gone are found by the sweep and answered', async () => {
    const streams = await occupyBothWorkers();
    const queued = await queueBehind(['lost 1', 'lost 2']);

    await redis.stop();
    await Promise.all(streams.map((s) => s.rest()));
    await redis.start({ empty: true });
    // Their jobs went with Redis' memory; their rows did not. The workers' sweep
    // (run_sweep_ms 2000, stall_timeout_ms 2000 here) enqueues them again.
    await expectEchoed(queued);
    // Without the sweep nothing would ever run them again: the chats above would still be waiting.
    await assertAfterFault();
  }, 90_000);

  it('Postgres restarted: chats fail fast with 503, runs and session turns in flight are committed once it is back', async () => {
    fake.script({ text: words('p', 20), chunkDelayMs: 200 }, { text: words('q', 20), chunkDelayMs: 200 });
    const inSession = new SseReader(await chat('steady', 'remember me', { stream: true, sessionId: 'pg-restart' }));
    await inSession.until(/"content":"p\d/);
    const plain = new SseReader(await chat('steady', 'plain', { stream: true }));
    await plain.until(/"content":"q\d/);
    const queued = chat('steady', 'queued across the restart', { sessionId: 'pg-queued' });
    await waitFor(async () => (await sql<{ n: number }>`select count(*)::int as n from runs where status = 'queued'`.execute(db.handle.db)).rows[0]!.n === 1, 5_000);

    await postgres.stop();
    const down = Date.now();
    const before = Date.now();
    const refused = await chat('steady', 'during the outage');
    expect(Date.now() - before).toBeLessThan(2_000);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/database|not ready/i) } });
    const gatewayReady = `${cluster.local.gatewayUrls.at(-1)!}/ready`;
    const workerReady = cluster.local.readyUrl(workers()[0]!);
    await waitFor(async () => (await fetch(gatewayReady)).status === 503 && (await fetch(workerReady)).status === 503, 5_000, 100);
    await sleep(Math.max(0, 5_000 - (Date.now() - down)));

    await postgres.start();
    const restarted = Date.now();
    await waitFor(async () => (await chat('steady', 'after the restart').catch(() => undefined))?.status === 200, 5_000, 200);
    expect(Date.now() - restarted).toBeLessThan(5_000);
    // The answers finished while the database was down: their commits waited for it, then `done`.
    await Promise.all([inSession.rest(), plain.rest()]);
    expect(inSession.content()).toBe(words('p', 20).join(''));
    expect(inSession.events().at(-1)).toBe('data: [DONE]');
    expect(plain.content()).toBe(words('q', 20).join(''));
    const late = await queued;
    expect(late.status).toBe(200);
    const turn = await sql<{ role: string; content: string }>`
      select m.role, m.content from session_messages m join sessions s on s.id = m.session_id
      where s.session_key = 'pg-restart' and m.status = 'ok' order by m.id`.execute(db.handle.db);
    expect(turn.rows).toEqual([
      { role: 'user', content: 'remember me' },
      { role: 'assistant', content: words('p', 20).join('') },
    ]);
    await assertAfterFault();
  }, 90_000);

  it('a provider that hangs: time-to-first-token timeout, a retry, then failover to the second provider', async () => {
    const index = flaky.requests.length;
    flaky.script({ hang: true }, { status: 500 });
    fake.script({ text: 'from the backup' });
    const res = await chat('resilient', 'are you there?');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('from the backup');
    expect(flaky.requests.length - index).toBe(2);
    expect(flaky.requests[index]!.aborted).toBe(true);
    expect((await getRun(db.handle.db, body.id.replace('chatcmpl-', '')))?.status).toBe('succeeded');
    await assertAfterFault();
  }, 30_000);

  it('a provider that keeps answering 500, without failover: retried, then a clean 502 {error}', async () => {
    const index = flaky.requests.length;
    flaky.script({ status: 500 }, { status: 500 });
    const res = await chat('solo', 'please fail');
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { message: expect.stringMatching(/HTTP 500.*\(2 attempts\)/) } });
    expect(flaky.requests.length - index).toBe(2);
    await assertAfterFault();
  }, 30_000);

  it('a provider that closes the stream mid-answer: one clean error event, no [DONE], the run failed', async () => {
    flaky.script({ text: words('x', 6), failAfterChunks: 3 });
    const stream = new SseReader(await chat('solo', 'break off', { stream: true }));
    await stream.rest();
    expect(stream.content()).toMatch(/^x0 /);
    expect(stream.events().at(-1)).toMatch(/^data: \{"error":\{"message":"Upstream failure: .*broke off/);
    expect(stream.text).not.toMatch(/\[DONE\]/);
    expect((await getRun(db.handle.db, stream.runId()))?.status).toBe('failed');
    await assertAfterFault();
  }, 30_000);
});

/** Streams end within 30 s here (a fault may hold one that long). */
class SseReader extends ChatSseStream {
  override rest(timeoutMs = 30_000): Promise<void> {
    return super.rest(timeoutMs);
  }
}

/** True when the worker's latest `run started` line was written after `since` (ms since the epoch). */
function lastStartedAfter(worker: SpawnedService, since: number): boolean {
  const line = worker
    .output()
    .split('\n')
    .filter((l) => l.includes('"msg":"run started"'))
    .at(-1);
  if (!line) return false;
  return (JSON.parse(line) as { time: number }).time >= since;
}
