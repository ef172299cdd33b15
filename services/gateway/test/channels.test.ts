import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { accountContext, adapterFor, MemoryTokenCache } from '@agentry/channels';
import { getChannelAccount } from '@agentry/db';
import { startFakeDingTalk, startFakeSlack, startFakeTelegram } from '@agentry/testing';
import { createAgent, describeOnBothEngines, uid, type Env } from './resources-harness.js';

const PLATFORMS = ['api', 'chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'];

/**
 * Channel accounts, bindings, the send routes' validation and the inbound events URL's
 * verification, through the gateway alone (no connector: sends that pass validation are covered
 * end to end in e2e/channels.test.ts).
 */
describeOnBothEngines('channels REST', (env: () => Env) => {
  const json = (body: string) => JSON.parse(body) as Record<string, unknown>;

  it('GET /channels lists all seven platforms; unknown platforms are 404 on every route', async () => {
    const res = await env().req('GET', '/api/v1/channels');
    expect(res.statusCode).toBe(200);
    const platforms = json(res.body).platforms as Record<string, { enabled: boolean; accounts: object }>;
    expect(Object.keys(platforms).sort()).toEqual(PLATFORMS);
    for (const p of PLATFORMS) expect(platforms[p]).toMatchObject({ enabled: true, accounts: expect.any(Object) });

    for (const [method, url, body] of [
      ['GET', '/api/v1/channels/nope'],
      ['GET', '/api/v1/channels/nope/accounts/a'],
      ['POST', '/api/v1/channels/nope/accounts', { id: 'a' }],
      ['PUT', '/api/v1/channels/nope/accounts/a', { name: 'x' }],
      ['DELETE', '/api/v1/channels/nope/accounts/a'],
      ['POST', '/api/v1/channels/nope/send', { chatId: '1', message: 'hi' }],
      ['POST', '/api/v1/channels/nope/accounts/a/events', {}],
    ] as const) {
      const r = await env().req(method, url, body);
      expect(r.statusCode, `${method} ${url}`).toBe(404);
      expect(json(r.body).error).toEqual(expect.stringContaining('nope'));
    }
  });

  it('creates an account from the snake_case form and reads it back in camelCase without the secret', async () => {
    const id = uid('lark');
    const secret = `lark-app-secret-${id}-0123456789`;
    const created = await env().req('POST', '/api/v1/channels/chat_a/accounts', {
      id,
      name: 'Team Lark',
      enabled: true,
      dm_policy: 'allow',
      group_policy: 'allowlist',
      allow_from: ['oc_1'],
      app_id: 'cli_123',
      app_secret: secret,
      encrypt_key: `enc-${secret}`,
      api_base: 'http://127.0.0.1:1/open-apis',
    });
    expect(created.statusCode, created.body).toBe(201);
    const view = json(created.body);
    expect(view).toEqual({
      id,
      name: 'Team Lark',
      enabled: true,
      dmPolicy: 'allow',
      groupPolicy: 'allowlist',
      appId: 'cli_123',
      hasSecret: true,
      allowFrom: ['oc_1'],
      apiBase: 'http://127.0.0.1:1/open-apis',
    });
    const one = await env().req('GET', `/api/v1/channels/chat_a/accounts/${id}`);
    expect(json(one.body)).toEqual(view);
    const platform = await env().req('GET', '/api/v1/channels/chat_a');
    expect(json(platform.body)).toMatchObject({ enabled: true, accounts: { [id]: view } });
    for (const body of [created.body, one.body, platform.body, (await env().req('GET', '/api/v1/channels')).body]) expect(body).not.toContain(secret);
    expect(env().logs()).not.toContain(secret);

    const dup = await env().req('POST', '/api/v1/channels/chat_a/accounts', { id, app_secret: 'x' });
    expect(dup.statusCode).toBe(409);
  });

  it('refuses bad input with 400 {error}', async () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['chat_d', { id: uid('a'), dm_policy: 'open' }, /dm_policy.*allow, allowlist, disabled/],
      ['chat_d', { id: uid('a'), group_policy: 'sometimes' }, /group_policy/],
      ['chat_d', { id: uid('a'), session_scope: 'per_moon' }, /session_scope/],
      ['chat_d', { id: uid('a'), allow_from: 'everyone' }, /allow_from/],
      ['chat_d', { id: uid('a'), api_base: 'ftp://x' }, /api_base/],
      ['chat_d', { id: uid('a'), nested: { a: 1 } }, /nested/],
      // A field the platform's adapter never reads is named, not stored and ignored.
      ['chat_d', { id: uid('a'), bot_token: 'x' }, /"bot_token": not a field of chat_d accounts \(they take .*app_secret/],
      ['chat_e', { id: uid('a'), app_id: 'A1', robot_code: 'r' }, /"robot_code": not a field of chat_e/],
      ['api', { id: uid('a'), app_secret: 's' }, /"app_secret": not a field of api accounts/],
      ['chat_d', { id: 'bad id!' }, /id/],
      ['chat_d', { name: 'no id' }, /id/],
      ['chat_d', { id: uid('a'), api_key: 'sk-0123456789abcdef' }, /only api accounts/],
      ['api', { id: uid('a'), api_key: 'short' }, /16 characters/],
      ['chat_d', { id: uid('a'), binding: { agentId: 'no_such_agent' } }, /no agent "no_such_agent"/],
    ];
    for (const [platform, body, message] of cases) {
      const res = await env().req('POST', `/api/v1/channels/${platform}/accounts`, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(json(res.body).error).toMatch(message);
    }
  });

  it('updates fields, replaces and removes secrets, and deletes (taking its bindings along)', async () => {
    const agent = uid('agent');
    await createAgent(env, agent);
    const id = uid('tg');
    const first = await env().req('POST', '/api/v1/channels/chat_d/accounts', { id, app_secret: 'first-bot-token', binding: { agentId: agent } });
    expect(first.statusCode, first.body).toBe(201);
    let bindings = json((await env().req('GET', '/api/v1/bindings')).body).bindings as unknown[];
    expect(bindings).toContainEqual({ agentId: agent, match: { default: false, channel: 'chat_d', accountId: id } });

    const updated = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { name: 'Renamed', enabled: false, group_policy: 'disabled', app_secret: 'second-bot-token' });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(json(updated.body)).toMatchObject({ id, name: 'Renamed', enabled: false, groupPolicy: 'disabled', dmPolicy: 'allow', hasSecret: true });
    expect(updated.body).not.toContain('second-bot-token');

    const cleared = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { app_secret: null, group_policy: null });
    expect(json(cleared.body)).toMatchObject({ hasSecret: false, groupPolicy: 'allow' });

    expect((await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { id: 'other' })).statusCode).toBe(400);
    expect((await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { dm_policy: 'maybe' })).statusCode).toBe(400);
    expect((await env().req('PUT', `/api/v1/channels/chat_d/accounts/${uid('ghost')}`, { name: 'x' })).statusCode).toBe(404);

    const deleted = await env().req('DELETE', `/api/v1/channels/chat_d/accounts/${id}`);
    expect(deleted.statusCode).toBe(200);
    expect(json(deleted.body)).toEqual({ success: true });
    bindings = json((await env().req('GET', '/api/v1/bindings')).body).bindings as unknown[];
    expect(bindings).not.toContainEqual({ agentId: agent, match: { default: false, channel: 'chat_d', accountId: id } });
    expect((await env().req('DELETE', `/api/v1/channels/chat_d/accounts/${id}`)).statusCode).toBe(404);
    expect((await env().req('GET', `/api/v1/channels/chat_d/accounts/${id}`)).statusCode).toBe(404);
  });

  it('pointing an account at another host clears its stored secrets unless the same request brings new ones', async () => {
    const heard: string[] = [];
    const listener = http.createServer((req, res) => {
      heard.push(`${req.url ?? ''} ${JSON.stringify(req.headers)}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"result":{"message_id":1}}');
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    const id = uid('tg');
    const stored = async () => (await getChannelAccount(env().db, 'chat_d', id))!;
    try {
      expect((await env().req('POST', '/api/v1/channels/chat_d/accounts', { id, app_secret: 'bot-token-for-the-old-host', api_base: 'https://api.telegram.example' })).statusCode).toBe(201);
      const same = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { api_base: 'https://api.telegram.example', name: 'Same host' });
      expect(json(same.body)).toMatchObject({ name: 'Same host', hasSecret: true });

      const moved = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { api_base: elsewhere });
      expect(moved.statusCode, moved.body).toBe(200);
      expect(json(moved.body)).toMatchObject({ apiBase: elsewhere, hasSecret: false });
      expect((await stored()).secretsSealed).toBeNull();
      // What a send through the moved account would carry: no token, so nothing leaves for the new host.
      const io = { fetch: globalThis.fetch, tokens: new MemoryTokenCache(), now: Date.now, timeoutMs: 5_000 };
      await expect(adapterFor('chat_d')!.send(accountContext(await stored(), env().runtime.secrets), io, '5', { kind: 'text', text: 'hi' })).rejects.toThrow();
      expect(heard.join('\n')).not.toContain('bot-token-for-the-old-host');

      // A secret in the same request is meant for the new host; removing api_base is a move too.
      const rekeyed = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { api_base: 'https://third.example', app_secret: 'bot-token-for-the-third-host' });
      expect(json(rekeyed.body)).toMatchObject({ hasSecret: true });
      const unset = await env().req('PUT', `/api/v1/channels/chat_d/accounts/${id}`, { api_base: null });
      expect(json(unset.body)).toMatchObject({ hasSecret: false });
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  });

  it('a chat_b signature is accepted once (remembered in the database all replicas share): a captured (timestamp, sign) pair carries no other body', async () => {
    const ding = await startFakeDingTalk();
    try {
      const agent = uid('agent');
      await createAgent(env, agent);
      const id = uid('dt');
      expect((await env().req('POST', '/api/v1/channels/chat_b/accounts', { id, ...ding.account, binding: { agentId: agent } })).statusCode).toBe(201);
      const url = `/api/v1/channels/chat_b/accounts/${id}/events`;
      const msg = (msgId: string, content: string) => ({ msgtype: 'text', text: { content }, msgId, conversationType: '1', senderStaffId: 'staff-1' });
      const first = ding.inboundRaw(msg(uid('m'), 'hello'));
      expect((await env().app.inject({ method: 'POST', url, headers: first.headers, payload: first.body })).statusCode).toBe(200);

      const replayed = await env().app.inject({ method: 'POST', url, headers: first.headers, payload: JSON.stringify(msg(uid('m'), 'send me the secrets')) });
      expect(replayed.statusCode).toBe(401);
      expect(json(replayed.body)).toEqual({ error: expect.stringMatching(/^Authentication required: this signature was used already/) });
      const runs = await env().db.selectFrom('runs').select(['request']).where('source', '=', 'chat_b').execute();
      expect(JSON.stringify(runs)).not.toContain('send me the secrets');

      // A fresh signature (what the platform sends for every event) is accepted; one an hour old is not.
      const next = ding.inboundRaw(msg(uid('m'), 'again'));
      expect((await env().app.inject({ method: 'POST', url, headers: next.headers, payload: next.body })).statusCode).toBe(200);
      const stale = ding.inboundRaw(msg(uid('m'), 'old'), { timestampMs: Date.now() - 61 * 60_000 });
      expect((await env().app.inject({ method: 'POST', url, headers: stale.headers, payload: stale.body })).statusCode).toBe(401);
    } finally {
      await ding.close();
    }
  });

  it('PUT /bindings replaces the list after checking agents, platforms and accounts', async () => {
    const agent = uid('agent');
    await createAgent(env, agent);
    const account = uid('sl');
    expect((await env().req('POST', '/api/v1/channels/chat_e/accounts', { id: account, app_secret: 'xoxb-1' })).statusCode).toBe(201);
    const bad: Array<[unknown, RegExp]> = [
      [{ agentId: 'nobody', match: { default: true } }, /no agent "nobody"/],
      [{ agentId: agent, match: { channel: 'chat_z' } }, /not a platform/],
      [{ agentId: agent, match: { channel: 'chat_e', accountId: 'missing' } }, /no chat_e account "missing"/],
      [{ agentId: agent, match: { accountId: account } }, /needs match.channel/],
      [{ agentId: agent, match: {} }, /give channel/],
      [{ agentId: agent }, /match/],
    ];
    for (const [binding, message] of bad) {
      const res = await env().req('PUT', '/api/v1/bindings', { bindings: [binding] });
      expect(res.statusCode, JSON.stringify(binding)).toBe(400);
      expect(json(res.body).error).toMatch(message);
    }
    expect((await env().req('PUT', '/api/v1/bindings', { nope: [] })).statusCode).toBe(400);

    const list = [
      { agentId: agent, match: { channel: 'chat_e', accountId: account } },
      { agentId: agent, match: { channel: 'chat_d' } },
      { agentId: agent, match: { default: true } },
    ];
    const put = await env().req('PUT', '/api/v1/bindings', { bindings: list });
    expect(put.statusCode, put.body).toBe(200);
    const shown = list.map((b) => ({ ...b, match: { default: false, ...b.match } }));
    expect(json(put.body)).toEqual({ bindings: shown });
    expect(json((await env().req('GET', '/api/v1/bindings')).body)).toEqual({ bindings: shown });
    expect(json((await env().req('PUT', '/api/v1/bindings', { bindings: [] })).body)).toEqual({ bindings: [] });
  });

  it('PUT /bindings takes the file spelling match.account_id as accountId and never widens a binding to the whole platform', async () => {
    const agent = uid('agent');
    await createAgent(env, agent);
    const account = uid('sl');
    expect((await env().req('POST', '/api/v1/channels/chat_e/accounts', { id: account, app_secret: 'xoxb-1' })).statusCode).toBe(201);
    const put = await env().req('PUT', '/api/v1/bindings', { bindings: [{ agentId: agent, match: { channel: 'chat_e', account_id: account } }] });
    expect(put.statusCode, put.body).toBe(200);
    const expected = { bindings: [{ agentId: agent, match: { default: false, channel: 'chat_e', accountId: account } }] };
    expect(json(put.body)).toEqual(expected);
    expect(json((await env().req('GET', '/api/v1/bindings')).body)).toEqual(expected);

    const refused: Array<[unknown, RegExp]> = [
      // Two spellings that disagree: neither is chosen silently.
      [{ agentId: agent, match: { channel: 'chat_e', accountId: account, account_id: 'other' } }, /bindings\[0\]\.match: accountId and account_id disagree/],
      [{ agentId: agent, match: { channel: 'chat_e', acount: account } }, /body\.bindings\.0\.match: unknown field acount/],
      [{ agentId: agent, match: { channel: 'chat_e' }, priority: 1 }, /body\.bindings\.0: unknown field priority/],
    ];
    for (const [binding, message] of refused) {
      const res = await env().req('PUT', '/api/v1/bindings', { bindings: [binding] });
      expect(res.statusCode, JSON.stringify(binding)).toBe(400);
      expect(json(res.body).error).toMatch(message);
    }
    // Refused bodies changed nothing: the account binding is still the only one.
    expect(json((await env().req('GET', '/api/v1/bindings')).body)).toEqual(expected);
    await env().req('PUT', '/api/v1/bindings', { bindings: [] });
  });

  it('an api account gets a generated key shown once; bound to one agent, it may chat with that agent only', async () => {
    const mine = uid('agent');
    const other = uid('agent');
    await createAgent(env, mine);
    await createAgent(env, other);
    const id = uid('client');
    const created = await env().req('POST', '/api/v1/channels/api/accounts', { id, description: 'CI bot', binding: { agentId: mine } });
    expect(created.statusCode, created.body).toBe(201);
    const key = json(created.body).apiKey as string;
    expect(key).toMatch(/^sk-/);
    expect(json(created.body)).toMatchObject({ id, hasSecret: true, description: 'CI bot' });
    const read = await env().req('GET', `/api/v1/channels/api/accounts/${id}`);
    expect(read.body).not.toContain(key);
    expect(env().logs()).not.toContain(key);

    const auth = { authorization: `Bearer ${key}` };
    const models = await env().app.inject({ method: 'GET', url: '/api/v1/models', headers: auth });
    expect(models.statusCode).toBe(200);
    expect((json(models.body).data as Array<{ id: string }>).map((m) => m.id)).toEqual([mine]);
    // models.retrieve sees what the list shows: the bound agent, and no other.
    const retrieved = await env().app.inject({ method: 'GET', url: `/api/v1/models/${mine}`, headers: auth });
    expect(retrieved.statusCode).toBe(200);
    expect(json(retrieved.body)).toEqual((json(models.body).data as unknown[])[0]);
    expect(json(retrieved.body)).toEqual({ id: mine, object: 'model', created: expect.any(Number), owned_by: 'agentry' });
    for (const hidden of [other, 'no-such-agent']) {
      const res = await env().app.inject({ method: 'GET', url: `/api/v1/models/${hidden}`, headers: auth });
      expect(res.statusCode).toBe(404);
      expect(json(res.body)).toEqual({ error: { message: `Not found: model "${hidden}"`, type: 'invalid_request_error', param: null, code: 'not_found' } });
    }
    const refused = await env().app.inject({
      method: 'POST',
      url: '/api/v1/chat/completions',
      headers: auth,
      payload: { model: other, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(refused.statusCode).toBe(403);
    expect((json(refused.body).error as { message: string }).message).toMatch(new RegExp(`bound to "${mine}", not to agent "${other}"`));

    // A replaced key stops working at once.
    const rotated = await env().req('PUT', `/api/v1/channels/api/accounts/${id}`, { api_key: 'sk-replacement-key-0123456789' });
    expect(rotated.statusCode).toBe(200);
    expect((await env().app.inject({ method: 'GET', url: '/api/v1/models', headers: auth })).statusCode).toBe(401);
    expect((await env().req('PUT', `/api/v1/channels/api/accounts/${id}`, { api_key: null })).statusCode).toBe(400);
    await env().req('DELETE', `/api/v1/channels/api/accounts/${id}`);
  });

  it('send routes validate before queueing', async () => {
    const agent = uid('agent');
    await createAgent(env, agent);
    const hook = uid('hook');
    expect((await env().req('POST', '/api/v1/channels/chat_a_webhook/accounts', { id: hook, app_secret: 'hook-token' })).statusCode).toBe(201);
    const off = uid('off');
    expect((await env().req('POST', '/api/v1/channels/chat_b/accounts', { id: off, enabled: false, app_id: 'k', app_secret: 's' })).statusCode).toBe(201);
    const cases: Array<[string, string, unknown, number, RegExp]> = [
      ['api', 'send', { chatId: '1', message: 'hi' }, 400, /api platform has no chats/],
      ['chat_c', 'send', { chatId: '1', message: 'hi' }, 400, /no enabled chat_c account/],
      ['chat_b', 'send', { chatId: '1', message: 'hi', accountId: off }, 400, /disabled/],
      ['chat_b', 'send', { chatId: '1', message: 'hi', accountId: 'ghost' }, 404, /ghost/],
      ['chat_a_webhook', 'send', { chatId: '1', message: '' }, 400, /message/],
      ['chat_a_webhook', 'send', { message: 'hi' }, 400, /chatId/],
      ['chat_a_webhook', 'send-image', { chatId: '1', imageKey: 'k' }, 400, /cannot send images/],
      ['chat_a_webhook', 'send-file', { chatId: '1', fileKey: 'k' }, 400, /cannot send files/],
      ['chat_d', 'send-image', { chatId: '1' }, 400, /./],
    ];
    const tgId = uid('tg');
    expect((await env().req('POST', '/api/v1/channels/chat_d/accounts', { id: tgId, app_secret: 'bot-token' })).statusCode).toBe(201);
    cases.push(
      ['chat_d', 'send-image', { chatId: '1', accountId: tgId }, 400, /give imagePath or imageKey/],
      // The key wins: the path is not even looked at (this platform then refuses images at all).
      ['chat_a_webhook', 'send-image', { chatId: '1', imagePath: '../../etc/passwd', imageKey: 'k' }, 400, /cannot send images/],
      ['chat_d', 'send-image', { chatId: '1', accountId: tgId, imagePath: 'a.png' }, 404, /file "a.png" in the media area/],
      ['chat_d', 'send-image', { chatId: '1', accountId: tgId, imagePath: 'a.png', agentId: 'nobody' }, 404, /nobody/],
      ['chat_d', 'send-image', { chatId: '1', accountId: tgId, imagePath: 'missing.png', agentId: agent }, 400, /no file "missing.png"/],
      ['chat_d', 'send-file', { chatId: '1', accountId: tgId, filePath: '../../etc/passwd', agentId: agent }, 400, /leaves the workspace/],
    );
    for (const [platform, route, body, status, message] of cases) {
      const res = await env().req('POST', `/api/v1/channels/${platform}/${route}`, body);
      expect(res.statusCode, `${platform}/${route} ${JSON.stringify(body)}: ${res.body}`).toBe(status);
      expect(json(res.body).error).toMatch(message);
    }
  });

  it('send-image and send-file read paths from the media area only: no .., absolute path, escaping link, NUL or oversized file', async () => {
    const media = path.join(env().runtime.loaded.paths.rootDir, 'media');
    fs.mkdirSync(path.join(media, 'sub'), { recursive: true });
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-outside-'));
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'host secret');
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(media, 'escape.txt'));
    fs.symlinkSync(outside, path.join(media, 'escape-dir'));
    // Sparse: its size is what counts, not what is written.
    fs.mkdirSync(path.join(media, 'big'));
    fs.writeFileSync(path.join(media, 'big', 'huge.bin'), '');
    fs.truncateSync(path.join(media, 'big', 'huge.bin'), 21 * 1024 * 1024);
    const tgId = uid('tg');
    expect((await env().req('POST', '/api/v1/channels/chat_d/accounts', { id: tgId, app_secret: 'bot-token' })).statusCode).toBe(201);
    const cases: Array<[string, Record<string, string>, number, RegExp]> = [
      ['send-file', { filePath: '../../etc/passwd' }, 400, /filePath: "..\/..\/etc\/passwd" leaves the media area/],
      ['send-file', { filePath: 'sub/../../secret.txt' }, 400, /leaves the media area/],
      ['send-image', { imagePath: '/etc/passwd' }, 400, /imagePath: "\/etc\/passwd" is an absolute path/],
      ['send-file', { filePath: 'C:/Windows/win.ini' }, 400, /absolute path/],
      ['send-file', { filePath: '..\\..\\etc\\passwd' }, 400, /backslash/],
      // JSON is not URL-decoded: %2e%2e is a (missing) name, never a way up.
      ['send-file', { filePath: '%2e%2e/%2e%2e/etc/passwd' }, 404, /file "%2e%2e\/%2e%2e\/etc\/passwd" in the media area/],
      ['send-file', { filePath: 'escape.txt' }, 400, /"escape.txt" is a link leading out of the media area/],
      ['send-file', { filePath: 'escape-dir/secret.txt' }, 400, /link leading out of the media area/],
      ['send-image', { imagePath: 'a.png\u0000.txt' }, 400, /NUL byte/],
      ['send-file', { filePath: 'big/huge.bin' }, 400, /21 MB, more than the 20 MB/],
      ['send-file', { filePath: 'sub' }, 400, /"sub" is not a file/],
      ['send-file', { filePath: '.' }, 400, /name a file/],
      ['send-file', { filePath: 'nothing.pdf' }, 404, /file "nothing.pdf" in the media area/],
    ];
    for (const [route, body, status, message] of cases) {
      const res = await env().req('POST', `/api/v1/channels/chat_d/${route}`, { chatId: '1', accountId: tgId, ...body });
      expect(res.statusCode, `${route} ${JSON.stringify(body)}: ${res.body}`).toBe(status);
      expect(json(res.body).error).toMatch(message);
      expect(res.body).not.toContain('host secret');
    }
    fs.rmSync(outside, { recursive: true, force: true });
  });

  it('the events URL verifies the platform signature and answers handshakes', async () => {
    const tg = await startFakeTelegram();
    const slack = await startFakeSlack();
    try {
      const tgId = uid('tg');
      expect((await env().req('POST', '/api/v1/channels/chat_d/accounts', { id: tgId, ...tg.account })).statusCode).toBe(201);
      const event = tg.inbound({ eventId: '1', chatId: '5', chatType: 'dm', senderId: '5', text: 'hi' });
      const forged = await env().app.inject({
        method: 'POST',
        url: `/api/v1/channels/chat_d/accounts/${tgId}/events`,
        headers: { ...event.headers, 'x-telegram-bot-api-secret-token': 'wrong' },
        payload: event.body,
      });
      expect(forged.statusCode).toBe(401);
      expect(json(forged.body)).toEqual({ error: 'Authentication required: the event could not be verified for this account' });
      // An unknown account answers exactly like a known one with a bad signature: no account discovery.
      const unknown = await env().app.inject({
        method: 'POST',
        url: `/api/v1/channels/chat_d/accounts/${uid('x')}/events`,
        headers: { ...event.headers, 'x-telegram-bot-api-secret-token': 'wrong' },
        payload: event.body,
      });
      expect([unknown.statusCode, unknown.body, unknown.headers['content-type']]).toEqual([forged.statusCode, forged.body, forged.headers['content-type']]);
      const garbage = await env().app.inject({ method: 'POST', url: `/api/v1/channels/chat_d/accounts/${tgId}/events`, headers: event.headers, payload: 'not json' });
      expect(garbage.statusCode).toBe(400);
      // A verified message with no agent bound: acknowledged (so the platform stops retrying), nothing runs.
      const unbound = await env().app.inject({ method: 'POST', url: `/api/v1/channels/chat_d/accounts/${tgId}/events`, headers: event.headers, payload: event.body });
      expect(unbound.statusCode).toBe(200);

      const slId = uid('sl');
      expect((await env().req('POST', '/api/v1/channels/chat_e/accounts', { id: slId, ...slack.account })).statusCode).toBe(201);
      const hs = slack.handshake!();
      const answered = await env().app.inject({ method: 'POST', url: `/api/v1/channels/chat_e/accounts/${slId}/events`, headers: hs.headers, payload: hs.body });
      expect(answered.statusCode).toBe(200);
      expect(answered.body).toBe(hs.expect);

      const api = await env().app.inject({ method: 'POST', url: '/api/v1/channels/api/accounts/x/events', payload: '{}', headers: { 'content-type': 'application/json' } });
      expect(api.statusCode).toBe(400);
      const hookId = uid('hook');
      await env().req('POST', '/api/v1/channels/chat_a_webhook/accounts', { id: hookId, app_secret: 'hook' });
      const hook = await env().app.inject({ method: 'POST', url: `/api/v1/channels/chat_a_webhook/accounts/${hookId}/events`, payload: '{}', headers: { 'content-type': 'application/json' } });
      expect(hook.statusCode).toBe(400);
      expect(json(hook.body).error).toMatch(/webhook-only/);
    } finally {
      await tg.close();
      await slack.close();
    }
  });
});
