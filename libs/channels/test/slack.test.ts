import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startFakeSlack } from '@agentry/testing';
import { AccountConfigError, InboundAuthError, InboundParseError, UnsupportedOperationError } from '../src/index.js';
import { slack } from '../src/platforms/slack.js';
import { accountBuilder, closedAfterEach, failure, inboundRequest, ioWith, platformFailure } from './support.js';

/** Signs an arbitrary body the way Slack does, for shapes the fake does not build. */
function signed(secret: string, body: string, at = Date.now()): { headers: Record<string, string>; body: string } {
  const timestamp = String(Math.floor(at / 1000));
  const signature = `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  return { headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature }, body };
}

const accountOf = accountBuilder('chat_e', 'acct-slack', ['app_secret', 'signing_secret']);
const fake = closedAfterEach(startFakeSlack);

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 9, 8, 7, 6, 5]);

describe('chat_e (Slack) send', () => {
  it('declares its limits and abilities', () => {
    expect(slack.platform).toBe('chat_e');
    expect(slack.textLimit).toBe(4000);
    expect(slack.supports).toEqual({ image: true, file: true, inbound: true });
  });

  it('posts text with chat.postMessage and answers the ts', async () => {
    const f = await fake();
    const result = await slack.send(accountOf(f.account), ioWith(), 'C0123456', { kind: 'text', text: 'hello world' });
    expect(result.messageId).toMatch(/^\d+\.\d{6}$/);
    expect(f.sent).toEqual([{ chatId: 'C0123456', kind: 'text', text: 'hello world', messageId: result.messageId }]);
    expect(f.calls).toHaveLength(1);
    expect(f.calls[0]).toMatchObject({ method: 'POST', path: '/api/chat.postMessage' });
    expect(f.calls[0]?.headers.authorization).toBe(`Bearer ${f.account.app_secret}`);
    expect(f.tokenFetches).toBe(0);
  });

  it('escapes Slack’s control characters so text cannot ping a channel', async () => {
    const f = await fake();
    await slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'text', text: 'a <!channel> & b > c' });
    expect(f.sent[0]?.text).toBe('a &lt;!channel&gt; &amp; b &gt; c');
  });

  it('uploads an image through the external upload flow', async () => {
    const f = await fake();
    const result = await slack.send(accountOf(f.account), ioWith(), 'C0123456', {
      kind: 'image',
      image: { data: PNG, fileName: 'chart.png', mimeType: 'image/png' },
    });
    expect(f.sent).toEqual([{ chatId: 'C0123456', kind: 'image', key: result.messageId, fileName: 'chart.png', bytes: PNG.length, messageId: result.messageId }]);
    expect(f.calls.map((c) => c.path.replace(/\/upload\/v1\/.*/, '/upload/v1/<id>'))).toEqual([
      '/api/files.getUploadURLExternal',
      '/upload/v1/<id>',
      '/api/files.completeUploadExternal',
    ]);
    // The pre-signed upload URL is not given the bot token.
    expect(f.calls[1]?.headers.authorization).toBeUndefined();
  });

  it('uploads a file through the external upload flow', async () => {
    const f = await fake();
    const data = new TextEncoder().encode('name,score\nada,3\n');
    const result = await slack.send(accountOf(f.account), ioWith(), 'D0DIRECT', { kind: 'file', file: { data, fileName: 'scores.csv', mimeType: 'text/csv' } });
    expect(result.messageId).toMatch(/^F/);
    expect(f.sent).toEqual([{ chatId: 'D0DIRECT', kind: 'file', key: result.messageId, fileName: 'scores.csv', bytes: data.length, messageId: result.messageId }]);
  });

  it('shows an already uploaded image by key with an image block', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const uploaded = await slack.send(account, ioWith(), 'C1', { kind: 'image', image: { data: PNG, fileName: 'chart.png' } });
    const again = await slack.send(account, ioWith(), 'C2', { kind: 'image', image: { key: uploaded.messageId, fileName: 'chart.png' } });
    expect(f.sent[1]).toEqual({ chatId: 'C2', kind: 'image', key: uploaded.messageId, text: 'chart.png', messageId: again.messageId });
  });

  it('reports an unknown image key as Slack’s non-retryable invalid_blocks', async () => {
    const f = await fake();
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'image', image: { key: 'F0NOSUCHFILE' } }));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('invalid_blocks');
  });

  it('says plainly that a file cannot be sent by key', async () => {
    const f = await fake();
    const err = await failure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'file', file: { key: 'F0123' } }));
    expect(err).toBeInstanceOf(UnsupportedOperationError);
    expect(err.message).toContain('send the bytes');
    expect(f.calls).toEqual([]);
  });

  it('treats invalid_auth as non-retryable without leaking the token', async () => {
    const f = await fake();
    const wrong = 'xoxb-9999-8888-WrongSlackToken';
    const err = await platformFailure(slack.send(accountOf(f.account, { app_secret: wrong }), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('invalid_auth');
    expect(err.message).not.toContain(wrong);
    expect(f.sent).toEqual([]);
  });

  it('treats an HTTP 200 ok:false as not retryable and keeps Slack’s error code', async () => {
    const f = await fake();
    f.failNext(1, { status: 200, body: { ok: false, error: 'channel_not_found' } });
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C404', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(200);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('channel_not_found');
    expect(err.message).not.toContain(f.account.app_secret);

    f.failNext(1, { status: 200, body: { ok: false, error: 'missing_scope', needed: 'files:write', provided: 'chat:write' } });
    const scope = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'file', file: { data: PNG, fileName: 'a.bin' } }));
    expect(scope.retryable).toBe(false);
    expect(scope.message).toContain('files:write');
  });

  it('treats Slack’s transient ok:false codes as retryable', async () => {
    const f = await fake();
    for (const error of ['ratelimited', 'internal_error', 'service_unavailable', 'request_timeout', 'fatal_error']) {
      f.failNext(1, { status: 200, body: { ok: false, error } });
      const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
      expect(err.retryable, error).toBe(true);
    }
  });

  it('treats a 500 as retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 500 });
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(500);
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('internal_error');
  });

  it('treats a 503 while completing an upload as retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 503 });
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'file', file: { data: PNG, fileName: 'a.bin' } }));
    expect(err.status).toBe(503);
    expect(err.retryable).toBe(true);
    expect(f.sent).toEqual([]);
  });

  it('treats a 429 as retryable after the Retry-After wait', async () => {
    const f = await fake();
    f.failNext(1, { status: 429, retryAfterSeconds: 30 });
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(429);
    expect(err.retryable).toBe(true);
    expect(err.retryAfterMs).toBe(30_000);
    expect(err.message).toContain('ratelimited');
  });

  it('treats other 4xx as not retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 400 });
    const err = await platformFailure(slack.send(accountOf(f.account), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('invalid_arguments');
  });

  it('requires a bot token', async () => {
    const f = await fake();
    const err = await failure(slack.send(accountOf(f.account, { app_secret: undefined }), ioWith(), 'C1', { kind: 'text', text: 'hi' }));
    expect(err).toBeInstanceOf(AccountConfigError);
    expect(f.calls).toEqual([]);
  });
});

describe('chat_e (Slack) inbound', () => {
  it('parses a channel message', async () => {
    const f = await fake();
    const delivery = f.inbound({ eventId: 'Ev01', chatId: 'C0123456', chatType: 'group', senderId: 'U0AAA', text: 'hello agent' });
    const result = await slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(delivery));
    if (result.kind !== 'message') throw new Error(`expected a message, got ${result.kind}`);
    expect(result.message).toMatchObject({ chatId: 'C0123456', chatType: 'group', senderId: 'U0AAA', text: 'hello agent' });
    const ts = (JSON.parse(delivery.body) as { event: { ts: string } }).event.ts;
    expect(result.message.eventId).toBe(`C0123456:${ts}`);
  });

  it('parses a direct message as dm', async () => {
    const f = await fake();
    const result = await slack.parseInbound(
      accountOf(f.account),
      ioWith(),
      inboundRequest(f.inbound({ eventId: 'Ev02', chatId: 'D0DIRECT', chatType: 'dm', senderId: 'U0BBB', text: 'psst' })),
    );
    expect(result.kind === 'message' && result.message).toMatchObject({ chatId: 'D0DIRECT', chatType: 'dm', senderId: 'U0BBB', text: 'psst' });
  });

  it('gives a mention the same event id as the message it arrived with', async () => {
    const f = await fake();
    const secret = f.account.signing_secret ?? '';
    const event = { channel: 'C1', user: 'U1', text: '<@U0FAKEBOT> help', ts: '1700000000.000100', event_ts: '1700000000.000100' };
    const asMessage = { type: 'event_callback', event_id: 'Ev1', event_time: 1, event: { ...event, type: 'message', channel_type: 'channel' } };
    const asMention = { type: 'event_callback', event_id: 'Ev2', event_time: 1, event: { ...event, type: 'app_mention' } };
    const a = await slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(signed(secret, JSON.stringify(asMessage))));
    const b = await slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(signed(secret, JSON.stringify(asMention))));
    if (a.kind !== 'message' || b.kind !== 'message') throw new Error('expected two messages');
    expect(b.message).toEqual(a.message);
    expect(b.message.chatType).toBe('group');
  });

  it('answers the url_verification handshake with its challenge', async () => {
    const f = await fake();
    const handshake = f.handshake?.();
    if (!handshake) throw new Error('the fake has a handshake');
    const result = await slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(handshake));
    expect(result).toEqual({ kind: 'challenge', contentType: 'text/plain', body: handshake.expect });
  });

  it('verifies the handshake’s signature too', async () => {
    const f = await fake();
    const handshake = f.handshake?.();
    if (!handshake) throw new Error('the fake has a handshake');
    const forged = { ...handshake, headers: { ...handshake.headers, 'x-slack-signature': `v0=${'0'.repeat(64)}` } };
    expect(await failure(slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(forged)))).toBeInstanceOf(InboundAuthError);
  });

  it('rejects a bad, missing or foreign signature', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const delivery = f.inbound({ eventId: 'Ev03', chatId: 'C1', chatType: 'group', senderId: 'U1', text: 'hi' });
    const tampered = { ...delivery, body: delivery.body.replace('"hi"', '"hj"') };
    expect(await failure(slack.parseInbound(account, ioWith(), inboundRequest(tampered)))).toBeInstanceOf(InboundAuthError);
    const unsigned = { headers: { 'content-type': 'application/json' }, body: delivery.body };
    expect(await failure(slack.parseInbound(account, ioWith(), inboundRequest(unsigned)))).toBeInstanceOf(InboundAuthError);
    const foreign = signed('some-other-apps-secret', delivery.body);
    expect(await failure(slack.parseInbound(account, ioWith(), inboundRequest(foreign)))).toBeInstanceOf(InboundAuthError);
    const unconfigured = accountOf(f.account, { signing_secret: undefined });
    expect(await failure(slack.parseInbound(unconfigured, ioWith(), inboundRequest(delivery)))).toBeInstanceOf(InboundAuthError);
  });

  it('rejects a timestamp outside the 5-minute window, even when correctly signed', async () => {
    const f = await fake();
    const delivery = f.inbound({ eventId: 'Ev04', chatId: 'C1', chatType: 'group', senderId: 'U1', text: 'hi' });
    const later = () => Date.now() + 6 * 60_000;
    expect(await failure(slack.parseInbound(accountOf(f.account), ioWith({ now: later }), inboundRequest(delivery)))).toBeInstanceOf(InboundAuthError);
    const earlier = () => Date.now() - 6 * 60_000;
    expect(await failure(slack.parseInbound(accountOf(f.account), ioWith({ now: earlier }), inboundRequest(delivery)))).toBeInstanceOf(InboundAuthError);
    // Inside the window it passes.
    const soon = () => Date.now() + 4 * 60_000;
    expect((await slack.parseInbound(accountOf(f.account), ioWith({ now: soon }), inboundRequest(delivery))).kind).toBe('message');
  });

  it('ignores bot messages (its own echo included), subtypes and other events', async () => {
    const f = await fake();
    const secret = f.account.signing_secret ?? '';
    const post = (event: Record<string, unknown>) =>
      slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(signed(secret, JSON.stringify({ type: 'event_callback', event_id: 'Ev9', event_time: 1, event }))));
    const base = { channel: 'C1', text: 'x', ts: '1700000000.000200', channel_type: 'channel' };

    expect((await post({ ...base, type: 'message', user: 'U0FAKEBOT', bot_id: 'B0FAKEBOT', app_id: 'A0FAKEAPP' })).kind).toBe('ignored');
    expect((await post({ ...base, type: 'message', subtype: 'bot_message', bot_id: 'B1' })).kind).toBe('ignored');
    expect(await post({ ...base, type: 'message', subtype: 'message_changed', message: { text: 'y' } })).toEqual({
      kind: 'ignored',
      reason: 'message subtype message_changed',
    });
    expect((await post({ type: 'reaction_added', user: 'U1', reaction: 'thumbsup', item: {} })).kind).toBe('ignored');
    const rateLimited = signed(secret, JSON.stringify({ type: 'app_rate_limited', minute_rate_limited: 1, api_app_id: 'A1' }));
    expect((await slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(rateLimited))).kind).toBe('ignored');
  });

  it('rejects signed bodies that are not Events API requests', async () => {
    const f = await fake();
    const secret = f.account.signing_secret ?? '';
    const post = (body: string) => slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest(signed(secret, body)));
    expect(await failure(post('token=x&command=%2Fhi'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"no":"type"}'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"type":"url_verification"}'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"type":"event_callback"}'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"type":"event_callback","event":{"type":"message","user":"U1","text":"x"}}'))).toBeInstanceOf(InboundParseError);
  });

  it('checks the signature before looking at the body', async () => {
    const f = await fake();
    const err = await failure(slack.parseInbound(accountOf(f.account), ioWith(), inboundRequest({ headers: {}, body: 'garbage' })));
    expect(err).toBeInstanceOf(InboundAuthError);
  });
});
