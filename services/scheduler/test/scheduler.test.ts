import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, type Bus, type Consumer } from '@agentry/bus';
import { PubSubChannels, QueueNames, type RunEvent, type RunRequest } from '@agentry/contracts';
import {
  claimRun,
  deleteRuleChain,
  finishRun,
  getCronJob,
  getRun,
  getSession,
  insertCronJob,
  insertCronRun,
  insertRuleChain,
  insertRun,
  listCronRuns,
  updateCronJob,
  type CronDeliver,
  type CronRunRecord,
  type Db,
  type JsonValue,
  finishOutboundMessage,
  settleCronDelivery,
  getOutboundByRun,
  upsertChannelAccount,
  inTransaction,
  appendBinding,
} from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { queueOutbound } from '@agentry/channels';
import { createTestPglite, waitFor } from '@agentry/testing';
import { Firer, Reconciler, fireData, startScheduler } from '@agentry/scheduler';
import { completeCronRun, heartbeatJobId, isHeartbeatOk, syncHeartbeatJob } from '@agentry/runs';

const FAR = '0 0 0 1 1 *';
let counter = 0;
const uid = (p: string) => `${p}_${++counter}`;

interface Harness {
  runtime: Runtime;
  db: Db;
  logs: string[];
  /** Run ids the fake worker claimed. */
  processed: string[];
}

/**
 * An embedded runtime (PGlite, memory bus) and a stand-in agent-worker on `agent-run`: a message
 * `fail` fails its run, `hang` never finishes, anything else succeeds with `answer to <message>`.
 * Like the agent worker, it completes the fire's record when it has ended the run.
 */
