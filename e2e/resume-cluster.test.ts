import { afterAll, beforeAll, expect, it } from 'vitest';
import { getRun } from '@agentry/db';
import { deleteRedisKeys, describeWithServers, startFakeModel, startTestCluster, waitFor, type FakeModel, type SpawnedService, type TestCluster } from '@agentry/testing';
import { parseSse } from './chat-conformance.js';
import { SseStream } from './sse-stream.js';

/**
 * Resumable chat streams (issue 27 item 1) on the deployment as it runs on Kubernetes: three
 * gateways (one is killed in each test) behind a round-robin proxy (the ingress), an agent-worker, real Postgres and Redis,
 * each service its own process. The gateway serving a stream is killed with SIGKILL mid-answer:
 * a client that resumes through the proxy (so on the other gateway) gets the rest of the answer,
 * every delta once, from the same model call; a client that does not resume has its run cancelled
 * once the resume grace is over, and the model call aborted.
 */
const KEY = 'sk-resume-cluster-0123456789abcdef';
const GRACE_MS = 2_000;
const CHECK_MS = 200;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i} `);

type SseEvent = { id?: string; data: string };

/** The text of the content deltas of chat chunk events (`[DONE]` and errors left out). */
function contentOf(events: SseEvent[]): string {
  return events
    .filter((e) => e.data !== '[DONE]')
    .map((e) => (JSON.parse(e.data) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content ?? '')
    .join('');
}

/** A chat stream whose events are read parsed, with their ids. */
class SseReader extends SseStream {
  /** The whole events received so far (a half-written one at the end is not one). */
  events(): SseEvent[] {
    return parseSse(this.text.slice(0, this.text.lastIndexOf('\n\n') + 2));
  }

  until(enough: (events: SseEvent[]) => boolean, timeoutMs = 10_000): Promise<void> {
    return this.readUntil(() => enough(this.events()), 'the events awaited', timeoutMs);
  }
}

describeWithServers('resumable chat streams on a multi-process cluster: the serving gateway killed mid-answer', () => {
  let fake: FakeModel;
  let cluster: TestCluster;
  let base = '';

  beforeAll(async () => {
    fake = await startFakeModel();
    cluster = await startTestCluster({
      gateways: 3,
      workers: 1,
      proxy: true,
      configLines: [
        'reliability:',
        `  listener_check_ms: ${CHECK_MS}`,
        `  resume_grace_ms: ${GRACE_MS}`,
        '  relay_check_ms: 1000',
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        `channels: {api: {accounts: {resumer: {api_key: "${KEY}"}}}}`,
      ],
    });
    base = cluster.baseURL;
    const created = await fetch(`${base}/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ruleChain: { id: 'talker', name: 'Talker' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake' } }], connections: [] } }),
    });
    expect(created.status, await created.text()).toBe(201);
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
    await fake?.close();
  });

  const auth = { authorization: `Bearer ${KEY}`, 'x-agentry-resumable': 'true' };
  const alive = (svc: SpawnedService) => svc.proc.exitCode === null && svc.proc.signalCode === null;
  const logged = (svc: SpawnedService, msg: string, runId: string) => svc.output().split('\n').some((l) => l.includes(`"msg":"${msg}"`) && l.includes(`"runId":"${runId}"`));
  /** The gateway that took the chat request of this run (it logs `run enqueued` with the run's id). */
  const gatewayOf = (runId: string) => waitFor(async () => cluster.local.byRole.gateway.find((g) => logged(g, 'run enqueued', runId)), 5_000);
  const runStatus = async (runId: string) => (await getRun(cluster.db.handle.db, runId))?.status;

  /** A streamed chat through the proxy, read until `n` words came (ending on an event with an id); its run's id. */
  async function streamSome(content: string, n: number): Promise<{ reader: SseReader; runId: string }> {
    const res = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ model: 'talker', stream: true, messages: [{ role: 'user', content }] }),
    });
    const reader = new SseReader(res);
    await reader.until((events) => contentOf(events).split(' ').length > n && events.at(-1)?.id !== undefined);
    const runId = reader.events().find((e) => e.id)!.id!.split(':')[0]!;
    return { reader, runId };
  }

  it('resumed through the proxy on the surviving gateway: the whole answer once, from one model call, the run succeeded', async () => {
    const index = fake.requests.length;
    const answer = words('k', 60);
    fake.script({ text: answer, chunkDelayMs: 60 });
    const { reader, runId } = await streamSome('tell me a long story', 10);
    const serving = await gatewayOf(runId);
    const others = cluster.local.byRole.gateway.filter((g) => g !== serving && alive(g));

    await serving.stop('SIGKILL');
    // The client learns of it as a client does: its connection breaks (the proxy passes that on).
    await reader.rest();
    const droppedAt = Date.now();
    const got = reader.events();
    // What the client has is everything up to its last event with an id: that is where it resumes.
    const lastIdAt = got.findLastIndex((e) => e.id !== undefined);
    const before = got.slice(0, lastIdAt + 1);
    const lastId = before.at(-1)!.id!;
    expect(before.some((e) => e.data === '[DONE]')).toBe(false);
    expect(contentOf(before).length).toBeGreaterThan(0);

    // Through the proxy, which cannot reach the dead gateway and sends it to the other one.
    const resumed = new SseReader(await fetch(`${base}/runs/${runId}/events`, { headers: { ...auth, 'last-event-id': lastId } }));
    await resumed.until((events) => events.length > 0);
    const firstChunkMs = Date.now() - droppedAt;
    await resumed.rest(20_000);
    const after = resumed.events();
    expect(after.at(-1)!.data).toBe('[DONE]');
    expect(others.some((g) => logged(g, 'stream resumed', runId))).toBe(true);

    // Exactly once, in order: the text before and after is the model's answer, no word lost or doubled.
    expect(contentOf(before) + contentOf(after)).toBe(answer.join(''));
    expect(after.some((e) => e.data.includes('"role"'))).toBe(false);
    const seqs = [...before, ...after].filter((e) => e.id).map((e) => Number(e.id!.split(':')[1]));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(firstChunkMs).toBeLessThan(GRACE_MS);

    // The run finished as it began: on the worker, with the one model call, not cancelled and not run again.
    await waitFor(async () => (await runStatus(runId)) === 'succeeded', 10_000);
    await sleep(CHECK_MS * 5);
    expect(await runStatus(runId)).toBe('succeeded');
    expect(fake.requests.length - index).toBe(1);
    expect(fake.requests[index]).toMatchObject({ aborted: false, completed: true });

    // Every request through the proxy now lands on a live gateway, whichever turn it is.
    for (let i = 0; i < 3; i++) expect((await fetch(`${base}/models`, { headers: auth })).status).toBe(200);
  }, 40_000);

  it('a resume of a running run whose kept events are gone (a silence longer than resume_retain_ms, Redis emptied) is 410, and the run goes on', async () => {
    const index = fake.requests.length;
    const answer = ['slow ', 'steady ', 'answer '];
    fake.script({ text: answer, chunkDelayMs: 1_500 });
    const res = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ model: 'talker', stream: true, messages: [{ role: 'user', content: 'take your time' }] }),
    });
    const reader = new SseReader(res);
    await reader.until((events) => events.some((e) => e.id));
    const lastId = reader.events().findLast((e) => e.id)!.id!;
    const runId = lastId.split(':')[0]!;
    await reader.drop();
    // What expiry does after resume_retain_ms of silence (the next event is 1.5 s away).
    expect(await deleteRedisKeys(cluster.env.REDIS_URL!, [`${cluster.env.REDIS_PREFIX}:kept:run-events:${runId}`])).toBe(1);

    // What the client missed cannot be told from what it has: refused, not answered with a gap.
    const resumed = await fetch(`${base}/runs/${runId}/events`, { headers: { ...auth, 'last-event-id': lastId } });
    expect(resumed.status).toBe(410);
    expect(((await resumed.json()) as { error: string }).error).toMatch(/no longer kept/);
    // The resume was asked for, so the run is not the abandoned one: it ends, its answer in the session.
    await waitFor(async () => (await runStatus(runId)) === 'succeeded', 15_000);
    expect(fake.requests.length - index).toBe(1);
    expect(fake.requests[index]).toMatchObject({ aborted: false, completed: true });
  }, 40_000);

  it('not resumed: the run is cancelled once the resume grace is over and the model call is aborted', async () => {
    const index = fake.requests.length;
    const answer = words('q', 100);
    fake.script({ text: answer, chunkDelayMs: 100 });
    const { reader, runId } = await streamSome('another long story', 5);
    const serving = await gatewayOf(runId);

    const killedAt = Date.now();
    await serving.stop('SIGKILL');
    await reader.rest();
    expect(reader.events().some((e) => e.data === '[DONE]')).toBe(false);

    // The worker sees nobody listening for the run (no gateway, no resumer), waits out the grace, then cancels.
    const call = await fake.waitForAbort({ index, timeoutMs: GRACE_MS + 5_000 });
    expect(call.abortedAt! - killedAt).toBeGreaterThanOrEqual(GRACE_MS);
    expect(call.abortedAt! - killedAt).toBeLessThan(GRACE_MS + 3_000);
    await waitFor(async () => (await runStatus(runId)) === 'cancelled', 5_000);
    expect(cluster.local.byRole.worker.some((w) => logged(w, 'no gateway listens for this chat run any more (its client is gone); cancelling it', runId))).toBe(true);
    await sleep(500);
    expect(fake.requests.length - index).toBe(1);

    // A resume now is too late: the client gets what was said until the cancel, once, then the cancel as an error, no [DONE].
    const got = reader.events();
    const before = got.slice(0, got.findLastIndex((e) => e.id !== undefined) + 1);
    const late = new SseReader(await fetch(`${base}/runs/${runId}/events`, { headers: { ...auth, 'last-event-id': before.at(-1)!.id! } }));
    await late.rest();
    const after = late.events();
    expect(after.at(-1)!.data).toMatch(/^\{"error":\{"message":"the run was cancelled before it finished/);
    expect(after.some((e) => e.data === '[DONE]')).toBe(false);
    const said = contentOf(before) + contentOf(after.slice(0, -1));
    expect(answer.join('').startsWith(said)).toBe(true);
  }, 40_000);
});
