import { startFakeDingTalk } from '@agentry/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import { AccountConfigError, InboundAuthError, InboundParseError, type AccountContext, type AdapterIo } from '../src/index.js';
import { dingtalk } from '../src/platforms/dingtalk.js';
import { accountBuilder, inboundRequest, ioWith, platformFailure, sharedFake } from './support.js';

type FakeDingTalk = Awaited<ReturnType<typeof startFakeDingTalk>>;

let fake: FakeDingTalk;
let io: AdapterIo;

sharedFake(startFakeDingTalk, (started) => (fake = started));
beforeEach(() => {
  io = ioWith();
});

const accountOf = accountBuilder('chat_b', 'acc-dingtalk', ['app_secret']);

/** An account on the shared fake, with some fields changed (undefined drops one). */
const account = (overrides: Record<string, string | undefined> = {}): AccountContext => accountOf(fake.account, overrides);

describe('chat_b (DingTalk) send', () => {
  it('fetches a token once and reuses it', async () => {
    const before = fake.tokenFetches;
    await dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'text', text: 'one' });
    await dingtalk.send(account(), io, 'user:staff-1', { kind: 'text', text: 'two' });
    expect(fake.tokenFetches - before).toBe(1);
    const tokenCalls = fake.calls.filter((c) => c.path === '/v1.0/oauth2/accessToken');
    expect(tokenCalls).toHaveLength(1);
    const sends = fake.calls.filter((c) => c.path.startsWith('/v1.0/robot/'));
    expect(sends.map((c) => c.headers['x-acs-dingtalk-access-token'])).toEqual(['<token>', '<token>']);
  });

  it('fetches a new token after the platform revoked the old one, and retries the send', async () => {
    await dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'text', text: 'before' });
    const before = fake.tokenFetches;
    fake.revokeTokens();
    const result = await dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'text', text: 'after' });
    expect(fake.tokenFetches - before).toBe(1);
    expect(result.messageId).toBeTruthy();
    expect(fake.sent.map((m) => m.text)).toEqual(['before', 'after']);
    // The rejected attempt, the token fetch and the retry.
    expect(fake.calls.slice(-3).map((c) => c.path)).toEqual(['/v1.0/robot/groupMessages/send', '/v1.0/oauth2/accessToken', '/v1.0/robot/groupMessages/send']);
  });

  it('sends a DM text through oToMessages/batchSend', async () => {
    const result = await dingtalk.send(account(), io, 'user:staff-42', { kind: 'text', text: 'hello you' });
    expect(fake.sent).toEqual([{ chatId: 'user:staff-42', kind: 'text', text: 'hello you', messageId: result.messageId }]);
    expect(fake.calls.at(-1)).toMatchObject({ method: 'POST', path: '/v1.0/robot/oToMessages/batchSend' });
  });

  it('sends a group text through groupMessages/send', async () => {
    const result = await dingtalk.send(account(), io, 'cidAbC+/xyz==', { kind: 'text', text: '大家好' });
    expect(result.messageId).not.toBe('');
    expect(fake.sent).toEqual([{ chatId: 'cidAbC+/xyz==', kind: 'text', text: '大家好', messageId: result.messageId }]);
    expect(fake.calls.at(-1)).toMatchObject({ method: 'POST', path: '/v1.0/robot/groupMessages/send' });
  });

  it('uploads image bytes to media/upload and sends the media_id as photoURL', async () => {
    const data = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4, 5, 6]);
    await dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'image', image: { data, fileName: 'chart.png', mimeType: 'image/png' } });
    const upload = fake.calls.find((c) => c.path === '/media/upload');
    expect(upload?.query).toEqual({ access_token: '<token>', type: 'image' });
    expect(fake.sent).toHaveLength(1);
    expect(fake.sent[0]).toMatchObject({ chatId: 'cidGroupOne==', kind: 'image', bytes: 10 });
    expect(fake.sent[0]?.key).toMatch(/^@lAD/);
  });

  it('sends an image by key without uploading', async () => {
    await dingtalk.send(account(), io, 'user:staff-1', { kind: 'image', image: { key: '@lADPexisting' } });
    expect(fake.calls.some((c) => c.path === '/media/upload')).toBe(false);
    expect(fake.sent).toEqual([{ chatId: 'user:staff-1', kind: 'image', key: '@lADPexisting', messageId: expect.any(String) }]);
  });

  it('uploads file bytes with type=file and sends sampleFile with name and extension', async () => {
    const bodies: string[] = [];
    io.fetch = (input, init) => {
      if (typeof init?.body === 'string') bodies.push(init.body);
      return globalThis.fetch(input, init);
    };
    const data = new TextEncoder().encode('%PDF-1.4 fake report');
    await dingtalk.send(account(), io, 'user:staff-1', { kind: 'file', file: { data, fileName: 'Report.PDF' } });
    expect(fake.calls.find((c) => c.path === '/media/upload')?.query['type']).toBe('file');
    expect(fake.sent[0]).toMatchObject({ chatId: 'user:staff-1', kind: 'file', fileName: 'Report.PDF', bytes: data.length });
    const send = JSON.parse(bodies.at(-1) as string) as { msgKey: string; msgParam: string; robotCode: string; userIds: string[] };
    expect(send).toMatchObject({ msgKey: 'sampleFile', robotCode: fake.appKey, userIds: ['staff-1'] });
    expect(JSON.parse(send.msgParam)).toEqual({ mediaId: fake.sent[0]?.key, fileName: 'Report.PDF', fileType: 'pdf' });
  });

  it('sends a file by key without uploading', async () => {
    await dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'file', file: { key: '@lAzexisting', fileName: 'notes.txt' } });
    expect(fake.calls.some((c) => c.path === '/media/upload')).toBe(false);
    expect(fake.sent).toEqual([{ chatId: 'cidGroupOne==', kind: 'file', key: '@lAzexisting', fileName: 'notes.txt', messageId: expect.any(String) }]);
  });

  it('sends media uploads to oapi_base when it is set', async () => {
    const urls: string[] = [];
    io.fetch = (input, init) => {
      const url = String(input);
      urls.push(url.replace(/access_token=[^&]*/, 'access_token=<token>'));
      return globalThis.fetch(url.replace('http://oapi.invalid', fake.url), init);
    };
    await dingtalk.send(account({ oapi_base: 'http://oapi.invalid/' }), io, 'cidGroupOne==', {
      kind: 'image',
      image: { data: new Uint8Array(8), fileName: 'a.png' },
    });
    expect(urls).toEqual([
      `${fake.url}/v1.0/oauth2/accessToken`,
      'http://oapi.invalid/media/upload?access_token=<token>&type=image',
      `${fake.url}/v1.0/robot/groupMessages/send`,
    ]);
  });

  it('answers a wrong secret with a non-retryable error that does not contain the secret', async () => {
    const secret = 'wrong-secret-value-123456';
    const err = await platformFailure(dingtalk.send(account({ app_secret: secret }), io, 'cidGroupOne==', { kind: 'text', text: 'x' }));
    expect(err.retryable).toBe(false);
    expect(err.status).toBe(400);
    expect(err.message).toContain('invalidClientIdOrSecret');
    expect(err.message).not.toContain(secret);
    expect(err.message).not.toContain(fake.url);
    expect(fake.sent).toHaveLength(0);
  });

  it('marks a 500 retryable', async () => {
    fake.failNext(1, { status: 500 });
    const err = await platformFailure(dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 500, retryable: true });
    expect(err.message).toContain('ServiceUnavailable');
  });

  it('marks a 429 Throttling answer retryable with its Retry-After', async () => {
    fake.failNext(1, { status: 429, retryAfterSeconds: 3 });
    const err = await platformFailure(dingtalk.send(account(), io, 'user:staff-1', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 429, retryable: true, retryAfterMs: 3000 });
  });

  it('marks the 403 QpsLimit answer retryable', async () => {
    fake.failNext(1, { status: 403 });
    const err = await platformFailure(dingtalk.send(account(), io, 'cidGroupOne==', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 403, retryable: true });
    expect(err.message).toContain('Forbidden.AccessDenied.QpsLimitForApi');
  });

  it('marks other 4xx answers not retryable', async () => {
    fake.failNext(1, { status: 400, body: { code: 'invalidParameter.openConversationId', message: '群不存在', requestid: 'R1' } });
    const err = await platformFailure(dingtalk.send(account(), io, 'cidGone==', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 400, retryable: false });
    expect(err.message).toContain('群不存在');
  });

  it('fails a DM that batchSend reports as invalid or flow-controlled', async () => {
    fake.failNext(1, { status: 200, body: { processQueryKey: 'k1', invalidStaffIdList: ['staff-x'], flowControlledStaffIdList: [] } });
    const invalid = await platformFailure(dingtalk.send(account(), io, 'user:staff-x', { kind: 'text', text: 'x' }));
    expect(invalid).toMatchObject({ retryable: false });
    fake.failNext(1, { status: 200, body: { processQueryKey: 'k2', invalidStaffIdList: [], flowControlledStaffIdList: ['staff-y'] } });
    const limited = await platformFailure(dingtalk.send(account(), io, 'user:staff-y', { kind: 'text', text: 'x' }));
    expect(limited).toMatchObject({ retryable: true });
  });

  it('answers a network failure with a retryable status-0 error', async () => {
    const err = await platformFailure(dingtalk.send(account({ api_base: 'http://127.0.0.1:9' }), io, 'cidGroupOne==', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 0, retryable: true });
  });

  it('rejects accounts without app_id or app_secret', async () => {
    await expect(dingtalk.send(account({ app_id: undefined }), io, 'cidX', { kind: 'text', text: 'x' })).rejects.toBeInstanceOf(AccountConfigError);
    await expect(dingtalk.send(account({ app_secret: '' }), io, 'cidX', { kind: 'text', text: 'x' })).rejects.toBeInstanceOf(AccountConfigError);
    expect(fake.calls).toHaveLength(0);
  });
});

