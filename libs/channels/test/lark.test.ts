import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startFakeLark } from '@agentry/testing';
import { AccountConfigError, InboundAuthError, InboundParseError, MemoryTokenCache, type InboundResult, type PlatformError } from '../src/index.js';
import { lark } from '../src/platforms/lark.js';
import { accountBuilder, closedAfterEach, failure, inboundRequest, ioWith, platformFailure } from './support.js';

type FakeLark = Awaited<ReturnType<typeof startFakeLark>>;

const accountOf = accountBuilder('chat_a', 'acct-lark', ['app_secret', 'token', 'encrypt_key', 'secret']);
const fake = closedAfterEach(startFakeLark);

const messageCalls = (f: FakeLark) => f.calls.filter((c) => c.path === '/open-apis/im/v1/messages');

describe('chat_a (Lark) send', () => {
  it('sends text to a chat_id with a tenant token fetched once and reused', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const io = ioWith();

    const first = await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'hello' });
    const second = await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'again' });

    expect(f.tokenFetches).toBe(1);
    expect(f.sent).toEqual([
      { chatId: 'oc_chat1', kind: 'text', text: 'hello', messageId: first.messageId },
      { chatId: 'oc_chat1', kind: 'text', text: 'again', messageId: second.messageId },
    ]);
    expect(first.messageId).toMatch(/^om_/);
    const calls = messageCalls(f);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.method).toBe('POST');
    expect(calls[0]!.query).toEqual({ receive_id_type: 'chat_id' });
    expect(calls[0]!.headers.authorization).toMatch(/^Bearer t-/);
    expect(calls[1]!.headers.authorization).toBe(calls[0]!.headers.authorization);
  });

  it('fetches a new token once the cached one has expired', async () => {
    const f = await fake({ expireSeconds: 7200 });
    let clock = Date.now();
    const io = ioWith({ tokens: new MemoryTokenCache(() => clock) });
    const account = accountOf(f.account);

    await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'one' });
    clock += 7200 * 1000;
    await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'two' });

    expect(f.tokenFetches).toBe(2);
    expect(f.sent.map((m) => m.text)).toEqual(['one', 'two']);
  });

  it('drops a revoked token and retries once with a fresh one', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const io = ioWith();
    await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'before' });

    f.revokeTokens();
    await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'after' });

    expect(f.tokenFetches).toBe(2);
    expect(messageCalls(f)).toHaveLength(3); // before, rejected after, retried after
    expect(f.sent.map((m) => m.text)).toEqual(['before', 'after']);
  });

  it('retries an upload whose token was revoked, too', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const io = ioWith();
    await lark.send(account, io, 'oc_chat1', { kind: 'text', text: 'warm the cache' });
    f.revokeTokens();

    await lark.send(account, io, 'oc_chat1', { kind: 'image', image: { data: new Uint8Array([1, 2, 3]), fileName: 'a.png' } });

    expect(f.tokenFetches).toBe(2);
    expect(f.calls.filter((c) => c.path === '/open-apis/im/v1/images')).toHaveLength(2);
    expect(f.sent[1]).toMatchObject({ kind: 'image', bytes: 3 });
  });

  it('reports a token rejected twice instead of fetching again', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    f.failNext(2, { status: 400, body: { code: 99991663, msg: 'Invalid access token for authorization.' } });

    const err = await platformFailure(lark.send(account, ioWith(), 'oc_chat1', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
    expect(err.message).toContain('99991663');
    expect(f.tokenFetches).toBe(2);
    expect(messageCalls(f)).toHaveLength(2);
  });

  it('uploads image bytes, then sends the image_key', async () => {
    const f = await fake();
    const data = new Uint8Array(1234).fill(7);

    const result = await lark.send(accountOf(f.account), ioWith(), 'oc_chat2', {
      kind: 'image',
      image: { data, fileName: 'chart.png', mimeType: 'image/png' },
    });

    expect(f.sent).toHaveLength(1);
    const sent = f.sent[0]!;
    expect(sent).toMatchObject({ chatId: 'oc_chat2', kind: 'image', fileName: 'chart.png', bytes: 1234, messageId: result.messageId });
    expect(sent.key).toMatch(/^img_/);
    const upload = f.calls.find((c) => c.path === '/open-apis/im/v1/images')!;
    expect(upload.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(upload.headers.authorization).toMatch(/^Bearer /);
  });

  it('sends an image_key it is given without uploading', async () => {
    const f = await fake();

    await lark.send(accountOf(f.account), ioWith(), 'oc_chat2', { kind: 'image', image: { key: 'img_v3_earlier' } });

    expect(f.calls.some((c) => c.path === '/open-apis/im/v1/images')).toBe(false);
    expect(f.sent).toEqual([{ chatId: 'oc_chat2', kind: 'image', key: 'img_v3_earlier', messageId: expect.stringMatching(/^om_/) }]);
  });

  it('uploads a file as a stream with its name, then sends the file_key', async () => {
    const f = await fake();

    await lark.send(accountOf(f.account), ioWith(), 'oc_chat3', {
      kind: 'file',
      file: { data: new TextEncoder().encode('report body'), fileName: 'report.txt', mimeType: 'text/plain' },
    });

    expect(f.sent).toHaveLength(1);
    expect(f.sent[0]).toMatchObject({ chatId: 'oc_chat3', kind: 'file', fileName: 'report.txt', bytes: 11 });
    expect(f.sent[0]!.key).toMatch(/^file_/);
    expect(f.calls.filter((c) => c.path === '/open-apis/im/v1/files')).toHaveLength(1);
  });

  it('sends a file_key it is given without uploading', async () => {
    const f = await fake();

    await lark.send(accountOf(f.account), ioWith(), 'oc_chat3', { kind: 'file', file: { key: 'file_v3_earlier' } });

    expect(f.calls.some((c) => c.path === '/open-apis/im/v1/files')).toBe(false);
    expect(f.sent).toMatchObject([{ kind: 'file', key: 'file_v3_earlier' }]);
  });

  it('reports a wrong app_secret as a non-retryable error without the secret', async () => {
    const f = await fake();
    const wrong = 'wrong-secret-do-not-leak';

    const err = await platformFailure(lark.send(accountOf(f.account, { app_secret: wrong }), ioWith(), 'oc_chat1', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
    expect(err.message).toContain('app secret invalid');
    expect(err.message).toContain('10014');
    expect(err.message).not.toContain(wrong);
    expect(err.message).not.toContain(f.url);
    expect(f.sent).toHaveLength(0);
  });

  it('makes HTTP 5xx retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 500 });

    const err = await platformFailure(lark.send(accountOf(f.account), ioWith(), 'oc_chat1', { kind: 'text', text: 'x' }));

    expect(err.status).toBe(500);
    expect(err.retryable).toBe(true);
  });

  it('makes a rate limit retryable, with the wait from x-ogw-ratelimit-reset', async () => {
    const f = await fake();
    f.failNext(1, { status: 429, retryAfterSeconds: 7 });

    const err = await platformFailure(lark.send(accountOf(f.account), ioWith(), 'oc_chat1', { kind: 'text', text: 'x' }));

    expect(err.message).toContain('99991400');
    expect(err.retryable).toBe(true);
    expect(err.retryAfterMs).toBe(7000);
  });

  it('treats code 99991400 in an HTTP 400 (older APIs) as a rate limit too', async () => {
    const f = await fake();
    f.failNext(1, { status: 400, body: { code: 99991400, msg: 'request trigger frequency limit' } });

    const err = await failure(lark.send(accountOf(f.account), ioWith(), 'oc_chat1', { kind: 'text', text: 'x' }));

    expect((err as PlatformError).retryable).toBe(true);
    expect((err as PlatformError).retryAfterMs).toBeUndefined();
  });

  it('reports other Lark codes with their msg, not retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 400, body: { code: 230002, msg: 'Bot/User can NOT be out of the chat.' } });

    const err = await platformFailure(lark.send(accountOf(f.account), ioWith(), 'oc_gone', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
    expect(err.message).toBe('chat_a send: HTTP 400: Bot/User can NOT be out of the chat. (code 230002)');
  });

  it('needs app_id and app_secret', async () => {
    const f = await fake();
    const io = ioWith();
    await expect(lark.send(accountOf(f.account, { app_id: undefined }), io, 'c', { kind: 'text', text: 'x' })).rejects.toBeInstanceOf(
      AccountConfigError,
    );
    await expect(lark.send(accountOf(f.account, { app_secret: undefined }), io, 'c', { kind: 'text', text: 'x' })).rejects.toBeInstanceOf(
      AccountConfigError,
    );
    expect(f.calls).toHaveLength(0);
  });

  it('keeps text parts within what one message carries', () => {
    expect(lark.textLimit).toBe(10_000);
    expect(lark.supports).toEqual({ image: true, file: true, inbound: true });
  });
});

describe('chat_a (Lark) inbound', () => {
  const event = { eventId: 'om_in1', chatId: 'oc_group1', chatType: 'group' as const, senderId: 'ou_alice', text: 'hi there' };

  async function parse(f: FakeLark, delivery: { headers: Record<string, string>; body: string }, overrides = {}): Promise<InboundResult> {
    return lark.parseInbound(accountOf(f.account, overrides), ioWith(), inboundRequest(delivery));
  }

  it('parses a plain v2 message event checked by its verification token', async () => {
    const f = await fake();

    const result = await parse(f, f.inbound(event));

    expect(result).toEqual({ kind: 'message', message: event });
  });

  it('maps p2p chats to dm and strips mention placeholders', async () => {
    const f = await fake();
    const delivery = f.inbound({ ...event, chatType: 'dm', text: '@_user_1  what time is it? @_user_2' });

    const result = await parse(f, delivery);

    expect(result).toEqual({ kind: 'message', message: { ...event, chatType: 'dm', text: 'what time is it?' } });
  });

  it('decrypts and verifies the signature of an encrypted event', async () => {
    const f = await fake({ encryptKey: 'enc-key-123' });
    const delivery = f.inbound(event);
    expect(JSON.parse(delivery.body)).toEqual({ encrypt: expect.any(String) });
    expect(delivery.headers['x-lark-signature']).toMatch(/^[0-9a-f]{64}$/);

    expect(await parse(f, delivery)).toEqual({ kind: 'message', message: event });
    // encrypt_key alone (no verification token) is enough.
    expect(await parse(f, delivery, { token: undefined })).toEqual({ kind: 'message', message: event });
  });

  it('rejects a wrong or missing signature', async () => {
    const f = await fake({ encryptKey: 'enc-key-123' });
    const delivery = f.inbound(event);

    const tampered = { ...delivery, headers: { ...delivery.headers, 'x-lark-signature': '0'.repeat(64) } };
    await expect(parse(f, tampered)).rejects.toBeInstanceOf(InboundAuthError);

    const otherNonce = { ...delivery, headers: { ...delivery.headers, 'x-lark-request-nonce': 'replayed' } };
    await expect(parse(f, otherNonce)).rejects.toBeInstanceOf(InboundAuthError);

    const { 'x-lark-signature': _dropped, ...unsignedHeaders } = delivery.headers;
    await expect(parse(f, { ...delivery, headers: unsignedHeaders })).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('accepts a signed event only within 5 minutes of its timestamp', async () => {
    const f = await fake({ encryptKey: 'enc-key-123' });
    const delivery = f.inbound(event);
    const at = (offsetMs: number) => lark.parseInbound(accountOf(f.account), ioWith({ now: () => Date.now() + offsetMs }), inboundRequest(delivery));
    await expect(at(4 * 60_000)).resolves.toMatchObject({ kind: 'message' });
    await expect(at(-4 * 60_000)).resolves.toMatchObject({ kind: 'message' });
    await expect(at(6 * 60_000)).rejects.toThrow(/more than 5 minutes off/);
    await expect(at(-6 * 60_000)).rejects.toThrow(/more than 5 minutes off/);

    // Correctly signed, with the timestamp of 1970 (or none at all).
    for (const timestamp of ['1', '', 'soon']) {
      const nonce = 'n1';
      const signature = createHash('sha256').update(`${timestamp}${nonce}enc-key-123${delivery.body}`, 'utf8').digest('hex');
      const headers = { ...delivery.headers, 'x-lark-request-timestamp': timestamp, 'x-lark-request-nonce': nonce, 'x-lark-signature': signature };
      await expect(parse(f, { ...delivery, headers })).rejects.toBeInstanceOf(InboundAuthError);
    }
  });

  it('rejects an encrypted event under the wrong encrypt_key, or with none', async () => {
    const f = await fake({ encryptKey: 'enc-key-123' });
    const delivery = f.inbound(event);

    await expect(parse(f, delivery, { encrypt_key: 'some-other-key' })).rejects.toBeInstanceOf(InboundAuthError);
    await expect(parse(f, delivery, { encrypt_key: undefined })).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('rejects a plain unsigned event when the account has an encrypt_key', async () => {
    const plain = await fake({ verificationToken: 'vt' });

    await expect(parse(plain, plain.inbound(event), { encrypt_key: 'enc-key-123' })).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('rejects a wrong verification token', async () => {
    const f = await fake({ verificationToken: 'the-real-token' });

    const err = await failure(parse(f, f.inbound(event), { token: 'another-token' }));

    expect(err).toBeInstanceOf(InboundAuthError);
    expect(err.message).not.toContain('the-real-token');
    expect(err.message).not.toContain('another-token');
  });

  it('rejects a wrong verification token inside an encrypted, correctly signed event', async () => {
    const f = await fake({ encryptKey: 'enc-key-123', verificationToken: 'the-real-token' });

    await expect(parse(f, f.inbound(event), { token: 'another-token' })).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('refuses events for an account with neither token nor encrypt_key', async () => {
    const f = await fake();

    const err = await failure(parse(f, f.inbound(event), { token: undefined }));

    expect(err).toBeInstanceOf(InboundAuthError);
    expect(err.message).toMatch(/token|encrypt_key/);
  });

  it('answers the url_verification handshake', async () => {
    const f = await fake();
    const hs = f.handshake!();

    const result = await lark.parseInbound(accountOf(f.account), ioWith(), inboundRequest(hs));

    expect(result.kind).toBe('challenge');
    if (result.kind !== 'challenge') return;
    expect(result.contentType).toBe('application/json');
    expect(JSON.parse(result.body)).toEqual(JSON.parse(hs.expect));
  });

  it('answers an encrypted url_verification handshake (which Lark does not sign)', async () => {
    const f = await fake({ encryptKey: 'enc-key-123' });
    const hs = f.handshake!();
    expect(JSON.parse(hs.body)).toEqual({ encrypt: expect.any(String) });

    const result = await lark.parseInbound(accountOf(f.account), ioWith(), inboundRequest(hs));

    expect(result.kind).toBe('challenge');
    if (result.kind !== 'challenge') return;
    expect(JSON.parse(result.body)).toEqual(JSON.parse(hs.expect));
  });

  it('refuses a handshake with the wrong verification token', async () => {
    const f = await fake();

    await expect(lark.parseInbound(accountOf(f.account, { token: 'nope' }), ioWith(), inboundRequest(f.handshake!()))).rejects.toBeInstanceOf(
      InboundAuthError,
    );
  });

  /** The plain event the fake delivers, as an object to vary. */
  function plainEvent(f: FakeLark): { header: Record<string, unknown>; event: { sender: Record<string, unknown>; message: Record<string, unknown> } } {
    return JSON.parse(f.inbound(event).body) as ReturnType<typeof plainEvent>;
  }

  it('ignores non-text messages, messages from apps and other event types', async () => {
    const f = await fake();

    const image = plainEvent(f);
    image.event.message.message_type = 'image';
    image.event.message.content = JSON.stringify({ image_key: 'img_v3_x' });
    expect(await parse(f, f.deliver(image))).toMatchObject({ kind: 'ignored' });

    const fromApp = plainEvent(f);
    fromApp.event.sender.sender_type = 'app';
    expect(await parse(f, f.deliver(fromApp))).toMatchObject({ kind: 'ignored' });

    const read = plainEvent(f);
    read.header.event_type = 'im.message.message_read_v1';
    expect(await parse(f, f.deliver(read))).toMatchObject({ kind: 'ignored' });

    const onlyMention = f.inbound({ ...event, text: '@_user_1' });
    expect(await parse(f, onlyMention)).toMatchObject({ kind: 'ignored' });
  });

  it('refuses garbage with InboundParseError', async () => {
    const f = await fake();
    const plain = (body: string) => ({ headers: { 'content-type': 'application/json' }, body });

    await expect(parse(f, plain('not json at all'))).rejects.toBeInstanceOf(InboundParseError);
    await expect(parse(f, plain('[1,2,3]'))).rejects.toBeInstanceOf(InboundParseError);
    await expect(parse(f, plain('{"hello":"world"}'))).rejects.toBeInstanceOf(InboundParseError);

    const noChat = plainEvent(f);
    delete noChat.event.message.chat_id;
    await expect(parse(f, f.deliver(noChat))).rejects.toBeInstanceOf(InboundParseError);

    const badContent = plainEvent(f);
    badContent.event.message.content = '{not json';
    await expect(parse(f, f.deliver(badContent))).rejects.toBeInstanceOf(InboundParseError);
  });
});
