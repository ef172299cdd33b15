import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '@agentry/bus';
import { enqueueOutbound, queueOutbound, sendAndWait } from '@agentry/channels';
import {
  finishCronRun,
  getOutboundMessage,
  insertCronJob,
  insertCronRun,
  insertRuleChain,
  insertRun,
  listCronRuns,
  recordInboundEvent,
  upsertChannelAccount,
  writeWorkspaceFile,
  type Db,
  type JsonValue,
  type OutboundMessageRecord,
} from '@agentry/db';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite, startFakeTelegram, waitFor, type FakePlatform } from '@agentry/testing';
import { startChannelConnector } from '@agentry/channel-connector';

/**
 * The connector against a fake Telegram on an embedded runtime (PGlite, memory bus), with short
 * backoffs so retries happen within the test.
 */
describe('channel-connector', () => {
  let runtime: Runtime;
  let db: Db;
  let tg: FakePlatform;
  const logs: string[] = [];
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-connector-'));

  const oldEvent = { platform: 'chat_d', accountId: 'tg', eventId: 'evt-kept-forever' };

  beforeAll(async () => {
    tg = await startFakeTelegram();
    // 0: received event ids are never forgotten (the connector once pruned them after 7 days anyway).
    fs.writeFileSync(path.join(cwd, 'config.yaml'), 'retention:\n  inbound_events_days: 0\n');
    runtime = await bootstrap({
      service: 'connector-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'connector-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: (line: string) => void logs.push(line) },
      openDb: () => createTestPglite(),
      openBus: (logger) => createMemoryBus({ logger }),
    });
    db = runtime.db.db;
    // Recorded a month ago, before the connector (and its first sweep pass) starts.
    await recordInboundEvent(db, oldEvent);
    await db.updateTable('inbound_events').set({ received_at: new Date(Date.now() - 30 * 24 * 3600_000) }).where('event_id', '=', oldEvent.eventId).execute();
    await startChannelConnector(runtime, { baseBackoffMs: 100, maxBackoffMs: 400, sweepMs: 200, sweepGraceMs: 300, maxAttempts: 3, requestTimeoutMs: 2000 });
    const { app_secret, secret, ...settings } = tg.account;
    await upsertChannelAccount(db, {
      platform: 'chat_d',
      id: 'tg',
      name: 'tg',
      enabled: true,
      settings: settings as Record<string, JsonValue>,
      secretsSealed: runtime.secrets.seal(JSON.stringify({ app_secret, secret })),
      apiKeyHash: null,
      fileHmac: null,
    });
    await upsertChannelAccount(db, { platform: 'chat_d', id: 'off', name: 'off', enabled: false, settings: settings as Record<string, JsonValue>, secretsSealed: null, apiKeyHash: null, fileHmac: null });
  });

  afterAll(async () => {
    await runtime?.lifecycle.shutdown('test');
    await tg?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  const send = (input: { chatId: string; text?: string; kind?: 'text' | 'image' | 'file'; payload?: Record<string, JsonValue>; accountId?: string }) =>
    sendAndWait(
      { db, queue: runtime.bus.queue, events: runtime.bus.pubsub },
      {
        platform: 'chat_d',
        accountId: input.accountId ?? 'tg',
        chatId: input.chatId,
        kind: input.kind ?? 'text',
        payload: input.payload ?? { text: input.text ?? '' },
        source: 'test',
      },
      { timeoutMs: 10_000, pollMs: 200 },
    );
  const settledRow = (id: string) =>
    waitFor(async () => {
      const m = await getOutboundMessage(db, id);
      return m && (m.status === 'sent' || m.status === 'failed') ? m : undefined;
    }, 10_000);

  it('sends a text and records the platform message id', async () => {
    const outcome = await send({ chatId: '11', text: 'hello' });
    expect(outcome.kind).toBe('sent');
    expect(outcome.message).toMatchObject({ status: 'sent', attempts: 1, platformMessageId: tg.sent.at(-1)!.messageId });
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '11', kind: 'text', text: 'hello' });
  });

  it('splits a long answer at the platform limit, nothing lost, in order', async () => {
    const paragraphs = Array.from({ length: 30 }, (_, i) => `Paragraph ${i}: ${'word '.repeat(60).trim()}`);
    const text = paragraphs.join('\n\n');
    expect(text.length).toBeGreaterThan(8000);
    const outcome = await send({ chatId: '12', text });
    expect(outcome.kind).toBe('sent');
    const parts = tg.sent.filter((m) => m.chatId === '12').map((m) => m.text!);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((p) => p.length <= 4096)).toBe(true);
    expect(parts.join('\n\n')).toBe(text);
    // The first part's id names the message.
    expect(outcome.message.platformMessageId).toBe(tg.sent.find((m) => m.chatId === '12')!.messageId);
    expect(outcome.message.partsSent).toBe(parts.length);
  });

  it('retries a 5xx with backoff, then succeeds', async () => {
    tg.failNext(2, { status: 502 });
    const outcome = await send({ chatId: '13', text: 'after two failures' });
    expect(outcome.kind).toBe('sent');
    expect(outcome.message.attempts).toBe(3);
    expect(tg.sent.filter((m) => m.chatId === '13')).toHaveLength(1);
  });

  it('honours Retry-After on a 429', async () => {
    tg.failNext(1, { status: 429, retryAfterSeconds: 1 });
    const started = Date.now();
    const outcome = await send({ chatId: '14', text: 'rate limited' });
    expect(outcome.kind).toBe('sent');
    // The base backoff is 100 ms: only the platform's Retry-After explains a wait of a second.
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(outcome.message.attempts).toBe(2);
  });

  it('does not retry a 4xx, and gives up after maxAttempts on persistent 5xx', async () => {
    tg.failNext(1, { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } });
    const refused = await send({ chatId: '15', text: 'nobody' });
    expect(refused).toMatchObject({ kind: 'failed', message: { attempts: 1, error: expect.stringContaining('chat not found') } });

    tg.failNext(3, { status: 500 });
    const exhausted = await send({ chatId: '16', text: 'never' });
    expect(exhausted).toMatchObject({ kind: 'failed', message: { attempts: 3, error: expect.stringMatching(/gave up after 3 tries/) } });
    expect(tg.sent.filter((m) => m.chatId === '16')).toHaveLength(0);
  });

  it('fails at once for a disabled or deleted account', async () => {
    const off = await send({ chatId: '17', text: 'x', accountId: 'off' });
    expect(off).toMatchObject({ kind: 'failed', message: { error: expect.stringMatching(/disabled/) } });
    const gone = await send({ chatId: '17', text: 'x', accountId: 'ghost' });
    expect(gone).toMatchObject({ kind: 'failed', message: { error: expect.stringMatching(/no longer exists/) } });
  });

  it("records the delivery of a cron fire's answer on its cron_runs row: sent, or failed with the platform's refusal", async () => {
    await insertRuleChain(db, { id: 'cron_agent', kind: 'agent', agentId: null, name: 'cron_agent', category: null, dsl: {} });
    const job = await insertCronJob(db, { id: 'cron_deliver', agentId: 'cron_agent', name: 'job', schedule: '0 0 0 1 1 *', message: 'hi', timezone: 'UTC', disabled: false, deliver: { platform: 'chat_d', accountId: 'tg', chatId: '30' } });
    const answered = async (runId: string, tick: string, chatId: string) => {
      await insertRun(db, { id: runId, agentId: 'cron_agent', sessionId: null, source: 'cron', request: { messages: [] } });
      const fire = (await insertCronRun(db, { cronJobId: job.id, scheduledAt: new Date(tick), runId }))!;
      // As the worker leaves it: the run ended and its fire completed, the answer waiting in the outbox.
      const id = await queueOutbound(db, { platform: 'chat_d', accountId: 'tg', chatId, kind: 'text', payload: { text: `answer ${runId}` }, source: 'agent', runId });
      await finishCronRun(db, fire.id, { status: 'succeeded', outputExcerpt: 'answer', deliveryStatus: 'queued', deliveryError: 'not sent yet' });
      await enqueueOutbound(runtime.bus.queue, id);
      return id;
    };
    // The connector records the delivery just after the message's own row.
    const fireOf = (runId: string) =>
      waitFor(async () => {
        const fire = (await listCronRuns(db, job.id, { limit: 10, offset: 0 })).data.find((r) => r.runId === runId);
        return fire?.deliveryStatus === 'queued' ? undefined : fire;
      }, 10_000);

    await settledRow(await answered('cron_sent', '2026-03-01T10:00:00Z', '30'));
    expect(await fireOf('cron_sent')).toMatchObject({ status: 'succeeded', deliveryStatus: 'sent', deliveryError: null });

    tg.failNext(1, { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } });
    await settledRow(await answered('cron_refused', '2026-03-01T10:01:00Z', '31'));
    expect(await fireOf('cron_refused')).toMatchObject({ status: 'succeeded', deliveryStatus: 'failed', deliveryError: expect.stringContaining('chat not found') });
  });

  it('sends an image from an agent workspace, then the same image by its platform key', async () => {
    await insertRuleChain(db, { id: 'pics', kind: 'agent', agentId: null, name: 'pics', category: null, dsl: { ruleChain: { id: 'pics', name: 'pics' }, metadata: { nodes: [], connections: [] } } });
    await writeWorkspaceFile(db, 'pics', 'out/chart.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4]), 'overwrite');
    const image = await send({ chatId: '18', kind: 'image', payload: { agentId: 'pics', path: 'out/chart.png' } });
    expect(image.kind).toBe('sent');
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '18', kind: 'image', bytes: 8 });
    const key = tg.sent.at(-1)!.key!;
    const byKey = await send({ chatId: '18', kind: 'image', payload: { key } });
    expect(byKey.kind).toBe('sent');
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '18', kind: 'image', key });

    const missing = await send({ chatId: '18', kind: 'image', payload: { agentId: 'pics', path: 'nope.png' } });
    expect(missing).toMatchObject({ kind: 'failed', message: { error: expect.stringMatching(/no file "nope.png"/) } });
  });

  it('a message whose job was lost is sent by the sweep; a duplicate job sends nothing twice', async () => {
    // Committed without a job (as when the queue was down at the time).
    const id = await queueOutbound(db, { platform: 'chat_d', accountId: 'tg', chatId: '19', kind: 'text', payload: { text: 'stranded' }, source: 'test' });
    const m: OutboundMessageRecord = await settledRow(id);
    expect(m.status).toBe('sent');
    await enqueueOutbound(runtime.bus.queue, id, { attempt: 99 });
    await new Promise((r) => setTimeout(r, 300));
    expect(tg.sent.filter((s) => s.chatId === '19')).toHaveLength(1);
  });

  it('keeps inbound event ids as retention.inbound_events_days says (0: kept), whatever their age', async () => {
    // A stranded message sent proves a sweep pass ran after the old id was recorded.
    const id = await queueOutbound(db, { platform: 'chat_d', accountId: 'tg', chatId: '20', kind: 'text', payload: { text: 'after a sweep' }, source: 'test' });
    expect((await settledRow(id)).status).toBe('sent');
    expect(await recordInboundEvent(db, oldEvent)).toBe(false); // still known: a redelivery is still dropped
  });

  it('logs carry no secret', () => {
    const text = logs.join('');
    expect(text).toContain('outbound message sent');
    expect(text).not.toContain(tg.account.app_secret);
    expect(text).not.toContain(tg.account.secret);
  });
});