function harness(): () => Harness {
  let h: Harness | undefined;
  let worker: Consumer | undefined;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-scheduler-'));
  beforeAll(async () => {
    const logs: string[] = [];
    const runtime = await bootstrap({
      service: 'scheduler-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'scheduler-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: (line: string) => void logs.push(line) },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    const db = runtime.db.db;
    const processed: string[] = [];
    worker = runtime.bus.queue.consume(
      QueueNames.agentRun,
      async (job) => {
        // The queue carries forced compactions too: this stand-in runs runs only.
        if (job.data.type !== 'agent-run') throw new Error(`not a run: ${job.data.type}`);
        const { runId } = job.data;
        const run = await claimRun(db, runId);
        if (!run) return;
        processed.push(run.id);
        const message = (run.request as unknown as RunRequest).messages.at(-1)!.content;
        const publish = (e: { type: 'done'; finishReason: string } | { type: 'error'; message: string; status: number }) =>
          runtime.bus.pubsub.publish(PubSubChannels.run(run.id), { ...e, runId: run.id, seq: 0 } satisfies RunEvent);
        if (message === 'hang') return;
        if (message === 'fail') {
          await finishRun(db, run.id, { status: 'failed', error: 'the model said no' });
          await completeCronRun(db, run.id, runtime.logger);
          await publish({ type: 'error', message: 'the model said no', status: 502 });
          return;
        }
        const reply = (run.request as unknown as RunRequest).reply;
        // `say:X` answers X as it is (a heartbeat's HEARTBEAT_OK), anything else `answer to ...`.
        const output = message.startsWith('say:') ? message.slice(4) : `answer to ${message}`;
        await inTransaction(db, async (tx) => {
          await finishRun(tx, run.id, { status: 'succeeded', output });
          // As the agent worker does: the reply is committed with the run's end (a heartbeat's no-op token is not sent).
          if (reply && !(run.source === 'heartbeat' && isHeartbeatOk(output))) {
            await queueOutbound(tx, { ...reply, kind: 'text', payload: { text: output }, source: 'agent', runId: run.id });
          }
        });
        await completeCronRun(db, run.id, runtime.logger);
        await publish({ type: 'done', finishReason: 'stop' });
      },
      { concurrency: 5 },
    );
    h = { runtime, db, logs, processed };
  });
  afterAll(async () => {
    await worker?.close();
    await h?.runtime.lifecycle.shutdown('test');
    fs.rmSync(cwd, { recursive: true, force: true });
  });
  return () => {
    if (!h) throw new Error('the harness is not started');
    return h;
  };
}

async function agentWithJob(
  db: Db,
  job: { schedule?: string; message?: string; disabled?: boolean; deliver?: CronDeliver | null; unbound?: boolean; agentDisabled?: boolean } = {},
) {
  const agentId = uid('agent');
  const ruleChain = { id: agentId, name: agentId, ...(job.agentDisabled ? { disabled: true } : {}) };
  await insertRuleChain(db, { id: agentId, kind: 'agent', agentId: null, name: agentId, category: null, dsl: { ruleChain, metadata: { nodes: [], connections: [] } } });
  // An agent delivers only through an account bound to it (an admin's binding).
  if (job.deliver && !job.unbound) await appendBinding(db, { agentId, match: { channel: job.deliver.platform, accountId: job.deliver.accountId } });
  const cron = await insertCronJob(db, {
    id: uid('job'),
    agentId,
    name: 'job',
    schedule: job.schedule ?? FAR,
    message: job.message ?? 'hello',
    timezone: 'UTC',
    disabled: job.disabled ?? false,
    deliver: job.deliver ?? null,
  });
  return { agentId, job: cron };
}

const runsOf = async (db: Db, cronJobId: string): Promise<CronRunRecord[]> => (await listCronRuns(db, cronJobId, { limit: 1000, offset: 0 })).data;
const countRunsOfAgent = async (db: Db, agentId: string) =>
  Number((await db.selectFrom('runs').select((eb) => eb.fn.countAll<number>().as('n')).where('agent_id', '=', agentId).executeTakeFirstOrThrow()).n);
const settled = (db: Db, cronJobId: string, n = 1) =>
  waitFor(async () => {
    const rows = await runsOf(db, cronJobId);
    return rows.length >= n && rows.every((r) => r.status !== 'running') ? rows : undefined;
  }, 5_000);

describe('Firer: fires become runs, once per tick', () => {
  const env = harness();
  const firer = (bus?: Bus, opts: { runTimeoutMs?: number } = {}) => {
    const { runtime, db } = env();
    const b = bus ?? runtime.bus;
    return new Firer(db, b, new Reconciler(db, b.scheduler, runtime.logger), runtime.logger, { runTimeoutMs: opts.runTimeoutMs ?? 5_000 });
  };

  it('a fire creates a run of the target agent in session cron:<jobId> and records its outcome', async () => {
    const { db } = env();
    const { agentId, job } = await agentWithJob(db, { message: 'daily report' });
    const f = firer();
    const tick = new Date('2026-03-01T10:00:00Z');
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    const [row] = await settled(db, job.id);
    expect(row).toMatchObject({ scheduledAt: tick, status: 'succeeded', outputExcerpt: 'answer to daily report', error: null, deliveryStatus: null });
    const run = (await getRun(db, row!.runId!))!;
    expect(run).toMatchObject({ agentId, source: 'cron', status: 'succeeded', request: { messages: [{ role: 'user', content: 'daily report' }] } });
    const session = (await getSession(db, run.sessionId!))!;
    expect(session).toMatchObject({ agentId, sessionKey: `cron:${job.id}`, channel: 'cron' });
    expect(await getCronJob(db, job.id)).toMatchObject({ lastRunAt: tick, lastStatus: 'succeeded' });
    // The next fire runs in the same session (the agent keeps its context).
    await f.fire({ id: job.id, scheduledAt: new Date(tick.getTime() + 1000), data: fireData(job.id) });
    const rows = await settled(db, job.id, 2);
    expect((await getRun(db, rows[0]!.runId!))!.sessionId).toBe(run.sessionId);
  });

  it('the same tick delivered several times at once (any replica) creates one run', async () => {
    const { db, processed } = env();
    const { agentId, job } = await agentWithJob(db);
    const tick = new Date('2026-03-01T11:00:00Z');
    const firers = [firer(), firer(), firer()];
    await Promise.all(firers.flatMap((f) => [f, f].map((x) => x.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) }))));
    const rows = await settled(db, job.id);
    expect(rows).toHaveLength(1);
    expect(await countRunsOfAgent(db, agentId)).toBe(1);
    expect(processed.filter((id) => id === rows[0]!.runId)).toHaveLength(1);
  });

  it('a tick delivered again while its run is still queued re-enqueues that run (lost job), never a new one', async () => {
    const { db } = env();
    const { agentId, job } = await agentWithJob(db);
    const tick = new Date('2026-03-01T12:00:00Z');
    // As a process that died between its commit and its enqueue leaves it.
    await insertRun(db, { id: 'lostrun1', agentId, sessionId: null, source: 'cron', request: { messages: [{ role: 'user', content: 'hello' }] } });
    await insertCronRun(db, { cronJobId: job.id, scheduledAt: tick, runId: 'lostrun1' });
    const f = firer();
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    await waitFor(async () => (await getRun(db, 'lostrun1'))?.status === 'succeeded', 5_000);
    expect(await countRunsOfAgent(db, agentId)).toBe(1);
    // The worker completed that fire's record when it ended the run; the sweep changes nothing.
    await waitFor(async () => (await runsOf(db, job.id))[0]?.status === 'succeeded', 5_000);
    await f.sweep();
    expect((await runsOf(db, job.id))[0]).toMatchObject({ status: 'succeeded', outputExcerpt: 'answer to hello' });
  });

  it('a failed run is recorded with its error and logged; later fires still run', async () => {
    const { db, logs } = env();
    const { job } = await agentWithJob(db, { message: 'fail' });
    const f = firer();
    const tick = new Date('2026-03-01T13:00:00Z');
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    const [row] = await settled(db, job.id);
    expect(row).toMatchObject({ status: 'failed', error: 'the model said no' });
    expect(await getCronJob(db, job.id)).toMatchObject({ lastStatus: 'failed' });
    const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'cron run failed' && l.cronJobId === job.id);
    expect(line).toMatchObject({ error: 'the model said no', level: 50 });
    await updateCronJob(db, job.id, { message: 'better now' });
    await f.fire({ id: job.id, scheduledAt: new Date(tick.getTime() + 1000), data: fireData(job.id) });
    const rows = await settled(db, job.id, 2);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'failed']);
  });

  it('a run that cannot be enqueued fails its fire (recorded, logged) without throwing', async () => {
    const { db, runtime, logs } = env();
    const { job } = await agentWithJob(db);
    const broken: Bus = {
      ...runtime.bus,
      kind: 'memory',
      pubsub: runtime.bus.pubsub,
      scheduler: runtime.bus.scheduler,
      queue: {
        enqueue: async () => {
          throw new Error('queue is down');
        },
        consume: (...args) => runtime.bus.queue.consume(...args),
        counts: (q) => runtime.bus.queue.counts(q),
      },
    };
    const f = firer(broken);
    await f.fire({ id: job.id, scheduledAt: new Date('2026-03-01T14:00:00Z'), data: fireData(job.id) });
    const [row] = await runsOf(db, job.id);
    expect(row).toMatchObject({ status: 'failed', error: expect.stringMatching(/the run could not be started: .*run queue is unavailable/) });
    expect((await getRun(db, row!.runId!))!.status).toBe('failed');
    expect(logs.some((l) => l.includes('"msg":"cron fire failed"') && l.includes(job.id))).toBe(true);
  });

  it('a run that outlives the timeout fails its fire and is cancelled', async () => {
    const { db } = env();
    const { job } = await agentWithJob(db, { message: 'hang' });
    const f = firer(undefined, { runTimeoutMs: 300 });
    await f.fire({ id: job.id, scheduledAt: new Date('2026-03-01T15:00:00Z'), data: fireData(job.id) });
    // The scheduler fires and moves on; its sweep (every replica's) finds the fire past the timeout.
    await f.sweep();
    expect((await runsOf(db, job.id))[0]).toMatchObject({ status: 'running' });
    await new Promise((r) => setTimeout(r, 400));
    await f.sweep();
    const [row] = await settled(db, job.id);
    expect(row).toMatchObject({ status: 'failed', error: 'the run did not finish within 300 ms; it was cancelled' });
    expect((await getRun(db, row!.runId!))!.status).toBe('cancelled');
  });

  it('the sweep settles fires nobody follows: ended runs, vanished runs, runs past the timeout', async () => {
    const { db } = env();
    const { agentId, job } = await agentWithJob(db);
    const t = Date.parse('2026-03-01T16:00:00Z');
    await insertRun(db, { id: 'sweep_done', agentId, sessionId: null, source: 'cron', request: { messages: [] } });
    await finishRun(db, 'sweep_done', { status: 'succeeded', output: 'x'.repeat(5000) });
    await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date(t), runId: 'sweep_done' });
    await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date(t + 1000), runId: 'sweep_missing' });
    await insertRun(db, { id: 'sweep_stuck', agentId, sessionId: null, source: 'cron', request: { messages: [] } });
    await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date(t + 2000), runId: 'sweep_stuck' });
    const f = firer(undefined, { runTimeoutMs: 60_000 });
    await f.sweep();
    let rows = await runsOf(db, job.id);
    expect(rows.map((r) => r.status)).toEqual(['running', 'failed', 'succeeded']);
    expect(rows[2]!.outputExcerpt).toHaveLength(2000);
    expect(rows[1]!.error).toBe('the run was deleted before it finished');
    await new Promise((r) => setTimeout(r, 150));
    await firer(undefined, { runTimeoutMs: 100 }).sweep();
    rows = await runsOf(db, job.id);
    expect(rows[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/did not finish/) });
    expect((await getRun(db, 'sweep_stuck'))!.status).toBe('cancelled');
  });

  it('delivery follows the reply: queued while no connector sends it, sent once the connector records it, skipped on failure', async () => {
    const { db } = env();
    const deliver = { platform: 'chat_a', accountId: 'team', chatId: 'room' };
    const ok = await agentWithJob(db, { deliver });
    const bad = await agentWithJob(db, { deliver, message: 'fail' });
    const f = firer();
    const tick = new Date('2026-03-01T17:00:00Z');
    await f.fire({ id: ok.job.id, scheduledAt: tick, data: fireData(ok.job.id) });
    await f.fire({ id: bad.job.id, scheduledAt: tick, data: fireData(bad.job.id) });
    expect((await settled(db, ok.job.id))[0]).toMatchObject({ status: 'succeeded', deliveryStatus: 'queued', deliveryError: expect.stringMatching(/not sent yet/) });
    expect((await settled(db, bad.job.id))[0]).toMatchObject({ status: 'failed', deliveryStatus: 'skipped' });
    const reply = await getOutboundByRun(db, (await settled(db, ok.job.id))[0]!.runId!);
    expect(reply).toMatchObject({ platform: 'chat_a', accountId: 'team', chatId: 'room', kind: 'text', payload: { text: expect.stringContaining('answer to') } });

    // A connector that sends the message records the delivery on the fire, as the channel connector does.
    const later = await agentWithJob(db, { deliver });
    const sender = setInterval(() => {
      void db
        .selectFrom('outbound_messages')
        .select(['id', 'run_id'])
        .where('status', '=', 'queued')
        .execute()
        .then((rows) =>
          Promise.all(
            rows.map(async (r) => {
              await finishOutboundMessage(db, r.id, { status: 'sent', platformMessageId: 'pm1' });
              if (r.run_id) await settleCronDelivery(db, r.run_id, { status: 'sent', error: null });
            }),
          ),
        );
    }, 100);
    try {
      await f.fire({ id: later.job.id, scheduledAt: tick, data: fireData(later.job.id) });
      const sent = await waitFor(async () => {
        const [row] = await runsOf(db, later.job.id);
        return row?.deliveryStatus === 'sent' ? row : undefined;
      }, 5_000);
      expect(sent).toMatchObject({ status: 'succeeded', deliveryStatus: 'sent', deliveryError: null });
    } finally {
      clearInterval(sender);
    }
  });

  it('a delivery the connector records before the worker completes the fire stays; a settled one never changes', async () => {
    const { db } = env();
    const { agentId, job } = await agentWithJob(db, { deliver: { platform: 'chat_a', accountId: 'team', chatId: 'room' } });
    await insertRun(db, { id: 'raced_run', agentId, sessionId: null, source: 'cron', request: { messages: [] } });
    await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date('2026-03-01T17:30:00Z'), runId: 'raced_run' });
    await finishRun(db, 'raced_run', { status: 'succeeded', output: 'raced' });
    // Still running: the connector was faster than the worker.
    expect(await settleCronDelivery(db, 'raced_run', { status: 'failed', error: 'chat_a refused it' })).toBe(true);
    const done = await completeCronRun(db, 'raced_run', { info: () => undefined, error: () => undefined });
    expect(done).toMatchObject({ status: 'succeeded', outputExcerpt: 'raced', deliveryStatus: 'failed', deliveryError: 'chat_a refused it' });
    expect(await settleCronDelivery(db, 'raced_run', { status: 'sent', error: null })).toBe(false);
    // Completed once: a second completion (the sweep on another replica) writes nothing.
    expect(await completeCronRun(db, 'raced_run', { info: () => undefined, error: () => undefined })).toBeUndefined();
    expect((await runsOf(db, job.id))[0]).toMatchObject({ deliveryStatus: 'failed', deliveryError: 'chat_a refused it' });
  });

  it('a fire whose agent is not bound to the delivery account fails and runs nothing', async () => {
    const { db } = env();
    const { agentId, job } = await agentWithJob(db, { deliver: { platform: 'chat_a', accountId: 'team', chatId: 'room' }, unbound: true });
    const f = firer();
    await f.fire({ id: job.id, scheduledAt: new Date('2026-03-01T18:00:00Z'), data: fireData(job.id) });
    const [fire] = await settled(db, job.id);
    expect(fire).toMatchObject({ status: 'failed', error: expect.stringMatching(/may not send through chat_a account "team": no binding connects them/) });
    expect(await countRunsOfAgent(db, agentId)).toBe(0);
  });

  it("a fire to a chat the account's allow_from no longer admits fails and runs nothing", async () => {
    const { db } = env();
    await upsertChannelAccount(db, {
      platform: 'chat_a',
      id: 'gated',
      name: 'Gated',
      enabled: true,
      settings: { dm_policy: 'allowlist', group_policy: 'allowlist', allow_from: ['room-1'] },
      secretsSealed: null,
      apiKeyHash: null,
      fileHmac: null,
    });
    const { agentId, job } = await agentWithJob(db, { deliver: { platform: 'chat_a', accountId: 'gated', chatId: 'stranger' } });
    const f = firer();
    await f.fire({ id: job.id, scheduledAt: new Date('2026-03-01T18:10:00Z'), data: fireData(job.id) });
    const [fire] = await settled(db, job.id);
    expect(fire).toMatchObject({ status: 'failed', error: expect.stringMatching(/chat "stranger" is not in the allow_from of chat_a account "gated"/) });
    expect(await countRunsOfAgent(db, agentId)).toBe(0);
  });

  it('a fire of a disabled agent starts no run and is recorded as skipped with the reason; the job stays scheduled', async () => {
    const { db, runtime } = env();
    const { agentId, job } = await agentWithJob(db, { agentDisabled: true, deliver: { platform: 'chat_a', accountId: 'team', chatId: 'room' } });
    await runtime.bus.scheduler.upsert(job.id, { pattern: FAR }, fireData(job.id));
    const f = firer();
    const tick = new Date('2026-03-01T18:30:00Z');
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    // A second delivery of the tick finds its row and adds nothing.
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    expect(await runsOf(db, job.id)).toEqual([
      expect.objectContaining({ status: 'skipped', runId: null, error: `Not allowed: agent "${agentId}" is disabled`, deliveryStatus: 'skipped', finishedAt: expect.any(Date) }),
    ]);
    expect(await getCronJob(db, job.id)).toMatchObject({ lastRunAt: tick, lastStatus: 'skipped' });
    expect(await countRunsOfAgent(db, agentId)).toBe(0);
    expect((await runtime.bus.scheduler.list()).map((s) => s.id)).toContain(job.id);
  });

  it('a fire of a deleted job removes its scheduler; a fire of a disabled job runs nothing and removes it', async () => {
    const { db, runtime } = env();
    const bus = runtime.bus;
    await bus.scheduler.upsert('ghost_job', { pattern: FAR }, fireData('ghost_job'));
    const f = firer();
    await f.fire({ id: 'ghost_job', scheduledAt: new Date(), data: fireData('ghost_job') });
    expect((await bus.scheduler.list()).map((s) => s.id)).not.toContain('ghost_job');

    const { agentId, job } = await agentWithJob(db, { disabled: true });
    await bus.scheduler.upsert(job.id, { pattern: FAR }, fireData(job.id));
    await f.fire({ id: job.id, scheduledAt: new Date(), data: fireData(job.id) });
    expect(await runsOf(db, job.id)).toEqual([]);
    expect(await countRunsOfAgent(db, agentId)).toBe(0);
    expect((await bus.scheduler.list()).map((s) => s.id)).not.toContain(job.id);
  });

  it('Reconciler.all adds missing schedulers, changes stale ones, removes orphans and disabled jobs', async () => {
    const { db, runtime } = env();
    const bus = runtime.bus;
    for (const s of await bus.scheduler.list()) await bus.scheduler.remove(s.id);
    const missing = await agentWithJob(db, { schedule: '0 0 3 * * *' });
    const stale = await agentWithJob(db, { schedule: '0 0 4 * * *' });
    const disabled = await agentWithJob(db, { disabled: true });
    await bus.scheduler.upsert(stale.job.id, { pattern: '0 0 5 * * *' }, fireData(stale.job.id));
    await bus.scheduler.upsert(disabled.job.id, { pattern: FAR }, fireData(disabled.job.id));
    await bus.scheduler.upsert('orphan', { pattern: FAR }, fireData('orphan'));
    const r = new Reconciler(db, bus.scheduler, runtime.logger);
    const result = await r.all();
    const installed = new Map((await bus.scheduler.list()).map((s) => [s.id, s.pattern]));
    expect(installed.get(missing.job.id)).toBe('0 0 3 * * *');
    expect(installed.get(stale.job.id)).toBe('0 0 4 * * *');
    expect(installed.has(disabled.job.id)).toBe(false);
    expect(installed.has('orphan')).toBe(false);
    expect(result).toMatchObject({ changed: 1, removed: 2, failed: 0 });
    // A second pass changes nothing.
    expect(await r.all()).toEqual({ added: 0, changed: 0, removed: 0, failed: 0 });
  });
});