describe('chat_b (DingTalk) inbound', () => {
  it('parses a signed DM', async () => {
    const req = inboundRequest(fake.inbound({ eventId: 'msgDm1', chatId: 'user:staff-7', chatType: 'dm', senderId: 'staff-7', text: '  hello bot \n' }));
    await expect(dingtalk.parseInbound(account(), io, req)).resolves.toEqual({
      kind: 'message',
      message: { eventId: 'msgDm1', chatId: 'user:staff-7', chatType: 'dm', senderId: 'staff-7', text: 'hello bot' },
      singleUse: req.headers.sign,
    });
  });

  it('parses a signed group message', async () => {
    const req = inboundRequest(fake.inbound({ eventId: 'msgG1', chatId: 'cidGroupOne==', chatType: 'group', senderId: 'staff-8', text: 'what is up' }));
    await expect(dingtalk.parseInbound(account(), io, req)).resolves.toEqual({
      kind: 'message',
      message: { eventId: 'msgG1', chatId: 'cidGroupOne==', chatType: 'group', senderId: 'staff-8', text: 'what is up' },
      singleUse: req.headers.sign,
    });
  });

  it('uses senderId when senderStaffId is absent', async () => {
    const body = { msgtype: 'text', text: { content: 'hi' }, msgId: 'm2', conversationType: '1', conversationId: 'cidDm', senderId: '$:LWCP_v1:$abc' };
    const result = await dingtalk.parseInbound(account(), io, inboundRequest(fake.inboundRaw(body)));
    expect(result).toMatchObject({ kind: 'message', message: { chatId: 'user:$:LWCP_v1:$abc', senderId: '$:LWCP_v1:$abc' } });
  });

  it('rejects a bad or missing signature', async () => {
    const signed = fake.inbound({ eventId: 'm', chatId: 'user:s', chatType: 'dm', senderId: 's', text: 'x' });
    const bad = inboundRequest({ ...signed, headers: { ...signed.headers, sign: Buffer.alloc(32, 1).toString('base64') } });
    await expect(dingtalk.parseInbound(account(), io, bad)).rejects.toBeInstanceOf(InboundAuthError);
    const unsigned = inboundRequest({ headers: { 'content-type': 'application/json' }, body: signed.body });
    await expect(dingtalk.parseInbound(account(), io, unsigned)).rejects.toBeInstanceOf(InboundAuthError);
    await expect(dingtalk.parseInbound(account({ app_secret: 'another-app-secret' }), io, inboundRequest(signed))).rejects.toBeInstanceOf(
      InboundAuthError,
    );
  });

  it('rejects a timestamp more than an hour away', async () => {
    const body = { msgtype: 'text', text: { content: 'old' }, msgId: 'm3', conversationType: '1', senderStaffId: 's' };
    const stale = inboundRequest(fake.inboundRaw(body, { timestampMs: Date.now() - 61 * 60_000 }));
    await expect(dingtalk.parseInbound(account(), io, stale)).rejects.toBeInstanceOf(InboundAuthError);
    const future = inboundRequest(fake.inboundRaw(body, { timestampMs: Date.now() + 61 * 60_000 }));
    await expect(dingtalk.parseInbound(account(), io, future)).rejects.toBeInstanceOf(InboundAuthError);
    const recent = inboundRequest(fake.inboundRaw(body, { timestampMs: Date.now() - 59 * 60_000 }));
    await expect(dingtalk.parseInbound(account(), io, recent)).resolves.toMatchObject({ kind: 'message' });
  });

  it('names its sign as single-use: it covers the timestamp only, so the caller refuses it a second time', async () => {
    const first = fake.inboundRaw({ msgtype: 'text', text: { content: 'one' }, msgId: 'm5', conversationType: '1', senderStaffId: 's' });
    const result = await dingtalk.parseInbound(account(), io, inboundRequest(first));
    expect(result).toMatchObject({ kind: 'message', singleUse: first.headers.sign });
    // The same pair verifies over any other body: only its single use stops it.
    const other = { ...first, body: JSON.stringify({ msgtype: 'text', text: { content: 'forged' }, msgId: 'm6', conversationType: '1', senderStaffId: 's' }) };
    expect(await dingtalk.parseInbound(account(), io, inboundRequest(other))).toMatchObject({ singleUse: first.headers.sign });
  });

  it('ignores non-text messages', async () => {
    const body = { msgtype: 'picture', content: { downloadCode: 'dc', pictureDownloadCode: 'pdc' }, msgId: 'm4', conversationType: '1', senderStaffId: 's' };
    await expect(dingtalk.parseInbound(account(), io, inboundRequest(fake.inboundRaw(body)))).resolves.toMatchObject({ kind: 'ignored' });
  });

  it('rejects garbage bodies with InboundParseError', async () => {
    const { headers } = fake.inboundRaw({});
    await expect(dingtalk.parseInbound(account(), io, inboundRequest({ headers, body: 'not json{' }))).rejects.toBeInstanceOf(InboundParseError);
    await expect(dingtalk.parseInbound(account(), io, inboundRequest(fake.inboundRaw([1, 2])))).rejects.toBeInstanceOf(InboundParseError);
    const noText = fake.inboundRaw({ msgtype: 'text', msgId: 'm5', conversationType: '2', senderStaffId: 's' });
    await expect(dingtalk.parseInbound(account(), io, inboundRequest(noText))).rejects.toBeInstanceOf(InboundParseError);
  });
});
