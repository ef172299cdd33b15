import { describe, expect, it } from 'vitest';
import { startFakeLarkWebhook } from '@agentry/testing';
import { AccountConfigError, UnsupportedOperationError, type PlatformError } from '../src/index.js';
import { larkWebhook } from '../src/platforms/lark-webhook.js';
import { accountBuilder, closedAfterEach, failure, ioWith, platformFailure } from './support.js';

const accountOf = accountBuilder('chat_a_webhook', 'acct-hook', ['app_secret', 'token', 'encrypt_key', 'secret']);
const io = ioWith();
const fake = closedAfterEach(startFakeLarkWebhook);

describe('chat_a_webhook (Lark custom bot) send', () => {
  it('posts text to its hook without a signature when no secret is set', async () => {
    const f = await fake({ hookToken: 'hook-token-abc' });

    const result = await larkWebhook.send(accountOf(f.account), io, 'ignored-chat', { kind: 'text', text: 'deploy done' });

    expect(result).toEqual({ messageId: '' });
    expect(f.sent).toMatchObject([{ kind: 'text', text: 'deploy done' }]);
    expect(f.calls).toHaveLength(1);
    expect(f.calls[0]).toMatchObject({ method: 'POST', path: '/open-apis/bot/v2/hook/<token>' });
    expect(f.tokenFetches).toBe(0);
  });

  it('signs the send when the account has a secret, and the fake accepts the sign', async () => {
    const f = await fake({ hookToken: 'hook-token-abc', secret: 'sign-secret-xyz' });

    await larkWebhook.send(accountOf(f.account), io, '', { kind: 'text', text: 'signed hello' });

    expect(f.sent).toMatchObject([{ kind: 'text', text: 'signed hello' }]);
  });

  it('reports a wrong secret as the platform sign failure, without secrets in the message', async () => {
    const f = await fake({ hookToken: 'hook-token-abc', secret: 'sign-secret-xyz' });

    const err = await platformFailure(larkWebhook.send(accountOf(f.account, { secret: 'wrong-secret-123' }), io, '', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
    expect(err.message).toContain('19021');
    expect(err.message).toContain('sign match fail');
    for (const secret of ['wrong-secret-123', 'sign-secret-xyz', 'hook-token-abc', f.url]) expect(err.message).not.toContain(secret);
    expect(f.sent).toHaveLength(0);
  });

  it('reports an unsigned send to a hook that wants a sign', async () => {
    const f = await fake({ secret: 'sign-secret-xyz' });

    const err = await platformFailure(larkWebhook.send(accountOf(f.account, { secret: undefined }), io, '', { kind: 'text', text: 'x' }));

    expect(err.message).toContain('19021');
  });

  it('reports a wrong hook token without the token in the message', async () => {
    const f = await fake({ hookToken: 'hook-token-abc' });

    const err = await platformFailure(larkWebhook.send(accountOf(f.account, { app_secret: 'stale-token-999' }), io, '', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
    expect(err.message).toContain('19001');
    expect(err.message).not.toContain('stale-token-999');
  });

  it('accepts the older {StatusCode: 0} answer', async () => {
    const f = await fake({ legacyAnswer: true });

    await expect(larkWebhook.send(accountOf(f.account), io, '', { kind: 'text', text: 'old hook' })).resolves.toEqual({ messageId: '' });
    expect(f.sent).toHaveLength(1);
  });

  it('makes the custom-bot rate limits retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 200, body: { code: 11232, msg: 'frequency limited', data: {} } });
    f.failNext(1, { status: 200, body: { code: 9499, msg: 'too many request', data: {} } });
    f.failNext(1, { status: 429, retryAfterSeconds: 3 });
    const account = accountOf(f.account);

    const limited = await platformFailure(larkWebhook.send(account, io, '', { kind: 'text', text: 'x' }));
    expect(limited.retryable).toBe(true);
    expect(limited.message).toContain('11232');

    const tooMany = (await failure(larkWebhook.send(account, io, '', { kind: 'text', text: 'x' }))) as PlatformError;
    expect(tooMany.retryable).toBe(true);
    expect(tooMany.message).toContain('9499');

    const http429 = (await failure(larkWebhook.send(account, io, '', { kind: 'text', text: 'x' }))) as PlatformError;
    expect(http429.status).toBe(429);
    expect(http429.retryable).toBe(true);
    expect(http429.retryAfterMs).toBe(3000);
  });

  it('does not retry a 9499 Bad Request', async () => {
    const f = await fake();
    f.failNext(1, { status: 200, body: { code: 9499, msg: 'Bad Request', data: {} } });

    const err = await platformFailure(larkWebhook.send(accountOf(f.account), io, '', { kind: 'text', text: 'x' }));

    expect(err.retryable).toBe(false);
  });

  it('makes HTTP 5xx retryable', async () => {
    const f = await fake();
    f.failNext(1, { status: 502 });

    const err = (await failure(larkWebhook.send(accountOf(f.account), io, '', { kind: 'text', text: 'x' }))) as PlatformError;

    expect(err.status).toBe(502);
    expect(err.retryable).toBe(true);
  });

  it('refuses images and files as webhook-only', async () => {
    const f = await fake();
    const account = accountOf(f.account);

    const image = await failure(larkWebhook.send(account, io, '', { kind: 'image', image: { data: new Uint8Array([1]), fileName: 'a.png' } }));
    expect(image).toBeInstanceOf(UnsupportedOperationError);
    expect(image.message).toBe('chat_a_webhook accounts are webhook-only: they can send text, not images');

    const file = await failure(larkWebhook.send(account, io, '', { kind: 'file', file: { key: 'file_v3_x' } }));
    expect(file).toBeInstanceOf(UnsupportedOperationError);
    expect(file.message).toContain('not files');

    expect(f.calls).toHaveLength(0);
    expect(larkWebhook.supports).toEqual({ image: false, file: false, inbound: false });
  });

  it('receives no events', async () => {
    const f = await fake();

    const err = await failure(
      larkWebhook.parseInbound(accountOf(f.account), io, { method: 'POST', headers: {}, query: {}, rawBody: Buffer.from('{}') }),
    );

    expect(err).toBeInstanceOf(UnsupportedOperationError);
    expect(err.message).toContain('webhook-only accounts receive no events');
    expect(() => f.inbound({ eventId: 'e', chatId: 'c', chatType: 'group', senderId: 's', text: 't' })).toThrow();
    expect(f.handshake).toBeUndefined();
  });

  it('needs app_secret, and the token rather than the whole hook URL', async () => {
    const f = await fake();

    await expect(larkWebhook.send(accountOf(f.account, { app_secret: undefined }), io, '', { kind: 'text', text: 'x' })).rejects.toBeInstanceOf(
      AccountConfigError,
    );
    const pasted = await failure(
      larkWebhook.send(accountOf(f.account, { app_secret: 'https://open.feishu.cn/open-apis/bot/v2/hook/abc-123' }), io, '', {
        kind: 'text',
        text: 'x',
      }),
    );
    expect(pasted).toBeInstanceOf(AccountConfigError);
    expect(pasted.message).not.toContain('abc-123');
    expect(f.calls).toHaveLength(0);
  });

  it('fits one text part in the 20 KB request body', async () => {
    const f = await fake();
    // Worst case: every unit a control character, escaped as \u00XX in the JSON body.
    const text = '\u0001'.repeat(larkWebhook.textLimit);

    await larkWebhook.send(accountOf(f.account, { secret: undefined }), io, '', { kind: 'text', text });

    expect(f.sent[0]!.text).toBe(text);
  });
});
