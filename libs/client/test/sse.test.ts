import { describe, expect, it } from 'vitest';
import { describeRetry, parseRetryComment, parseSse, readChatStream, type RetryNotice, type SseBody, type SseEvent } from '@agentry/client';

const enc = new TextEncoder();

async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield enc.encode(p);
}

async function all(body: SseBody): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of parseSse(body)) out.push(e);
  return out;
}

describe('parseSse', () => {
  it('joins data lines, skips comments, keeps event and (last event) id, and accepts LF, CRLF and CR', async () => {
    const events = await all(chunks(': ping\n\n', 'event: note\nid: 7\ndata: a\ndata:b\n\n', 'data: crlf\r\n\r\n', 'data: cr\r\r', 'id\ndata: {"x":1}\n\n'));
    expect(events).toEqual([{ event: 'note', id: '7', data: 'a\nb' }, { id: '7', data: 'crlf' }, { id: '7', data: 'cr' }, { id: '', data: '{"x":1}' }]);
  });

  it('handles any split: inside a line, between CR and LF, inside a UTF-8 character', async () => {
    const text = 'data: héllo wörld\r\n\r\ndata: second\r\n\r\n';
    const bytes = enc.encode(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      async function* split() {
        yield bytes.slice(0, cut);
        yield bytes.slice(cut);
      }
      expect(await all(split())).toEqual([{ data: 'héllo wörld' }, { data: 'second' }]);
    }
  });

  it('delivers a terminated last event, and drops an unterminated one (the standard: an incomplete event is not dispatched)', async () => {
    expect(await all(chunks('data: complete\n\n', 'data: [DONE]\n\n'))).toEqual([{ data: 'complete' }, { data: '[DONE]' }]);
    expect(await all(chunks('data: complete\n\n', 'data: cut off'))).toEqual([{ data: 'complete' }]);
    // A final line ended but no blank line after it: still incomplete.
    expect(await all(chunks('data: complete\r\n\r\n', 'data: [DONE]\r\n'))).toEqual([{ data: 'complete' }]);
  });

  it('skips comment-only blocks (heartbeats) and comments between data lines', async () => {
    expect(await all(chunks(': ping\n\n', ':\n\n', 'data: a\n: keep-alive\ndata: b\n\n', ': bye\n\n'))).toEqual([{ data: 'a\nb' }]);
  });

  it('keeps multi-line data and empty data lines', async () => {
    expect(await all(chunks('data: line 1\ndata:\ndata:  indented\n\n'))).toEqual([{ data: 'line 1\n\n indented' }]);
  });

  it('reads a web ReadableStream too (a browser fetch body), split inside a line and between CR and LF', async () => {
    const parts = ['data: {"a":', '1}\r', '\n\r\n: ping\n\ndata: x\r\n\r\ndata: [DONE]', '\n\n'];
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const p of parts) controller.enqueue(enc.encode(p));
        controller.close();
      },
    });
    // Hides the async iterator, as a browser without ReadableStream iteration has none.
    const readerOnly = { getReader: () => stream.getReader() } as unknown as ReadableStream<Uint8Array>;
    expect(await all(readerOnly)).toEqual([{ data: '{"a":1}' }, { data: 'x' }, { data: '[DONE]' }]);
  });

  it('yields each event as soon as its blank line arrives', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    async function* slow() {
      yield enc.encode('data: first\n\n');
      await gate;
      yield enc.encode('data: second\n\n');
    }
    const it = parseSse(slow());
    expect((await it.next()).value).toEqual({ data: 'first' });
    release();
    expect((await it.next()).value).toEqual({ data: 'second' });
  });
});

describe('readChatStream', () => {
  const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

  it('yields chunks until [DONE]', async () => {
    const got: string[] = [];
    for await (const c of readChatStream(chunks(chunk('Hel'), ': ping\n\n', chunk('lo'), 'data: [DONE]\n\n'))) got.push(c.choices[0]!.delta.content!);
    expect(got).toEqual(['Hel', 'lo']);
  });

  it('throws StreamError for an error event and for an end without [DONE]', async () => {
    const failing = readChatStream(chunks(chunk('a'), `data: ${JSON.stringify({ error: { message: 'provider broke', type: 'server_error', code: 502 } })}\n\n`));
    await expect((async () => {
      for await (const _ of failing) void _;
    })()).rejects.toMatchObject({ name: 'StreamError', message: 'provider broke', status: 502 });

    const cut = readChatStream(chunks(chunk('a')));
    await expect((async () => {
      for await (const _ of cut) void _;
    })()).rejects.toThrow(/ended before it was complete/);
  });

  it("reports the server's retry notices (comment lines) in order with the chunks, and ignores other comments", async () => {
    const seen: string[] = [];
    const notices: RetryNotice[] = [];
    const body = chunks(
      ': ping\n\n',
      ': retry {"attempt":2,"of":3,"reason":"provider unreachable"}\n\n',
      ': retry {"attempt":3,"of":3,"reason":"provider error (HTTP 503)"}\r\n\r\n',
      ': retry not json\n\n',
      chunk('ok'),
      'data: [DONE]\n\n',
    );
    for await (const c of readChatStream(body, undefined, { onRetry: (n) => (notices.push(n), seen.push(`retry ${n.attempt}`)) })) seen.push(c.choices[0]!.delta.content!);
    expect(notices).toEqual([
      { attempt: 2, of: 3, reason: 'provider unreachable' },
      { attempt: 3, of: 3, reason: 'provider error (HTTP 503)' },
    ]);
    expect(seen).toEqual(['retry 2', 'retry 3', 'ok']);
    expect(describeRetry(notices[0]!)).toBe('attempt 2 of 3: provider unreachable');
    expect(parseRetryComment('ping')).toBeUndefined();
    expect(parseRetryComment('retry {"attempt":"2"}')).toBeUndefined();
  });
});
