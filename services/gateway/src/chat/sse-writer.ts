import type { ServerResponse } from 'node:http';

export interface SseWriterOptions {
  requestId: string;
  /**
   * The headers the app's hooks set on the reply (CORS, the security headers, `Vary`), read when
   * the stream opens: a stream is written on the raw response, past fastify's reply, and without
   * them a browser on an allowed origin could not read it.
   */
  headers?: () => Record<string, string | number | readonly string[] | undefined>;
  heartbeatMs: number;
  /**
   * Hold the headers back until the first `send()` or this many ms, whichever comes first, so a
   * run that fails before saying anything can still be answered with an HTTP status (SDKs retry
   * on 5xx, and see no status at all on an error inside a 200 stream). Past the bound they go
   * out anyway with keep-alive comments, or a proxy's idle timeout would cut a slow model.
   * Without it the headers are written at once.
   */
  headersAfterMs?: number;
  /** Called once, just before the headers are written (the owner takes over the response). */
  onOpen?: () => void;
  /** Called once the bound opened the stream (no `send()` did): the owner may start it off. */
  onTimedOpen?: () => void;
}

/** A run's `retry` event as the comment line Agentry's client reads (`: retry {"attempt":2,"of":3,"reason":"..."}`). */
export function retryComment(event: { attempt: number; of: number; reason: string }): string {
  return `retry ${JSON.stringify({ attempt: event.attempt, of: event.of, reason: event.reason })}`;
}

// An id never holds a line break (it is `<runId>:<seq>`), which would end the field early.
const idLine = (id: string | undefined) => (id === undefined ? '' : `id: ${id}\n`);

/**
 * One server-sent-event stream on a raw response: the headers, `data:` lines, `: ping` comments
 * while nothing happens, and the end. Writes of one event-loop turn leave in one syscall.
 */
export class SseWriter {
  /** What this turn of the event loop has written so far, sent whole on the next tick. */
  #pending = '';
  #opened = false;
  #ended = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #openTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly raw: ServerResponse,
    private readonly opts: SseWriterOptions,
  ) {
    if (opts.headersAfterMs === undefined) this.open();
    else
      this.#openTimer = setTimeout(() => {
        this.open({ flush: true });
        opts.onTimedOpen?.();
      }, opts.headersAfterMs);
  }

  /** Whether the headers (status 200) are out: from then on a failure can only be told in-stream. */
  get opened(): boolean {
    return this.#opened;
  }

  /** Writes the headers and starts the keep-alive comments; `flush` sends the headers before any data. */
  open(how: { flush?: boolean } = {}): void {
    if (this.#opened || this.#ended) return;
    clearTimeout(this.#openTimer);
    this.#opened = true;
    this.opts.onOpen?.();
    const raw = this.raw;
    if (raw.destroyed) return;
    raw.writeHead(200, {
      ...this.opts.headers?.(),
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': this.opts.requestId,
    });
    if (how.flush) raw.flushHeaders();
    // Comment lines keep idle streams alive through proxies while the agent thinks.
    this.#heartbeat = setInterval(() => {
      if (!raw.destroyed) raw.write(': ping\n\n');
    }, this.opts.heartbeatMs);
  }

  /**
   * One `data:` event holding `data` as JSON (opening the stream if need be), with `id` as its
   * event id (a client that reconnects sends the last one it got as `Last-Event-ID`); nothing
   * once the client is gone. `event` names it on an `event:` line, as OpenAI's Responses streams
   * do: an `EventSource` listening for a type only sees events so named.
   */
  send(data: unknown, id?: string, event?: string): void {
    this.sendJson(JSON.stringify(data), id, event);
  }

  /** `send` of data already serialised (one JSON text, no line break outside its strings). */
  sendJson(json: string, id?: string, event?: string): void {
    this.open();
    this.#write(`${event === undefined ? '' : `event: ${event}\n`}${idLine(id)}data: ${json}\n\n`);
  }

  /**
   * A comment line (`: <text>`), which every SSE client skips: Agentry's own progress notices
   * (`: retry {...}`) ride on these so the data lines stay OpenAI's. Nothing before the stream
   * opened or once the client is gone.
   */
  comment(text: string): void {
    this.#write(`: ${text.replace(/[\r\n]+/g, ' ')}\n\n`);
  }

  /** OpenAI's terminator. */
  done(id?: string): void {
    this.#write(`${idLine(id)}data: [DONE]\n\n`);
  }

  /**
   * Stops the timers and ends the response. Idempotent. A stream never opened is left alone: its
   * owner answers it some other way (an HTTP error).
   */
  end(): void {
    this.#ended = true;
    clearTimeout(this.#openTimer);
    clearInterval(this.#heartbeat);
    // The events of this turn first, or the terminating chunk would go out before them and the
    // client would see the body end cleanly without them (the last text, the finish_reason, [DONE]).
    this.#flush();
    if (this.#opened && !this.raw.destroyed) this.raw.end();
  }

  #write(text: string): void {
    if (this.raw.destroyed || !this.#opened) return;
    // Every chunk written in one turn of the event loop leaves as one HTTP chunk in one write:
    // events that arrive together (a burst from the model, a busy Redis connection) cost one
    // syscall, not one each. Joined here rather than by cork(): on Node 24 a corked response
    // keeps its chunks aside and uncork() writes them after uncorking the socket, one write(2)
    // for the chunk's length, its CRLF, each piece and the closing CRLF (four or more per turn).
    if (this.#pending === '') process.nextTick(this.#flushTurn);
    this.#pending += text;
  }

  readonly #flushTurn = () => this.#flush();

  /** Writes what this turn has joined (once: end() flushes first, and the scheduled flush then finds nothing). */
  #flush(): void {
    const text = this.#pending;
    if (text === '') return;
    this.#pending = '';
    if (!this.raw.destroyed) this.raw.write(text);
  }
}
