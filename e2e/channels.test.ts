import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getOutboundByRun, type Db } from '@agentry/db';
import {
  describeWithServers,
  startFakeModel,
  startFakeTelegram,
  startTestCluster,
  waitFor,
  type FakeInboundEvent,
  type FakeModel,
  type FakePlatform,
  type TestCluster,
} from '@agentry/testing';
import { fakeModelConfig } from './harness.js';

const PROVIDER_KEY = 'sk-channels-provider-key-0123456789';

/**
 * Channels end to end in cluster mode: gateway, agent-worker and channel-connector as separate
 * processes on real Postgres and Redis, a fake Telegram (chat_d) as the platform. Inbound events
 * are posted the way Telegram posts them (signed with the webhook secret); answers come back to
 * the fake through the connector.
 */
describeWithServers('channels end to end (cluster mode)', () => {
  let model: FakeModel;
  let tg: FakePlatform;
  let cluster: TestCluster;
  let db: Db;
  let base: string;
  let updateSeq = 0;
  /** The data folder every service reads; its media/ folder holds what send-image/send-file name. */
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-channels-data-'));

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, text };
  };

  const post = async (accountId: string, event: FakeInboundEvent) => {
    const { headers, body } = tg.inbound(event);
    const res = await fetch(`${base}/channels/chat_d/accounts/${accountId}/events`, { method: 'POST', headers, body });
    return { status: res.status, text: await res.text(), raw: { headers, body } };
  };

  const dm = (senderId: string, text: string): FakeInboundEvent => ({ eventId: `e${++updateSeq}`, chatId: senderId, chatType: 'dm', senderId, text });
  const answersTo = (chatId: string) => tg.sent.filter((m) => m.chatId === chatId).map((m) => m.text);

  beforeAll(async () => {
    model = await startFakeModel({ apiKey: PROVIDER_KEY, defaultReply: (req) => ({ text: `answer: ${lastUser(req.body.messages)}` }) });
    tg = await startFakeTelegram();
    cluster = await startTestCluster({
      workers: 1,
      connectors: 1,
      configLines: ['data:', `  root_dir: "${dataDir}"`, ...fakeModelConfig(model, PROVIDER_KEY)],
    });
    base = cluster.baseURL;
    db = cluster.db.handle.db;
    const agent = await api('POST', '/agents', {
      ruleChain: { id: 'helper', name: 'Helper' },
      metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', systemPrompt: 'Be brief.' } }], connections: [] },
    });
    expect(agent.status, agent.text).toBe(201);
    const open = await api('POST', '/channels/chat_d/accounts', {
      id: 'tg',
      name: 'Team bot',
      dm_policy: 'allow',
      group_policy: 'disabled',
      ...tg.account,
      binding: { agentId: 'helper' },
    });
    expect(open.status, open.text).toBe(201);
    const listed = await api('POST', '/channels/chat_d/accounts', {
      id: 'tg_vip',
      dm_policy: 'allowlist',
      allow_from: ['4242'],
      ...tg.account,
      binding: { agentId: 'helper' },
    });
    expect(listed.status, listed.text).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    await tg?.close();
    await model?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('an inbound DM on a bound account is answered through the same account', async () => {
    const res = await post('tg', dm('1001', 'hello there'));
    expect(res.status).toBe(200);
    await waitFor(async () => answersTo('1001').length > 0, 20_000);
    expect(answersTo('1001')).toEqual(['answer: hello there']);
    // The conversation is kept per peer: the second turn sees the first.
    await post('tg', dm('1001', 'and again'));
    await waitFor(async () => answersTo('1001').length > 1, 20_000);
    const second = model.requests.at(-1)!.body.messages.map((m) => m.content);
    expect(second).toEqual(expect.arrayContaining(['hello there', 'answer: hello there', 'and again']));
  });

  it('group messages are blocked by group_policy disabled; an allowlist admits only allow_from', async () => {
    const before = model.requests.length;
    const group = await post('tg', { eventId: `e${++updateSeq}`, chatId: '-500', chatType: 'group', senderId: '1001', text: 'group hello' });
    expect(group.status).toBe(200);
    const stranger = await post('tg_vip', dm('4343', 'let me in'));
    expect(stranger.status).toBe(200);
    const vip = await post('tg_vip', dm('4242', 'vip here'));
    expect(vip.status).toBe(200);
    // Events are handled in order: once the admitted one is answered, the blocked ones had their chance.
    await waitFor(async () => answersTo('4242').length > 0, 20_000);
    expect(answersTo('4242')).toEqual(['answer: vip here']);
    expect(answersTo('-500')).toEqual([]);
    expect(answersTo('4343')).toEqual([]);
    expect(model.requests.slice(before).map((r) => lastUser(r.body.messages))).toEqual(['vip here']);
  });

  it('the same inbound event delivered twice produces one answer', async () => {
    const event = dm('2002', 'only once please');
    const first = await post('tg', event);
    // Telegram redelivers the identical request (same update, same message id).
    const again = await fetch(`${base}/channels/chat_d/accounts/tg/events`, { method: 'POST', headers: first.raw.headers, body: first.raw.body });
    expect([first.status, again.status]).toEqual([200, 200]);
    await waitFor(async () => answersTo('2002').length > 0, 20_000);
    await post('tg', dm('2002', 'second message'));
    await waitFor(async () => answersTo('2002').length > 1, 20_000);
    expect(answersTo('2002')).toEqual(['answer: only once please', 'answer: second message']);
  });

  it('a platform 500 is retried and then succeeds; a 4xx is not retried', async () => {
    tg.failNext(1, { status: 500 });
    await post('tg', dm('3003', 'flaky platform'));
    await waitFor(async () => answersTo('3003').length > 0, 20_000);
    expect(answersTo('3003')).toEqual(['answer: flaky platform']);
    const retried = await replyOf('flaky platform');
    expect(retried).toMatchObject({ status: 'sent', attempts: 2 });

    tg.failNext(1, { status: 403, body: { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' } });
    const sendsBefore = tg.calls.filter((c) => c.path.endsWith('/sendMessage')).length;
    await post('tg', dm('3004', 'blocked user'));
    const refused = await waitFor(async () => {
      const m = await replyOf('blocked user');
      return m?.status === 'failed' ? m : undefined;
    }, 20_000);
    expect(refused).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('bot was blocked by the user') });
    expect(tg.calls.filter((c) => c.path.endsWith('/sendMessage')).length).toBe(sendsBefore + 1);
  });

  it('POST /channels/{platform}/send answers with the platform message id, or 502 with the platform message', async () => {
    const ok = await api('POST', '/channels/chat_d/send', { chatId: '777', message: 'operator says hi', accountId: 'tg' });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ success: true, messageId: tg.sent.at(-1)!.messageId });
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '777', text: 'operator says hi' });

    tg.failNext(1, { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } });
    const bad = await api('POST', '/channels/chat_d/send', { chatId: '778', message: 'nobody home' });
    expect(bad.status).toBe(502);
    expect(bad.body.error).toEqual(expect.stringContaining('chat not found'));
  });

  it('send-image and send-file deliver a file of the media area, bytes and name, through the connector', async () => {
    const media = path.join(dataDir, 'media', 'reports');
    fs.mkdirSync(media, { recursive: true });
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(1000, 7)]);
    fs.writeFileSync(path.join(media, 'chart.png'), png);
    const csv = Buffer.from('week,answers\n1,42\n');
    fs.writeFileSync(path.join(media, 'weekly.csv'), csv);

    const image = await api('POST', '/channels/chat_d/send-image', { chatId: '881', imagePath: 'reports/chart.png', accountId: 'tg' });
    expect(image.status, image.text).toBe(200);
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '881', kind: 'image', bytes: png.length, messageId: image.body.messageId });

    const file = await api('POST', '/channels/chat_d/send-file', { chatId: '881', filePath: 'reports/weekly.csv', accountId: 'tg' });
    expect(file.status, file.text).toBe(200);
    expect(tg.sent.at(-1)).toMatchObject({ chatId: '881', kind: 'file', fileName: 'weekly.csv', bytes: csv.length });

    // A path out of the media area never reaches the platform.
    const before = tg.sent.length;
    const escape = await api('POST', '/channels/chat_d/send-file', { chatId: '881', filePath: '../config.yaml', accountId: 'tg' });
    expect(escape.status).toBe(400);
    expect(tg.sent.length).toBe(before);
  });

  it('a failed run tells the chat so instead of staying silent', async () => {
    model.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error', param: null, code: null } } });
    await post('tg', dm('5005', 'this will fail'));
    await waitFor(async () => answersTo('5005').length > 0, 20_000);
    expect(answersTo('5005')[0]).toMatch(/^Sorry, I could not answer that: .*HTTP 400: context too long/);
  });

  it('a message to a disabled agent gets the failure notice naming why; enabled again, it answers', async () => {
    const setDisabled = async (disabled: boolean) => {
      const dsl = (await api('GET', '/agents/helper')).body as { ruleChain: Record<string, unknown> };
      const res = await api('PUT', '/agents/helper', { ...dsl, ruleChain: { ...dsl.ruleChain, disabled } });
      expect(res.status, res.text).toBe(200);
    };
    await setDisabled(true);
    try {
      const calls = model.requests.length;
      await post('tg', dm('6006', 'anyone there?'));
      await waitFor(async () => answersTo('6006').length > 0, 20_000);
      expect(answersTo('6006')).toEqual(['Sorry, I could not answer that: Not allowed: agent "helper" is disabled']);
      expect(model.requests.length).toBe(calls);
    } finally {
      await setDisabled(false);
    }
    await post('tg', dm('6006', 'and now?'));
    await waitFor(async () => answersTo('6006').length > 1, 20_000);
    expect(answersTo('6006')[1]).toBe('answer: and now?');
  });

  it('an agent sends through a channel with the send_message tool', async () => {
    const notifier = await api('POST', '/agents', {
      ruleChain: { id: 'notifier', name: 'Notifier' },
      metadata: {
        nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', tools: [{ type: 'builtin', name: 'send_message' }] } }],
        connections: [],
      },
    });
    expect(notifier.status, notifier.text).toBe(201);
    const send = { toolCalls: [{ name: 'send_message', arguments: JSON.stringify({ platform: 'chat_d', chatId: '9009', message: 'ping from the agent', accountId: 'tg' }) }] };
    // Not through an account an admin has not bound to the agent.
    model.script(send, { text: 'I could not.' });
    const refused = await api('POST', '/chat/completions', { model: 'notifier', messages: [{ role: 'user', content: 'tell 9009 ping' }] });
    expect(refused.status, refused.text).toBe(200);
    expect(String(model.requests.at(-1)!.body.messages.find((m) => m.role === 'tool')?.content)).toMatch(/no binding connects them/);
    expect(answersTo('9009')).toEqual([]);
    const current = (await api('GET', '/bindings')).body as { bindings: unknown[] };
    const bound = await api('PUT', '/bindings', { bindings: [...current.bindings, { agentId: 'notifier', match: { channel: 'chat_d', accountId: 'tg' } }] });
    expect(bound.status, bound.text).toBe(200);
    model.script(send, { text: 'I sent it.' });
    const chat = await api('POST', '/chat/completions', { model: 'notifier', messages: [{ role: 'user', content: 'tell 9009 ping' }] });
    expect(chat.status, chat.text).toBe(200);
    expect(answersTo('9009')).toEqual(['ping from the agent']);
    const toolResult = model.requests.at(-1)!.body.messages.find((m) => m.role === 'tool');
    expect(JSON.parse(String(toolResult?.content))).toEqual({ success: true, messageId: tg.sent.find((m) => m.chatId === '9009')!.messageId });
  });

  it("send_message reaches only the chats the account admits; an admin's agent reaches past allow_from only to chats its chatIds pin (issue 35)", async () => {
    const sender = await api('POST', '/agents', {
      ruleChain: { id: 'closed_sender', name: 'Closed sender' },
      metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', tools: [{ type: 'builtin', name: 'send_message' }] } }], connections: [] },
    });
    expect(sender.status, sender.text).toBe(201);
    // An account that admits one chat (both policies closed), bound to that agent.
    const closed = await api('POST', '/channels/chat_d/accounts', { id: 'tg_closed', dm_policy: 'allowlist', group_policy: 'disabled', allow_from: ['4343'], ...tg.account, binding: { agentId: 'closed_sender' } });
    expect(closed.status, closed.text).toBe(201);
    const sendTo = (chatId: string, message: string) => ({ toolCalls: [{ name: 'send_message', arguments: JSON.stringify({ platform: 'chat_d', chatId, message, accountId: 'tg_closed' }) }] });
    const toolResult = () => String(model.requests.at(-1)!.body.messages.find((m) => m.role === 'tool')?.content);
    const chat = async (agent: string) => {
      const res = await api('POST', '/chat/completions', { model: agent, messages: [{ role: 'user', content: 'send it' }] });
      expect(res.status, res.text).toBe(200);
    };

    // A chat the account does not admit: refused as a tool error naming the chat and the account only.
    model.script(sendTo('9010', 'not for you'), { text: 'I could not.' });
    await chat('closed_sender');
    expect(toolResult()).toMatch(/chat "9010" is not in the allow_from of chat_d account "tg_closed"/);
    expect(toolResult()).not.toContain('4343');
    expect(answersTo('9010')).toEqual([]);

    // The chat it admits: sent.
    model.script(sendTo('4343', 'hello allowed chat'), { text: 'Sent.' });
    await chat('closed_sender');
    expect(JSON.parse(toolResult())).toMatchObject({ success: true });
    expect(answersTo('4343')).toEqual(['hello allowed chat']);
    // No account named: the first one bound to the agent (not the platform's first, "tg"), so the same rules hold.
    const unnamed = (chatId: string, message: string) => ({ toolCalls: [{ name: 'send_message', arguments: JSON.stringify({ platform: 'chat_d', chatId, message }) }] });
    model.script(unnamed('9011', 'no account named'), { text: 'I could not.' });
    await chat('closed_sender');
    expect(toolResult()).toMatch(/chat "9011" is not in the allow_from of chat_d account "tg_closed"/);
    expect(answersTo('9011')).toEqual([]);

    // An admin's agent (open mode: saves are the admin's) that pins 9012 in chatIds reaches it; not 9013.
    const pinner = await api('POST', '/agents', {
      ruleChain: { id: 'pinner', name: 'Pinner' },
      metadata: {
        nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', tools: [{ type: 'builtin', name: 'send_message', config: { chatIds: ['9012', '9013'] } }] } }],
        connections: [],
      },
    });
    expect(pinner.status, pinner.text).toBe(201);
    const current = (await api('GET', '/bindings')).body as { bindings: unknown[] };
    const bound = await api('PUT', '/bindings', { bindings: [...current.bindings, { agentId: 'pinner', match: { channel: 'chat_d', accountId: 'tg_closed' } }] });
    expect(bound.status, bound.text).toBe(200);
    model.script(sendTo('9012', 'pinned by an admin'), { text: 'Sent.' });
    await chat('pinner');
    expect(JSON.parse(toolResult())).toMatchObject({ success: true });
    expect(answersTo('9012')).toEqual(['pinned by an admin']);
    // Pinning is not reaching anything: a chat outside chatIds is still refused by the tool's own list.
    model.script(sendTo('9014', 'not pinned'), { text: 'I could not.' });
    await chat('pinner');
    expect(toolResult()).toMatch(/may not send to chat 9014/);
    expect(answersTo('9014')).toEqual([]);
  });

  it('an inbound message runs as its channel peer, and its usage shows under that principal (issue 35)', async () => {
    await post('tg', dm('7007', 'who am I'));
    await waitFor(async () => answersTo('7007').length > 0, 20_000);
    const runs = await db.selectFrom('runs').select(['id', 'principal', 'request']).where('source', '=', 'chat_d').execute();
    const run = runs.find((r) => JSON.stringify(r.request).includes('who am I'))!;
    expect(run.principal).toBe('channel:chat_d:tg:7007');
    const usage = async () => {
      const res = await api('GET', '/usage?groupBy=principal');
      expect(res.status, res.text).toBe(200);
      return (res.body as { data: Array<{ key: string; requests: number }> }).data.find((g) => g.key === 'channel:chat_d:tg:7007');
    };
    await waitFor(async () => (await usage()) !== undefined, 20_000);
    expect((await usage())!.requests).toBe(1);
  });

  it('no response and no log line carries an account secret', async () => {
    const secrets = Object.entries(tg.account).filter(([k]) => k !== 'api_base').map(([, v]) => v);
    expect(secrets.length).toBeGreaterThan(0);
    const read = await api('GET', '/channels');
    const one = await api('GET', '/channels/chat_d/accounts/tg');
    expect(one.body).toMatchObject({ id: 'tg', hasSecret: true, dmPolicy: 'allow', groupPolicy: 'disabled' });
    const logs = cluster.processes.map((p) => p.output()).join('\n');
    for (const secret of secrets) {
      expect(read.text).not.toContain(secret);
      expect(one.text).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });

  async function replyOf(userText: string) {
    const rows = await db.selectFrom('runs').select(['id', 'request']).where('source', '=', 'chat_d').execute();
    const match = rows.find((r) => JSON.stringify(r.request).includes(JSON.stringify(userText)));
    return match ? getOutboundByRun(db, match.id) : undefined;
  }
});

function lastUser(messages: ReadonlyArray<{ role: string; content?: unknown }>): string {
  const last = [...messages].reverse().find((m) => m.role === 'user');
  return typeof last?.content === 'string' ? last.content : '';
}