describe('heartbeat: a cron job derived from the agent DSL', () => {
  const env = harness();
  const target = { platform: 'chat_a', accountId: 'team', chatId: 'room' };
  async function beater(db: Db, heartbeat: Record<string, unknown> | undefined) {
    const agentId = uid('beater');
    const dsl = { ruleChain: { id: agentId, name: agentId }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { heartbeat } }], connections: [] } };
    await insertRuleChain(db, { id: agentId, kind: 'agent', agentId: null, name: agentId, category: null, dsl: dsl as unknown as JsonValue });
    await appendBinding(db, { agentId, match: { channel: target.platform, accountId: target.accountId } });
    return { agentId, dsl };
  }
  const firer = () => {
    const { runtime, db } = env();
    return new Firer(db, runtime.bus, new Reconciler(db, runtime.bus.scheduler, runtime.logger), runtime.logger, { runTimeoutMs: 5_000 });
  };

  it('the DSL makes the job; a tick in the active hours runs in session heartbeat with source heartbeat, a tick outside starts nothing', async () => {
    const { db, runtime } = env();
    const hb = { interval: '30m', prompt: 'say:all fine?', activeHours: { start: '22:00', end: '06:00' }, timezone: 'Europe/Berlin', target: 'chat_a:team:room' };
    const { agentId, dsl } = await beater(db, hb);
    const ports = { db, logger: runtime.logger };
    const job = (await syncHeartbeatJob(ports, { id: agentId, dsl }))!;
    expect(job).toMatchObject({ id: heartbeatJobId(agentId), schedule: '0 */30 * * * *', timezone: 'Europe/Berlin', message: 'say:all fine?', deliver: target, disabled: false });
    const f = firer();
    // 12:00 UTC is 13:00 in Berlin: outside 22:00-06:00, no row and no run.
    await f.fire({ id: job.id, scheduledAt: new Date('2026-01-15T12:00:00Z'), data: fireData(job.id) });
    expect(await runsOf(db, job.id)).toEqual([]);
    expect(await countRunsOfAgent(db, agentId)).toBe(0);
    // 23:30 UTC is 00:30 in Berlin: inside (the window crosses midnight).
    const tick = new Date('2026-01-15T23:30:00Z');
    await f.fire({ id: job.id, scheduledAt: tick, data: fireData(job.id) });
    const [row] = await settled(db, job.id);
    expect(row).toMatchObject({ status: 'succeeded', outputExcerpt: 'all fine?', deliveryStatus: 'queued' });
    const run = (await getRun(db, row!.runId!))!;
    expect(run).toMatchObject({ source: 'heartbeat', request: { reply: target } });
    expect(await getSession(db, run.sessionId!)).toMatchObject({ agentId, sessionKey: 'heartbeat', channel: 'heartbeat' });
    expect(await getOutboundByRun(db, run.id)).toMatchObject({ ...target, payload: { text: 'all fine?' } });
  });

  it('an answer of only HEARTBEAT_OK sends nothing: the fire says why', async () => {
    const { db, runtime } = env();
    const { agentId, dsl } = await beater(db, { interval: '1h', prompt: 'say:HEARTBEAT_OK', target: 'chat_a:team:room' });
    const job = (await syncHeartbeatJob({ db, logger: runtime.logger }, { id: agentId, dsl }))!;
    const f = firer();
    await f.fire({ id: job.id, scheduledAt: new Date('2026-01-15T12:00:00Z'), data: fireData(job.id) });
    const [row] = await settled(db, job.id);
    expect(row).toMatchObject({ status: 'succeeded', outputExcerpt: 'HEARTBEAT_OK', deliveryStatus: 'skipped', deliveryError: expect.stringContaining('HEARTBEAT_OK') });
    expect(await getOutboundByRun(db, row!.runId!)).toBeUndefined();
  });

  it('a changed DSL changes the job; a removed heartbeat disables it and keeps its history', async () => {
    const { db, runtime } = env();
    const { agentId, dsl } = await beater(db, { interval: '1h' });
    const ports = { db, logger: runtime.logger };
    const first = (await syncHeartbeatJob(ports, { id: agentId, dsl }))!;
    expect(first.message).toContain('HEARTBEAT_OK');
    expect(first.deliver).toBeNull();
    dsl.metadata.nodes[0]!.configuration.heartbeat = { interval: '15m', timezone: 'Asia/Tokyo' };
    expect(await syncHeartbeatJob(ports, { id: agentId, dsl })).toMatchObject({ id: first.id, schedule: '0 */15 * * * *', timezone: 'Asia/Tokyo', disabled: false });
    await insertCronRun(db, { cronJobId: first.id, scheduledAt: new Date('2026-01-01T00:00:00Z'), runId: null });
    dsl.metadata.nodes[0]!.configuration.heartbeat = undefined;
    expect(await syncHeartbeatJob(ports, { id: agentId, dsl })).toMatchObject({ id: first.id, disabled: true });
    expect(await runsOf(db, first.id)).toHaveLength(1);
  });
});

