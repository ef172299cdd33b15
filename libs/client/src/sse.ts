/** One server-sent event: the joined `data:` lines, and `event`/`id` when the server set them. */
export interface SseEvent {
  data: string;
  event?: string;
  id?: string;
}

/** A response body: Node's and current browsers' ReadableStream iterate; older browsers' only read. */
export type SseBody = AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>;

async function* chunksOf(body: SseBody): AsyncGenerator<Uint8Array> {
  if (Symbol.asyncIterator in body) {
    yield* body as AsyncIterable<Uint8Array>;
    return;
  }
  const reader = (body as ReadableStream<Uint8Array>).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Parses a `text/event-stream` body as the HTML standard describes it: lines end with CRLF, LF
 * or CR; `:` lines are comments (heartbeats, Agentry's notices: given to `onComment` without
 * the colon and its one space); `data` lines of one event are joined with `\n`;
 * a blank line dispatches the event. Events are yielded as soon as their blank line arrives, so
 * a consumer sees every token when the server sends it.
 *
 * An unterminated event at the end of the body (no blank line after it) is dropped, as the
 * standard says ("the incomplete event is not dispatched"). Nothing valid is lost that way: an
 * OpenAI-compatible stream ends with `data: [DONE]` and its blank line, so a body that stops
 * inside an event was cut off, and the chat reader must report it as incomplete (no `[DONE]`)
 * rather than act on half an answer. The web UI once delivered such an event; this is now the
 * one parser of the CLI and the UI alike.
 */
export async function* parseSse(body: SseBody, onComment?: (text: string) => void): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let event: string | undefined;
  let id: string | undefined;

  function* lines(final: boolean): Generator<string> {
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // A CR at the very end may be the first half of a CRLF split across chunks.
      if (c === 13 && i === buffer.length - 1 && !final) break;
      yield buffer.slice(start, i);
      if (c === 13 && buffer.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    buffer = buffer.slice(start);
  }

  function* take(line: string): Generator<SseEvent> {
    if (line === '') {
      if (data.length > 0) yield { data: data.join('\n'), ...(event !== undefined ? { event } : {}), ...(id !== undefined ? { id } : {}) };
      data = [];
      event = undefined;
      return;
    }
    if (line.startsWith(':')) {
      // Comments carry no event; Agentry's progress notices (`: retry {...}`) are read by whoever asks.
      onComment?.(line.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
  }

  for await (const chunk of chunksOf(body)) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of lines(false)) yield* take(line);
  }
  buffer += decoder.decode();
  for (const line of lines(true)) yield* take(line);
}
