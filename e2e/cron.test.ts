import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bus } from '@agentry/bus';
import { createRedisBus } from '@agentry/bus/redis';
import type { Db } from '@agentry/db';
import { createLogger, type Runtime } from '@agentry/runtime';
import {
  cleanupRedisPrefix,
  createTestDatabase,
  describeWithServers,
  freePort,
  redisUrl,
  spawnService,
  startFakeModel,
  uniqueRedisPrefix,
  waitFor,
  type FakeModel,
  type SpawnedService,
  type TestDatabase,
} from '@agentry/testing';
import { startStandalone } from '@agentry/standalone';
import { PROVIDER_KEY, agentDsl } from './chat-conformance.js';
import { bootEmbedded, fakeModelConfig, type EmbeddedRuntime } from './harness.js';

/**
 * Cron jobs end to end: a job's ticks become runs of its agent through the real worker and a
 * fake model. Embedded mode (one process, PGlite, croner) and cluster mode (three scheduler
 * processes, two workers, a gateway, on Postgres and Redis/BullMQ), where every tick must fire
 * exactly once however many schedulers run, and whichever of them dies.
 */

interface CronRunRow {
  scheduled_at: Date;
  started_at: Date;
  finished_at: Date | null;
  status: string;
  run_id: string | null;
  error: string | null;
  output_excerpt: string | null;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
async function api(baseURL: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${baseURL}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

async function cronRuns(db: Db, cronJobId: string): Promise<CronRunRow[]> {
  return db
    .selectFrom('cron_runs')
    .select(['scheduled_at', 'started_at', 'finished_at', 'status', 'run_id', 'error', 'output_excerpt'])
    .where('cron_job_id', '=', cronJobId)
    .orderBy('scheduled_at')
    .execute();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Percentile of a sorted list (nearest rank). */
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;

/** Every tick once: consecutive seconds from the first row to the last, none twice. */
function expectEveryTickOnce(rows: CronRunRow[]): void {
  const ticks = rows.map((r) => r.scheduled_at.getTime());
  expect(new Set(ticks).size).toBe(ticks.length);
  for (const t of ticks) expect(t % 1000).toBe(0);
  const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!).filter((d) => d !== 1000);
  expect(gaps, 'ticks without a fire between the first and the last').toEqual([]);
}

describe('cron jobs, embedded mode (PGlite, croner, the real worker)', () => {
  let runtime: Runtime;
  let embedded: EmbeddedRuntime | undefined;
  let fake: FakeModel;
  let baseURL: string;
  const logs: string[] = [];

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    embedded = await bootEmbedded('cron', ['server: {host: 127.0.0.1, port: 0}', ...fakeModelConfig(fake, PROVIDER_KEY)], { service: 'standalone', log: (line) => void logs.push(line) });
    runtime = embedded.runtime;
    const { port } = await startStandalone(runtime);
    baseURL = `http://127.0.0.1:${port}/api/v1`;
    expect((await api(baseURL, 'POST', '/agents', agentDsl('ticker'))).status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await embedded?.stop();
    await fake?.close();
  });

  it('a */1 job fires every second into one session; a failed fire is recorded and logged and later fires go on; toggle and delete take effect', async () => {
    const created = await api(baseURL, 'POST', '/cron', { name: 'Every second', schedule: '*/1 * * * * *', message: 'tick', target: 'ticker' });
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const db = runtime.db.db;

    const firstRows = await waitFor(async () => {
      const rows = (await cronRuns(db, id)).filter((r) => r.status === 'succeeded');
      return rows.length >= 3 ? rows : undefined;
    }, 10_000);
    expect(firstRows[0]).toMatchObject({ output_excerpt: 'tick', error: null });

    // The next model call fails (400 is not retried): that fire fails, the following ones succeed.
    fake.script({ status: 400, body: { error: { message: 'bad request from the fake', type: 'invalid_request_error' } } });
    const rows = await waitFor(async () => {
      const all = await cronRuns(db, id);
      const failedAt = all.findIndex((r) => r.status === 'failed');
      return failedAt >= 0 && all.slice(failedAt + 1).filter((r) => r.status === 'succeeded').length >= 2 ? all : undefined;
    }, 10_000);
    const failed = rows.find((r) => r.status === 'failed')!;
    expect(failed.error).toMatch(/fake|400/);
    expect(logs.some((l) => l.includes('"msg":"cron run failed"') && l.includes(failed.run_id!))).toBe(true);

    // Runs of one session: the model sees the earlier fires' turns (the agent keeps context).
    const last = fake.requests.at(-1)!.body.messages;
    expect(last.filter((m) => m.role === 'user' && m.content === 'tick').length).toBeGreaterThanOrEqual(4);
    expect(last.filter((m) => m.role === 'assistant').length).toBeGreaterThanOrEqual(3);

    // History through the API, newest first.
    const history = await api(baseURL, 'GET', `/cron/${id}/runs?size=100`);
    expect(history.json.total).toBeGreaterThanOrEqual(rows.length);
    expect(history.json.data.some((r: { status: string; error: string }) => r.status === 'failed' && r.error === failed.error)).toBe(true);
    const stamps = history.json.data.map((r: { scheduledAt: string }) => Date.parse(r.scheduledAt));
    expect(stamps).toEqual([...stamps].sort((a, b) => b - a));
    expect((await api(baseURL, 'GET', `/cron/${id}`)).json).toMatchObject({ lastRunAt: expect.any(String), lastStatus: expect.stringMatching(/running|succeeded/) });

    // Toggled off: nothing fires after two ticks; on again: fires resume.
    const offAt = Date.now();
    expect((await api(baseURL, 'PUT', `/cron/${id}/toggle`, { disabled: true })).json.disabled).toBe(true);
    await sleep(2_500);
    expect((await cronRuns(db, id)).filter((r) => r.scheduled_at.getTime() > offAt + 2_000)).toEqual([]);
    expect((await runtime.bus.scheduler.list()).map((s) => s.id)).not.toContain(id);
    const onAt = Date.now();
    await api(baseURL, 'PUT', `/cron/${id}/toggle`, { disabled: false });
    await waitFor(async () => (await cronRuns(db, id)).some((r) => r.scheduled_at.getTime() > onAt), 5_000);

    expectEveryTickOnce((await cronRuns(db, id)).filter((r) => r.scheduled_at.getTime() < offAt));

    // Deleted: the schedule is gone.
    expect((await api(baseURL, 'DELETE', `/cron/${id}`)).json).toEqual({ success: true });
    await waitFor(async () => !(await runtime.bus.scheduler.list()).some((s) => s.id === id), 2_000);
  }, 40_000);

  it("a job the agent makes with its cron tool is scheduled at once (the tool announces it), not at the minute's reconcile", async () => {
    const planner = {
      ruleChain: { id: 'planner', name: 'Planner' },
      metadata: {
        nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', tools: [{ type: 'builtin', name: 'cron' }] } }],
        connections: [],
      },
    };
    expect((await api(baseURL, 'POST', '/agents', planner)).status).toBe(201);
    const chat = async (content: string, toolArgs: unknown) => {
      fake.script({ toolCalls: [{ id: `c-${content}`, name: 'cron', arguments: JSON.stringify(toolArgs) }] }, { text: 'done' });
      const res = await api(baseURL, 'POST', '/chat/completions', { model: 'planner', messages: [{ role: 'user', content }] });
      expect(res.status).toBe(200);
    };
    const scheduled = async (id: string) => (await runtime.bus.scheduler.list()).some((s) => s.id === id);

    // The scheduler's periodic reconcile runs every 60 s: within 2 s, only the announcement explains it.
    await chat('schedule', { operation: 'create', name: 'hourly', schedule: '0 0 * * * *', message: 'report' });
    const [job] = (await api(baseURL, 'GET', '/agents/planner/cron')).json as Array<{ id: string; name: string }>;
    expect(job).toMatchObject({ name: 'hourly' });
    await waitFor(() => scheduled(job!.id), 2_000);
    await chat('pause', { operation: 'toggle', id: job!.id, disabled: true });
    await waitFor(async () => !(await scheduled(job!.id)), 2_000);
    expect((await api(baseURL, 'DELETE', '/agents/planner')).status).toBe(200);
  }, 20_000);
});

describeWithServers('cron jobs, cluster mode (3 schedulers, 2 workers, 1 gateway; Postgres, Redis)', () => {
  const processes: SpawnedService[] = [];
  const schedulers: SpawnedService[] = [];
  let fake: FakeModel;
  let db: TestDatabase;
  let bus: Bus;
  let baseURL: string;
  const prefix = uniqueRedisPrefix();
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cron-cluster-'));

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: PROVIDER_KEY });
    db = await createTestDatabase();
    const config = path.join(cwd, 'config.yaml');
    fs.writeFileSync(config, fakeModelConfig(fake, PROVIDER_KEY).join('\n'));
    const port = await freePort();
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl(),
      REDIS_PREFIX: prefix,
      AGENTRY_SECRET_KEY: 'cron-cluster-master-key-0123456789',
      HOST: '127.0.0.1',
      HEALTH_HOST: '127.0.0.1',
      HEALTH_PORT: '0',
      CRON_SWEEP_MS: '2000',
    };
    const args = ['--config', config];
    const gateway = spawnService('services/gateway/src/main.ts', { args, env: { ...env, PORT: String(port) } });
    processes.push(gateway);
    const workers = [0, 1].map(() => spawnService('services/agent-worker/src/main.ts', { args, env }));
    schedulers.push(...[0, 1, 2].map(() => spawnService('services/scheduler/src/main.ts', { args, env })));
    processes.push(...workers, ...schedulers);
    await Promise.all([
      gateway.waitForLine(/gateway listening/, 60_000),
      ...workers.map((p) => p.waitForLine(/agent-worker started/, 60_000)),
      ...schedulers.map((p) => p.waitForLine(/scheduler started/, 60_000)),
    ]);
    baseURL = `http://127.0.0.1:${port}/api/v1`;
    bus = createRedisBus({ url: redisUrl(), prefix, logger: createLogger({ service: 'cron-test', level: 'silent' }) });
    const created = await api(baseURL, 'POST', '/agents', agentDsl('ticker'));
    if (created.status !== 201) throw new Error(`agent create failed: ${created.status} ${JSON.stringify(created.json)}`);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await bus?.close();
    await cleanupRedisPrefix(redisUrl(), prefix).catch(() => undefined);
    await fake?.close();
    await db?.drop();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('a job every second: 30+ ticks each fire exactly once, through a scheduler SIGKILL; toggle stops it within two ticks; delete removes the BullMQ scheduler', async () => {
    const created = await api(baseURL, 'POST', '/cron', { name: 'Every second', schedule: '* * * * * *', message: 'tick', target: 'ticker' });
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const q = db.handle.db;
    await waitFor(async () => (await bus.scheduler.list()).some((s) => s.id === id), 5_000);
    const first = await waitFor(async () => (await cronRuns(q, id))[0], 10_000);
    const t0 = first.scheduled_at.getTime();

    // After about ten ticks, the busiest scheduler dies hard, half-way between two ticks.
    await waitFor(async () => (await cronRuns(q, id)).length >= 10, 20_000, 200);
    await sleep(1_500 - (Date.now() % 1000));
    const fires = (s: SpawnedService) => (s.output().match(/"msg":"cron fired"/g) ?? []).length;
    const victim = [...schedulers].sort((a, b) => fires(b) - fires(a))[0]!;
    const victimFires = fires(victim);
    victim.proc.kill('SIGKILL');
    await victim.exited();
    const killedAt = Date.now();

    await waitFor(async () => (await cronRuns(q, id)).length >= 33, 40_000, 250);
    const offAt = Date.now();
    const off = await api(baseURL, 'PUT', `/cron/${id}/toggle`, { disabled: true });
    expect(off.json.disabled).toBe(true);
    await sleep(3_000);
    const afterOff = (await cronRuns(q, id)).filter((r) => r.scheduled_at.getTime() > offAt + 2_000);
    expect(afterOff, 'fires more than two ticks after the toggle').toEqual([]);
    const lastTickAfterToggle = Math.max(...(await cronRuns(q, id)).map((r) => r.scheduled_at.getTime())) - offAt;
    expect((await bus.scheduler.list()).map((s) => s.id)).not.toContain(id);

    // Every fire settles (the killed scheduler's followers are finished by a live one's sweep).
    const rows = await waitFor(async () => {
      const all = await cronRuns(q, id);
      return all.every((r) => r.status !== 'running') ? all : undefined;
    }, 20_000, 250);
    expect(rows.length).toBeGreaterThanOrEqual(33);
    expectEveryTickOnce(rows);
    expect(rows.filter((r) => r.status !== 'succeeded')).toEqual([]);
    expect(rows[0]!.scheduled_at.getTime()).toBe(t0);
    expect(rows.some((r) => r.scheduled_at.getTime() > killedAt + 5_000)).toBe(true);
    // One run per tick, one model call per run: no second delivery got through anywhere.
    const runs = await q.selectFrom('runs').select(['id', 'status', 'source']).where('agent_id', '=', 'ticker').execute();
    expect(runs.length).toBe(rows.length);
    expect(new Set(runs.map((r) => r.id))).toEqual(new Set(rows.map((r) => r.run_id)));
    expect(runs.every((r) => r.source === 'cron' && r.status === 'succeeded')).toBe(true);
    expect(fake.requests.length).toBe(rows.length);

    const lateness = rows.map((r) => r.started_at.getTime() - r.scheduled_at.getTime()).sort((a, b) => a - b);
    const redelivered = schedulers.map((s) => (s.output().match(/fire delivered again/g) ?? []).length).reduce((a, b) => a + b, 0);
    console.log(
      `cron cluster: ${rows.length} ticks over ${(rows.at(-1)!.scheduled_at.getTime() - t0) / 1000 + 1} s, ` +
        `lateness (started - scheduled) p50 ${pct(lateness, 50)} ms, p90 ${pct(lateness, 90)} ms, max ${lateness.at(-1)} ms; ` +
        `fires per scheduler ${schedulers.map(fires).join('/')} (SIGKILLed the one with ${victimFires} fires at that point); second deliveries skipped ${redelivered}; ` +
        `last tick ${lastTickAfterToggle} ms after the toggle request was sent`,
    );

    // On again: the scheduler is back and fires resume; deleted: the BullMQ scheduler is gone.
    const onAt = Date.now();
    await api(baseURL, 'PUT', `/cron/${id}/toggle`, { disabled: false });
    await waitFor(async () => (await bus.scheduler.list()).some((s) => s.id === id), 5_000);
    await waitFor(async () => (await cronRuns(q, id)).some((r) => r.scheduled_at.getTime() > onAt), 5_000);
    expect((await api(baseURL, 'DELETE', `/cron/${id}`)).json).toEqual({ success: true });
    await waitFor(async () => !(await bus.scheduler.list()).some((s) => s.id === id), 5_000);
    const deletedAt = Date.now();
    await sleep(2_000);
    const late = await q.selectFrom('runs').select('id').where('agent_id', '=', 'ticker').where('created_at', '>', new Date(deletedAt + 1_000)).execute();
    expect(late).toEqual([]);
  }, 120_000);
});