describe('startScheduler (embedded: memory bus, croner)', () => {
  const env = harness();

  it('follows the table: announced changes at once, agent deletion, and a missed message at the next reconcile', async () => {
    const { runtime, db } = env();
    await startScheduler(runtime, { reconcileMs: 400, sweepMs: 200 });
    const ids = async () => (await runtime.bus.scheduler.list()).map((s) => s.id);
    const announce = (id: string) => runtime.bus.pubsub.publish(PubSubChannels.invalidate, { area: 'cron', id });

    // A */1 job fires every second, each tick once, in order.
    const { agentId, job } = await agentWithJob(db, { schedule: '*/1 * * * * *' });
    await announce(job.id);
    await waitFor(async () => (await ids()).includes(job.id), 2_000);
    const rows = await waitFor(async () => {
      const r = (await runsOf(db, job.id)).filter((x) => x.status === 'succeeded');
      return r.length >= 3 ? r : undefined;
    }, 6_000);
    const ticks = rows.map((r) => r.scheduledAt.getTime()).sort((a, b) => a - b);
    for (const t of ticks) expect(t % 1000).toBe(0);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);

    // Toggled off: no new tick after the change.
    await updateCronJob(db, job.id, { disabled: true });
    const offAt = Date.now();
    await announce(job.id);
    await waitFor(async () => !(await ids()).includes(job.id), 2_000);
    await new Promise((r) => setTimeout(r, 2_200));
    const after = (await runsOf(db, job.id)).filter((r) => r.scheduledAt.getTime() > offAt + 1000);
    expect(after).toEqual([]);

    // No message at all: the periodic reconcile installs it.
    const silent = await agentWithJob(db);
    await waitFor(async () => (await ids()).includes(silent.job.id), 3_000);

    // Deleting the agent cascades to its jobs; the agents announcement reconciles everything.
    await deleteRuleChain(db, silent.agentId);
    await runtime.bus.pubsub.publish(PubSubChannels.invalidate, { area: 'agents', id: silent.agentId });
    await waitFor(async () => !(await ids()).includes(silent.job.id), 3_000);
    expect(agentId).toBeTruthy();
  });
});

