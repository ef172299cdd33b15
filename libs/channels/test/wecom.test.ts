import { startFakeWeCom } from '@agentry/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import { AccountConfigError, InboundAuthError, InboundParseError, splitText, type AccountContext, type AdapterIo } from '../src/index.js';
import { parseFlatXml, wecom } from '../src/platforms/wecom.js';
import { accountBuilder, inboundRequest, ioWith, platformFailure, sharedFake } from './support.js';

type FakeWeCom = Awaited<ReturnType<typeof startFakeWeCom>>;

let fake: FakeWeCom;
let io: AdapterIo;

sharedFake(startFakeWeCom, (started) => (fake = started));
beforeEach(() => {
  io = ioWith();
});

const accountOf = accountBuilder('chat_c', 'acc-wecom', ['app_secret', 'token', 'encoding_aes_key']);

/** An account on the shared fake, with some fields changed (undefined drops one). */
const account = (overrides: Record<string, string | undefined> = {}): AccountContext => accountOf(fake.account, overrides);

describe('chat_c (WeCom) send', () => {
  it('fetches a token once and reuses it', async () => {
    const before = fake.tokenFetches;
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'one' });
    await wecom.send(account(), io, 'wrkchat001', { kind: 'text', text: 'two' });
    expect(fake.tokenFetches - before).toBe(1);
    expect(fake.calls[0]).toMatchObject({ method: 'GET', path: '/cgi-bin/gettoken', query: { corpid: fake.corpId, corpsecret: '<secret>' } });
    expect(fake.calls.slice(1).map((c) => [c.path, c.query['access_token']])).toEqual([
      ['/cgi-bin/message/send', '<token>'],
      ['/cgi-bin/appchat/send', '<token>'],
    ]);
  });

  it('fetches a new token when the old one expired (42001) and retries the send', async () => {
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'before' });
    const before = fake.tokenFetches;
    fake.revokeTokens();
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'after' });
    expect(fake.tokenFetches - before).toBe(1);
    expect(fake.sent.map((m) => m.text)).toEqual(['before', 'after']);
    expect(fake.calls.slice(-3).map((c) => c.path)).toEqual(['/cgi-bin/message/send', '/cgi-bin/gettoken', '/cgi-bin/message/send']);
  });

  it('sends a DM text through message/send with the agent id', async () => {
    const bodies: string[] = [];
    io.fetch = (input, init) => {
      if (typeof init?.body === 'string') bodies.push(init.body);
      return globalThis.fetch(input, init);
    };
    const result = await wecom.send(account(), io, 'user:LiSi', { kind: 'text', text: 'hello' });
    expect(result.messageId).toMatch(/^fake_msgid_/);
    expect(fake.sent).toEqual([{ chatId: 'user:LiSi', kind: 'text', text: 'hello', messageId: result.messageId }]);
    expect(JSON.parse(bodies[0] as string)).toEqual({ touser: 'LiSi', agentid: Number(fake.agentId), msgtype: 'text', text: { content: 'hello' } });
  });

  it('sends a group text through appchat/send, which answers no message id', async () => {
    const result = await wecom.send(account(), io, 'wrkchat001', { kind: 'text', text: '大家好' });
    expect(result).toEqual({ messageId: '' });
    expect(fake.sent).toEqual([{ chatId: 'wrkchat001', kind: 'text', text: '大家好', messageId: '' }]);
  });

  it('sends group messages without an agent_id', async () => {
    await wecom.send(account({ agent_id: undefined }), io, 'wrkchat001', { kind: 'text', text: 'x' });
    expect(fake.sent).toHaveLength(1);
  });

  it('uploads image bytes and sends the media_id', async () => {
    const data = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5]);
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'image', image: { data, fileName: 'photo.jpg', mimeType: 'image/jpeg' } });
    const upload = fake.calls.find((c) => c.path === '/cgi-bin/media/upload');
    expect(upload?.query).toEqual({ access_token: '<token>', type: 'image' });
    expect(upload?.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(fake.sent[0]).toMatchObject({ chatId: 'user:zhangsan', kind: 'image', bytes: 9, fileName: 'photo.jpg' });
    expect(fake.sent[0]?.key).toBeTruthy();
  });

  it('sends an image by key without uploading', async () => {
    await wecom.send(account(), io, 'wrkchat001', { kind: 'image', image: { key: '3existingmediaid' } });
    expect(fake.calls.some((c) => c.path === '/cgi-bin/media/upload')).toBe(false);
    expect(fake.sent).toEqual([{ chatId: 'wrkchat001', kind: 'image', key: '3existingmediaid', messageId: '' }]);
  });

  it('uploads file bytes with type=file under their file name', async () => {
    const data = new TextEncoder().encode('quarterly numbers, 中文');
    await wecom.send(account(), io, 'wrkchat001', { kind: 'file', file: { data, fileName: '季度报告.txt', mimeType: 'text/plain' } });
    expect(fake.calls.find((c) => c.path === '/cgi-bin/media/upload')?.query['type']).toBe('file');
    expect(fake.sent[0]).toMatchObject({ chatId: 'wrkchat001', kind: 'file', fileName: '季度报告.txt', bytes: data.length });
  });

  it('sends a file by key without uploading', async () => {
    const result = await wecom.send(account(), io, 'user:zhangsan', { kind: 'file', file: { key: '3existingfile' } });
    expect(fake.calls.some((c) => c.path === '/cgi-bin/media/upload')).toBe(false);
    expect(fake.sent).toEqual([{ chatId: 'user:zhangsan', kind: 'file', key: '3existingfile', messageId: result.messageId }]);
  });

  it('keeps every part of a split CJK text within 2048 bytes', async () => {
    const parts = splitText('汉字'.repeat(2000), wecom.textLimit);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(2048);
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: parts[0] as string });
    expect(fake.sent[0]?.text).toBe(parts[0]);
  });

  it('answers a wrong secret with a non-retryable error that does not contain the secret', async () => {
    const secret = 'wrong-corpsecret-abcdef123';
    const err = await platformFailure(wecom.send(account({ app_secret: secret }), io, 'user:zhangsan', { kind: 'text', text: 'x' }));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('40001');
    expect(err.message).toContain('invalid credential');
    expect(err.message).not.toContain(secret);
    expect(err.message).not.toContain(fake.url);
    expect(fake.sent).toHaveLength(0);
  });

  it('marks an HTTP 500 retryable', async () => {
    fake.failNext(1, { status: 500 });
    const err = await platformFailure(wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ status: 500, retryable: true });
  });

  it('marks the frequency limit (45009) and system busy (-1) retryable', async () => {
    fake.failNext(1, { status: 200, body: { errcode: 45009, errmsg: 'api freq out of limit' } });
    const limited = await platformFailure(wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'x' }));
    expect(limited).toMatchObject({ status: 200, retryable: true });
    expect(limited.message).toContain('api freq out of limit (errcode 45009)');
    fake.failNext(1, { status: 200 });
    const busy = await platformFailure(wecom.send(account(), io, 'wrkchat001', { kind: 'text', text: 'x' }));
    expect(busy).toMatchObject({ retryable: true });
    expect(busy.message).toContain('errcode -1');
  });

  it('marks other errcodes not retryable', async () => {
    fake.failNext(1, { status: 200, body: { errcode: 81013, errmsg: 'user & party & tag all invalid' } });
    const err = await platformFailure(wecom.send(account(), io, 'user:nobody', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ retryable: false });
    expect(err.message).toContain('81013');
  });

  it('fails a DM that WeCom lists as undeliverable (the list is lower-cased)', async () => {
    fake.failNext(1, { status: 200, body: { errcode: 0, errmsg: 'ok', invaliduser: 'lisi', invalidparty: '', invalidtag: '', unlicenseduser: '', msgid: 'm1' } });
    const err = await platformFailure(wecom.send(account(), io, 'user:LiSi', { kind: 'text', text: 'x' }));
    expect(err).toMatchObject({ retryable: false });
    expect(err.message).toContain('invaliduser');
  });

  it('never puts the access token in an error message', async () => {
    // An errmsg that quotes the request back is redacted.
    let token = '';
    io.fetch = (input, init) => {
      token = new URL(String(input)).searchParams.get('access_token') ?? token;
      return globalThis.fetch(input, init);
    };
    await wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'warm up' });
    expect(token).not.toBe('');
    fake.failNext(1, { status: 200, body: { errcode: 40003, errmsg: `invalid userid, request access_token=${token}` } });
    const err = await platformFailure(wecom.send(account(), io, 'user:zhangsan', { kind: 'text', text: 'x' }));
    expect(err.message).toContain('40003');
    expect(err.message).not.toContain(token);
  });

  it('rejects accounts without app_id, app_secret or (for users) agent_id before calling WeCom', async () => {
    const text = { kind: 'text', text: 'x' } as const;
    await expect(wecom.send(account({ app_id: undefined }), io, 'user:a', text)).rejects.toBeInstanceOf(AccountConfigError);
    await expect(wecom.send(account({ app_secret: '' }), io, 'user:a', text)).rejects.toBeInstanceOf(AccountConfigError);
    await expect(wecom.send(account({ agent_id: undefined }), io, 'user:a', text)).rejects.toBeInstanceOf(AccountConfigError);
    await expect(wecom.send(account({ agent_id: 'abc' }), io, 'user:a', { kind: 'image', image: { data: new Uint8Array(9), fileName: 'a.png' } })).rejects.toBeInstanceOf(
      AccountConfigError,
    );
    expect(fake.calls).toHaveLength(0);
  });
});

