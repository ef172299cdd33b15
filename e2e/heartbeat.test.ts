import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '@agentry/db';
import type { Runtime } from '@agentry/runtime';
import { startStandalone } from '@agentry/standalone';
import {
  describeWithServers,
  startFakeModel,
  startFakeTelegram,
  startTestCluster,
  waitFor,
  type FakeModel,
  type FakePlatform,
  type TestCluster,
} from '@agentry/testing';
import { bootEmbedded, fakeModelConfig, type EmbeddedRuntime } from './harness.js';

const PROVIDER_KEY = 'sk-heartbeat-provider-key-0123456789';
const JOB = 'heartbeat:beater';

/**
 * Heartbeat end to end in cluster mode: two scheduler processes, a worker, a connector and a
 * fake Telegram. The heartbeat is set through PUT /agents/{id}/heartbeat; the fake model answers
 * HEARTBEAT_OK to the prompt `quiet` and a report to anything else.
 */
describeWithServers('heartbeat (cluster mode: 2 schedulers, Postgres, Redis, fake Telegram)', () => {
  let model: FakeModel;
  let tg: FakePlatform;
  let cluster: TestCluster;
  let db: Db;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
  const api = async (method: string, url: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const res = await fetch(`${cluster.baseURL}${url}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  const fires = () => db.selectFrom('cron_runs').selectAll().where('cron_job_id', '=', JOB).orderBy('scheduled_at').execute();
  const settledFires = (n: number) =>
    waitFor(async () => {
      const rows = await fires();
      return rows.length >= n && rows.every((r) => r.status !== 'running' && r.delivery_status !== 'queued') ? rows : undefined;
    }, 40_000, 250);
  const sentTo777 = () => tg.sent.filter((m) => m.chatId === '777').map((m) => m.text);

  beforeAll(async () => {
    model = await startFakeModel({
      apiKey: PROVIDER_KEY,
      defaultReply: (req) => {
        const last = [...req.body.messages].reverse().find((m) => m.role === 'user');
        return { text: last?.content === 'quiet' ? 'HEARTBEAT_OK' : 'The disk is 91% full.' };
      },
    });
    tg = await startFakeTelegram();
    cluster = await startTestCluster({
      workers: 1,
      schedulers: 2,
      connectors: 1,
      env: { CRON_SWEEP_MS: '1000' },
      configLines: ['models:', '  default_provider: fake', `  providers: {fake: {base_url: "${model.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`],
    });
    db = cluster.db.handle.db;
    const agent = await api('POST', '/agents', {
      ruleChain: { id: 'beater', name: 'Beater' },
      metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    });
    expect(agent.status, JSON.stringify(agent.json)).toBe(201);
    const account = await api('POST', '/channels/chat_d/accounts', { id: 'tg', name: 'Ops bot', dm_policy: 'allow', group_policy: 'disabled', ...tg.account, binding: { agentId: 'beater' } });
    expect(account.status, JSON.stringify(account.json)).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await tg?.close();
    await model?.close();
  });

  it('every 2s, each tick once across two schedulers; HEARTBEAT_OK sends and keeps nothing, a report reaches Telegram and the session', async () => {
    const refused = await api('PUT', '/agents/beater/heartbeat', { interval: '2s', target: 'chat_d:nobody:777' });
    expect(refused).toMatchObject({ status: 400, json: { error: expect.stringContaining('heartbeat.target account "nobody" is not a chat_d account') } });
    const put = await api('PUT', '/agents/beater/heartbeat', { interval: '2s', prompt: 'quiet', target: 'chat_d:tg:777' });
    expect(put.status, JSON.stringify(put.json)).toBe(200);
    expect(put.json).toMatchObject({ heartbeat: { interval: '2s', prompt: 'quiet', target: 'chat_d:tg:777' }, cronJobId: JOB, schedule: '*/2 * * * * *' });
    expect((await api('GET', '/agents/beater')).json.metadata.nodes[0].configuration.heartbeat).toEqual(put.json.heartbeat);

    const quiet = await settledFires(4);
    expect(quiet.every((r) => r.status === 'succeeded' && r.delivery_status === 'skipped' && r.output_excerpt === 'HEARTBEAT_OK')).toBe(true);
    expect(sentTo777()).toEqual([]);

    const loud = await api('PUT', '/agents/beater/heartbeat', { interval: '2s', prompt: 'report', target: 'chat_d:tg:777' });
    expect(loud.status).toBe(200);
    await waitFor(async () => sentTo777().length >= 2, 30_000, 250);
    expect(new Set(sentTo777())).toEqual(new Set(['The disk is 91% full.']));

    // Off: no tick more than one interval after the change.
    expect((await api('DELETE', '/agents/beater/heartbeat')).json).toEqual({ success: true });
    const offAt = Date.now();
    expect((await api('GET', '/agents/beater/heartbeat')).json).toEqual({ heartbeat: null, cronJobId: JOB, schedule: null, nextTickAt: null });
    await new Promise((r) => setTimeout(r, 4_500));
    const rows = await settledFires(1);
    expect(rows.filter((r) => r.scheduled_at.getTime() > offAt + 2_000)).toEqual([]);

    // Exactly once: distinct 2 s ticks, one run (and one model call) per fire, all in the heartbeat session.
    const ticks = rows.map((r) => r.scheduled_at.getTime());
    expect(new Set(ticks).size).toBe(ticks.length);
    for (const t of ticks) expect(t % 2000).toBe(0);
    const runs = await db.selectFrom('runs').select(['id', 'source', 'session_id']).where('agent_id', '=', 'beater').execute();
    expect(runs.length).toBe(rows.length);
    expect(new Set(runs.map((r) => r.id))).toEqual(new Set(rows.map((r) => r.run_id)));
    expect(runs.every((r) => r.source === 'heartbeat')).toBe(true);
    expect(model.requests.length).toBe(rows.length);
    const sessions = await db.selectFrom('sessions').select(['id', 'session_key', 'channel']).where('agent_id', '=', 'beater').execute();
    expect(sessions.map((s) => [s.session_key, s.channel])).toEqual([['heartbeat', 'heartbeat']]);
    // Kept: only the reports (the quiet turns are not), each a prompt and its answer.
    const kept = await db.selectFrom('session_messages').select(['role', 'content']).where('session_id', '=', sessions[0]!.id).orderBy('id').execute();
    const reports = rows.filter((r) => r.output_excerpt !== 'HEARTBEAT_OK').length;
    expect(kept.length).toBe(reports * 2);
    expect(kept.filter((m) => m.role === 'assistant').every((m) => m.content === 'The disk is 91% full.')).toBe(true);
    expect(sentTo777().length).toBe(reports);
    // The run history shows them; the heartbeat's cron job is not edited as a cron job.
    expect((await api('GET', `/cron/${JOB}/runs`)).json.total).toBe(rows.length);
    expect((await api('PUT', `/cron/${JOB}/toggle`, { disabled: false })).status).toBe(400);
    const perScheduler = cluster.local.byRole.scheduler.map((s) => (s.output().match(/"msg":"cron fired"/g) ?? []).length);
    console.log(`heartbeat cluster: ${rows.length} fires (${reports} reports sent, ${rows.length - reports} HEARTBEAT_OK), fires per scheduler ${perScheduler.join('/')}`);
  }, 120_000);

  it('a tick outside the active hours (read in the time zone) starts nothing', async () => {
    const before = (await fires()).length;
    // A one-hour window three hours from now in Tokyo: never open during this test.
    const local = new Date(Date.now() + 9 * 3600_000 + 3 * 3600_000);
    const hh = (d: Date) => `${String(d.getUTCHours()).padStart(2, '0')}:00`;
    const window = { start: hh(local), end: hh(new Date(local.getTime() + 3600_000)) };
    const put = await api('PUT', '/agents/beater/heartbeat', { interval: '1s', prompt: 'report', activeHours: window, timezone: 'Asia/Tokyo' });
    expect(put.status, JSON.stringify(put.json)).toBe(200);
    await new Promise((r) => setTimeout(r, 4_000));
    expect((await fires()).length).toBe(before);
    const open = await api('PUT', '/agents/beater/heartbeat', { interval: '1s', prompt: 'report', activeHours: { start: hh(new Date(local.getTime() - 3 * 3600_000)), end: hh(local) }, timezone: 'Asia/Tokyo' });
    expect(open.status).toBe(200);
    await waitFor(async () => (await fires()).length > before, 10_000, 250);
    await api('DELETE', '/agents/beater/heartbeat');
  }, 60_000);
});

