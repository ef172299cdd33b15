import { describe, expect, it } from 'vitest';
import { startFakeTelegram } from '@agentry/testing';
import { AccountConfigError, InboundAuthError, InboundParseError } from '../src/index.js';
import { telegram } from '../src/platforms/telegram.js';
import { accountBuilder, closedAfterEach, failure, inboundRequest, ioWith, platformFailure } from './support.js';

const accountOf = accountBuilder('chat_d', 'acct-telegram', ['app_secret', 'secret']);
const fake = closedAfterEach(startFakeTelegram);

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);

describe('chat_d (Telegram) send', () => {
  it('declares its limits and abilities', () => {
    expect(telegram.platform).toBe('chat_d');
    expect(telegram.textLimit).toBe(4096);
    expect(telegram.supports).toEqual({ image: true, file: true, inbound: true });
  });

  it('sends text with sendMessage and answers the message_id', async () => {
    const f = await fake();
    const result = await telegram.send(accountOf(f.account), ioWith(), '-1001234567890', { kind: 'text', text: 'hello <b>world</b> & co' });
    expect(f.sent).toEqual([{ chatId: '-1001234567890', kind: 'text', text: 'hello <b>world</b> & co', messageId: result.messageId }]);
    expect(result.messageId).toMatch(/^\d+$/);
    expect(f.calls.map((c) => `${c.method} ${c.path}`)).toEqual(['POST /bot<token>/sendMessage']);
    expect(f.tokenFetches).toBe(0);
  });

  it('uploads an image with sendPhoto, then resends it by its file_id', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const first = await telegram.send(account, ioWith(), '42', { kind: 'image', image: { data: PNG, fileName: 'chart.png', mimeType: 'image/png' } });
    expect(f.sent[0]).toMatchObject({ chatId: '42', kind: 'image', fileName: 'chart.png', bytes: PNG.length, messageId: first.messageId });
    expect(f.calls[0]?.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const key = f.sent[0]?.key;
    expect(key).toBeTruthy();

    const again = await telegram.send(account, ioWith(), '42', { kind: 'image', image: { key: key ?? '' } });
    expect(f.sent[1]).toMatchObject({ chatId: '42', kind: 'image', key, messageId: again.messageId });
    expect(f.sent[1]?.bytes).toBeUndefined();
    expect(again.messageId).not.toBe(first.messageId);
    expect(f.calls.map((c) => c.path)).toEqual(['/bot<token>/sendPhoto', '/bot<token>/sendPhoto']);
  });

  it('uploads a file with sendDocument, then resends it by its file_id', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const data = new TextEncoder().encode('a,b\n1,2\n');
    await telegram.send(account, ioWith(), '42', { kind: 'file', file: { data, fileName: 'report.csv', mimeType: 'text/csv' } });
    expect(f.sent[0]).toMatchObject({ chatId: '42', kind: 'file', fileName: 'report.csv', bytes: data.length });
    const key = f.sent[0]?.key ?? '';
    await telegram.send(account, ioWith(), '42', { kind: 'file', file: { key, fileName: 'report.csv' } });
    expect(f.sent[1]).toMatchObject({ chatId: '42', kind: 'file', key });
    expect(f.calls.map((c) => c.path)).toEqual(['/bot<token>/sendDocument', '/bot<token>/sendDocument']);
  });

  it('reports a key of the wrong kind as a non-retryable 400 with Telegram’s description', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    await telegram.send(account, ioWith(), '42', { kind: 'image', image: { data: PNG, fileName: 'a.png' } });
    const err = await platformFailure(telegram.send(account, ioWith(), '42', { kind: 'file', file: { key: f.sent[0]?.key ?? '' } }));
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('type of file mismatch');
  });

  it('treats a wrong bot token as a non-retryable 401 without leaking either token', async () => {
    const f = await fake();
    const wrong = '987654321:AAWrongTokenWrongTokenWrongToken_xyz';
    const err = await platformFailure(telegram.send(accountOf(f.account, { app_secret: wrong }), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(401);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('Unauthorized');
    expect(err.message).not.toContain(wrong);
    expect(err.message).not.toContain(f.account.app_secret);
    expect(f.sent).toEqual([]);
  });

  it('treats a 500 as retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 500 });
    const err = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(500);
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('Internal Server Error');
    // The failure was used up: the next send goes through.
    await telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' });
    expect(f.sent).toHaveLength(1);
  });

  it('treats a non-JSON 502 from a proxy as retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 502, body: '<html><body>502 Bad Gateway</body></html>' });
    const err = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(502);
    expect(err.retryable).toBe(true);
  });

  it('takes the flood-control wait from parameters.retry_after', async () => {
    const f = await fake();
    f.failNext(1, { status: 429, retryAfterSeconds: 7 });
    const err = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(429);
    expect(err.retryable).toBe(true);
    expect(err.retryAfterMs).toBe(7000);
    expect(err.message).toContain('Too Many Requests');
  });

  it('prefers the body’s retry_after and falls back to the Retry-After header', async () => {
    const f = await fake();
    f.failNext(1, { status: 429, retryAfterSeconds: 2, body: { ok: false, error_code: 429, description: 'Too Many Requests: retry after 9', parameters: { retry_after: 9 } } });
    expect((await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }))).retryAfterMs).toBe(9000);
    f.failNext(1, { status: 429, retryAfterSeconds: 2, body: { ok: false, error_code: 429, description: 'Too Many Requests' } });
    expect((await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }))).retryAfterMs).toBe(2000);
  });

  it('treats other 4xx as not retryable and keeps the description, never the token', async () => {
    const f = await fake();
    f.failNext(1, { status: 400 });
    const err = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '-1', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('Bad Request: chat not found');
    expect(err.message).not.toContain(f.account.app_secret);

    f.failNext(1, { status: 403 });
    const blocked = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(blocked.retryable).toBe(false);
    expect(blocked.message).toContain('bot was blocked by the user');
  });

  it('names the new chat when a group was upgraded to a supergroup', async () => {
    const f = await fake();
    f.failNext(1, {
      status: 400,
      body: { ok: false, error_code: 400, description: 'Bad Request: group chat was upgraded to a supergroup chat', parameters: { migrate_to_chat_id: -1009876543210 } },
    });
    const err = await platformFailure(telegram.send(accountOf(f.account), ioWith(), '-123', { kind: 'text', text: 'hi' }));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('-1009876543210');
  });

  it('turns an unreachable API into a retryable network error without the URL', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    await f.close();
    const err = await platformFailure(telegram.send(account, ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(err.status).toBe(0);
    expect(err.retryable).toBe(true);
    expect(err.message).not.toContain(f.account.app_secret);
    expect(err.message).not.toContain('127.0.0.1');
  });

  it('requires a bot token of Telegram’s shape', async () => {
    const f = await fake();
    const missing = await failure(telegram.send(accountOf(f.account, { app_secret: undefined }), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(missing).toBeInstanceOf(AccountConfigError);
    const odd = await failure(telegram.send(accountOf(f.account, { app_secret: '123:abc/../x' }), ioWith(), '42', { kind: 'text', text: 'hi' }));
    expect(odd).toBeInstanceOf(AccountConfigError);
    expect(odd.message).not.toContain('abc/../x');
    expect(f.calls).toEqual([]);
  });
});

describe('chat_d (Telegram) inbound', () => {
  it('parses a private chat message', async () => {
    const f = await fake();
    const result = await telegram.parseInbound(
      accountOf(f.account),
      ioWith(),
      inboundRequest(f.inbound({ eventId: '17', chatId: '5551234', chatType: 'dm', senderId: '5551234', text: 'hello bot' })),
    );
    expect(result).toEqual({
      kind: 'message',
      message: { eventId: '5551234:17', chatId: '5551234', chatType: 'dm', senderId: '5551234', text: 'hello bot' },
    });
  });

  it('parses a group message and keeps the same event id for a redelivery', async () => {
    const f = await fake();
    const event = { eventId: 'evt-a', chatId: '-1001234567890', chatType: 'group' as const, senderId: '777', text: 'hi all' };
    const first = await telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest(f.inbound(event)));
    const again = await telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest(f.inbound(event)));
    expect(first.kind === 'message' && first.message).toMatchObject({ chatId: '-1001234567890', chatType: 'group', senderId: '777', text: 'hi all' });
    expect(again.kind === 'message' && again.message.eventId).toBe(first.kind === 'message' && first.message.eventId);
  });

  it('answers the chat an inbound message came from', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const result = await telegram.parseInbound(account, ioWith(), inboundRequest(f.inbound({ eventId: '3', chatId: '-4001', chatType: 'group', senderId: '9', text: 'q' })));
    if (result.kind !== 'message') throw new Error('expected a message');
    await telegram.send(account, ioWith(), result.message.chatId, { kind: 'text', text: 'a' });
    expect(f.sent[0]?.chatId).toBe('-4001');
  });

  it('rejects a wrong or missing secret token, and accounts without a secret', async () => {
    const f = await fake();
    const delivery = f.inbound({ eventId: '1', chatId: '1', chatType: 'dm', senderId: '1', text: 'x' });
    const wrong = { ...delivery, headers: { ...delivery.headers, 'x-telegram-bot-api-secret-token': 'not-the-secret' } };
    expect(await failure(telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest(wrong)))).toBeInstanceOf(InboundAuthError);
    const missing = { ...delivery, headers: { 'content-type': 'application/json' } };
    expect(await failure(telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest(missing)))).toBeInstanceOf(InboundAuthError);
    const unconfigured = accountOf(f.account, { secret: undefined });
    expect(await failure(telegram.parseInbound(unconfigured, ioWith(), inboundRequest(delivery)))).toBeInstanceOf(InboundAuthError);
  });

  it('ignores messages from bots, edits and messages without text', async () => {
    const f = await fake();
    const account = accountOf(f.account);
    const headers = f.inbound({ eventId: '1', chatId: '1', chatType: 'dm', senderId: '1', text: 'x' }).headers;
    const post = (update: unknown) => telegram.parseInbound(account, ioWith(), inboundRequest({ headers, body: JSON.stringify(update) }));
    const chat = { id: -100200, type: 'supergroup', title: 'g' };

    const bot = await post({ update_id: 1, message: { message_id: 5, from: { id: 99, is_bot: true, first_name: 'B' }, chat, date: 1, text: 'beep' } });
    expect(bot.kind).toBe('ignored');
    const edit = await post({ update_id: 2, edited_message: { message_id: 5, from: { id: 7, is_bot: false, first_name: 'U' }, chat, date: 1, text: 'x' } });
    expect(edit).toEqual({ kind: 'ignored', reason: 'update kind edited_message' });
    const photo = await post({ update_id: 3, message: { message_id: 6, from: { id: 7, is_bot: false, first_name: 'U' }, chat, date: 1, photo: [] } });
    expect(photo.kind).toBe('ignored');
  });

  it('rejects bodies that are not Telegram updates', async () => {
    const f = await fake();
    const headers = f.inbound({ eventId: '1', chatId: '1', chatType: 'dm', senderId: '1', text: 'x' }).headers;
    const post = (body: string) => telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest({ headers, body }));
    expect(await failure(post('not json {'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"message":{"message_id":1}}'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('[1,2]'))).toBeInstanceOf(InboundParseError);
    expect(await failure(post('{"update_id":1,"message":{"text":"no ids"}}'))).toBeInstanceOf(InboundParseError);
  });

  it('checks the secret before looking at the body', async () => {
    const f = await fake();
    const err = await failure(telegram.parseInbound(accountOf(f.account), ioWith(), inboundRequest({ headers: {}, body: 'garbage' })));
    expect(err).toBeInstanceOf(InboundAuthError);
  });
});