describe('chat_c (WeCom) inbound', () => {
  it('decrypts and parses a text message', async () => {
    const req = inboundRequest(fake.inbound({ eventId: '7351234567890', chatId: 'user:zhangsan', chatType: 'dm', senderId: 'zhangsan', text: ' 你好 ' }));
    await expect(wecom.parseInbound(account(), io, req)).resolves.toEqual({
      kind: 'message',
      message: { eventId: '7351234567890', chatId: 'user:zhangsan', chatType: 'dm', senderId: 'zhangsan', text: '你好' },
    });
  });

  it('keeps text that looks like XML or CDATA as text', async () => {
    const text = 'a ]]> b </Content><MsgId>1</MsgId><FromUserName>boss</FromUserName> & &amp;';
    const req = inboundRequest(fake.inbound({ eventId: '99', chatId: 'user:u1', chatType: 'dm', senderId: 'u1', text }));
    await expect(wecom.parseInbound(account(), io, req)).resolves.toMatchObject({ kind: 'message', message: { eventId: '99', senderId: 'u1', text } });
  });

  it('answers the GET URL verification with the decrypted echostr', async () => {
    const hs = fake.handshake?.();
    if (!hs) throw new Error('WeCom has a handshake');
    const result = await wecom.parseInbound(account(), io, inboundRequest({ ...hs, method: hs.method ?? 'GET' }));
    expect(result).toEqual({ kind: 'challenge', contentType: 'text/plain', body: hs.expect });
  });

  it('decrypts the official WeCom sample callback and URL verification', async () => {
    // The public test vectors of WeCom's callback crypto docs and WXBizMsgCrypt samples.
    const official = account({ app_id: 'wx5823bf96d3bd56c7', token: 'QDG6eK', encoding_aes_key: 'jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C' });
    const encrypted =
      'RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==';
    const post = inboundRequest({
      headers: {},
      body: `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName>\n<Encrypt><![CDATA[${encrypted}]]></Encrypt>\n<AgentID><![CDATA[218]]></AgentID>\n</xml>`,
      query: { msg_signature: '477715d11cdb4164915debcba66cb864d751f3e6', timestamp: '1409659813', nonce: '1372623149' },
    });
    await expect(wecom.parseInbound(official, io, post)).resolves.toMatchObject({
      kind: 'message',
      message: { eventId: '4561255354251345929', chatType: 'dm', text: 'hello' },
    });
    const get = inboundRequest({
      method: 'GET',
      headers: {},
      body: '',
      query: {
        msg_signature: '5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3',
        timestamp: '1409659589',
        nonce: '263014780',
        echostr: 'P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ==',
      },
    });
    await expect(wecom.parseInbound(official, io, get)).resolves.toEqual({ kind: 'challenge', contentType: 'text/plain', body: '1616140317555161061' });
  });

  it('rejects a bad signature, on messages and on the handshake', async () => {
    const r = fake.inbound({ eventId: '1', chatId: 'user:u', chatType: 'dm', senderId: 'u', text: 'x' });
    const query = { ...r.query, msg_signature: '0'.repeat(40) };
    await expect(wecom.parseInbound(account(), io, inboundRequest({ ...r, query }))).rejects.toBeInstanceOf(InboundAuthError);
    await expect(wecom.parseInbound(account(), io, inboundRequest({ ...r, query: {} }))).rejects.toBeInstanceOf(InboundAuthError);
    await expect(wecom.parseInbound(account({ token: 'another-token' }), io, inboundRequest(r))).rejects.toBeInstanceOf(InboundAuthError);
    const hs = fake.handshake?.();
    if (!hs) throw new Error('WeCom has a handshake');
    const badHs = inboundRequest({ ...hs, method: 'GET', query: { ...hs.query, nonce: 'other' } });
    await expect(wecom.parseInbound(account(), io, badHs)).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('rejects callbacks when token or encoding_aes_key is not configured', async () => {
    const r = inboundRequest(fake.inbound({ eventId: '1', chatId: 'user:u', chatType: 'dm', senderId: 'u', text: 'x' }));
    await expect(wecom.parseInbound(account({ token: '' }), io, r)).rejects.toBeInstanceOf(InboundAuthError);
    await expect(wecom.parseInbound(account({ encoding_aes_key: '' }), io, r)).rejects.toBeInstanceOf(InboundAuthError);
  });

  it('rejects a callback encrypted for another corp', async () => {
    const other = await startFakeWeCom({ corpId: 'wwanothercorp', token: fake.token, encodingAesKey: fake.encodingAesKey });
    try {
      const r = inboundRequest(other.inbound({ eventId: '1', chatId: 'user:u', chatType: 'dm', senderId: 'u', text: 'x' }));
      await expect(wecom.parseInbound(account(), io, r)).rejects.toBeInstanceOf(InboundAuthError);
    } finally {
      await other.close();
    }
  });

  it('rejects a callback encrypted under another EncodingAESKey', async () => {
    const other = await startFakeWeCom({ corpId: fake.corpId, token: fake.token });
    try {
      const r = inboundRequest(other.inbound({ eventId: '1', chatId: 'user:u', chatType: 'dm', senderId: 'u', text: 'x' }));
      await expect(wecom.parseInbound(account(), io, r)).rejects.toBeInstanceOf(InboundAuthError);
    } finally {
      await other.close();
    }
  });

  it('ignores events and non-text messages', async () => {
    const event =
      `<xml><ToUserName><![CDATA[${fake.corpId}]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName>` +
      `<CreateTime>1700000000</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[enter_agent]]></Event>` +
      `<EventKey><![CDATA[]]></EventKey><AgentID>${fake.agentId}</AgentID></xml>`;
    await expect(wecom.parseInbound(account(), io, inboundRequest(fake.inboundXml(event)))).resolves.toEqual({ kind: 'ignored', reason: 'event enter_agent' });
    const image =
      `<xml><ToUserName><![CDATA[${fake.corpId}]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName>` +
      `<CreateTime>1700000000</CreateTime><MsgType><![CDATA[image]]></MsgType><PicUrl><![CDATA[http://example.invalid/p.jpg]]></PicUrl>` +
      `<MediaId><![CDATA[media]]></MediaId><MsgId>1234567</MsgId><AgentID>${fake.agentId}</AgentID></xml>`;
    await expect(wecom.parseInbound(account(), io, inboundRequest(fake.inboundXml(image)))).resolves.toMatchObject({ kind: 'ignored' });
  });

  it('rejects garbage with InboundParseError', async () => {
    await expect(wecom.parseInbound(account(), io, inboundRequest({ headers: {}, body: 'garbage', query: { msg_signature: 'a', timestamp: '1', nonce: '2' } }))).rejects.toBeInstanceOf(
      InboundParseError,
    );
    await expect(wecom.parseInbound(account(), io, inboundRequest(fake.inboundXml('this is not xml')))).rejects.toBeInstanceOf(InboundParseError);
    const noMsgId = `<xml><FromUserName><![CDATA[u]]></FromUserName><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[hi]]></Content></xml>`;
    await expect(wecom.parseInbound(account(), io, inboundRequest(fake.inboundXml(noMsgId)))).rejects.toBeInstanceOf(InboundParseError);
  });
});

describe('parseFlatXml', () => {
  it('reads CDATA and plain leaves, decodes entities and skips nested elements', () => {
    const xml = `<?xml version="1.0"?>\n<xml>\n  <A><![CDATA[x<y]]></A>\n  <B>1 &lt; 2 &amp;&#x4e2d;</B>\n  <C><D>deep</D></C>\n  <E/>\n  <A>second</A>\n</xml>\n`;
    expect(Object.fromEntries(parseFlatXml(xml) ?? [])).toEqual({ A: 'x<y', B: '1 < 2 &中', E: '' });
  });

  it('answers undefined for malformed documents', () => {
    for (const bad of ['', 'plain', '<xml><A>1</B></xml>', '<xml><A><![CDATA[open</A></xml>', '<xml><A>1</A>', '<xml><A>a & b</A></xml>', '<xml></xml>trailing']) {
      expect(parseFlatXml(bad), bad).toBeUndefined();
    }
  });
});