describe('heartbeat (embedded mode: PGlite, croner, the real worker)', () => {
  let runtime: Runtime;
  let embedded: EmbeddedRuntime | undefined;
  let model: FakeModel;
  let base: string;

  beforeAll(async () => {
    model = await startFakeModel({
      apiKey: PROVIDER_KEY,
      defaultReply: (req) => ({ text: [...req.body.messages].reverse().find((m) => m.role === 'user')?.content === 'quiet' ? 'HEARTBEAT_OK' : 'Something needs you.' }),
    });
    embedded = await bootEmbedded('heartbeat', ['server: {host: 127.0.0.1, port: 0}', ...fakeModelConfig(model, PROVIDER_KEY)], { service: 'standalone' });
    runtime = embedded.runtime;
    const { port } = await startStandalone(runtime);
    base = `http://127.0.0.1:${port}/api/v1`;
  }, 60_000);

  afterAll(async () => {
    await embedded?.stop();
    await model?.close();
  });

  it('a heartbeat in the DSL fires every second; quiet answers are not kept, the others are', async () => {
    const heartbeat = { interval: '1s', prompt: 'quiet' };
    const dsl = (hb: unknown) => ({ ruleChain: { id: 'waker', name: 'Waker' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', heartbeat: hb } }], connections: [] } });
    const send = (method: string, url: string, body: unknown) => fetch(`${base}${url}`, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await send('POST', '/agents', dsl(heartbeat))).status).toBe(201);
    const db = runtime.db.db;
    const fires = () => db.selectFrom('cron_runs').selectAll().where('cron_job_id', '=', 'heartbeat:waker').where('status', '=', 'succeeded').execute();
    await waitFor(async () => ((await fires()).length >= 2 ? true : undefined), 10_000, 200);
    expect((await send('PUT', '/agents/waker', dsl({ ...heartbeat, prompt: 'report' }))).status).toBe(200);
    await waitFor(async () => ((await fires()).some((r) => r.output_excerpt === 'Something needs you.') ? true : undefined), 10_000, 200);
    expect((await send('PUT', '/agents/waker', dsl({ ...heartbeat, disabled: true }))).status).toBe(200);
    const rows = await fires();
    expect(new Set(rows.map((r) => r.scheduled_at.getTime())).size).toBe(rows.length);
    const session = await db.selectFrom('sessions').select('id').where('agent_id', '=', 'waker').where('session_key', '=', 'heartbeat').executeTakeFirstOrThrow();
    const kept = await db.selectFrom('session_messages').select(['role', 'content']).where('session_id', '=', session.id).where('role', '=', 'assistant').execute();
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.every((m) => m.content === 'Something needs you.')).toBe(true);
  }, 40_000);
});