describe('retention (startScheduler runs it: retention.* days, every sweep_minutes)', () => {
  const env = harness();

  it('deletes finished runs past retention.runs_days (default 30) and logs it; recent and running ones stay', async () => {
    const { runtime, db, logs } = env();
    const agentId = uid('agent');
    await insertRuleChain(db, { id: agentId, kind: 'agent', agentId: null, name: agentId, category: null, dsl: {} });
    const day = 24 * 3600 * 1000;
    for (const [id, status, ageDays] of [['expired', 'succeeded', 31], ['recent', 'succeeded', 29], ['stuck', 'running', 40]] as const) {
      await insertRun(db, { id: `${agentId}-${id}`, agentId, sessionId: null, source: 'api', request: {} });
      if (status === 'succeeded') await finishRun(db, `${agentId}-${id}`, { status });
      await db
        .updateTable('runs')
        .set({ status, created_at: new Date(Date.now() - ageDays * day), finished_at: status === 'running' ? null : new Date(Date.now() - ageDays * day) })
        .where('id', '=', `${agentId}-${id}`)
        .execute();
    }
    expect(runtime.config.current.retention).toMatchObject({ runs_days: 30, sweep_minutes: 60 });
    await startScheduler(runtime, { reconcileMs: 60_000, sweepMs: 60_000, retentionDelayMs: 50 });
    await waitFor(async () => (await getRun(db, `${agentId}-expired`)) === undefined, 5_000);
    expect(await getRun(db, `${agentId}-recent`)).toMatchObject({ status: 'succeeded' });
    expect(await getRun(db, `${agentId}-stuck`)).toMatchObject({ status: 'running' });
    await waitFor(async () => logs.some((l) => l.includes('retention: pass done') && l.includes('"runs":1')), 2_000);
  });
});
