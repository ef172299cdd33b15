import type { ServerResponse } from 'node:http';

/**
 * One server-sent-event stream on a raw response: the headers, `data:` lines, `: ping` comments
 * while nothing happens, and the end. Writes of one event-loop turn leave in one syscall.
 */
export class SseWriter {
  #corked = false;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(
    private readonly raw: ServerResponse,
    opts: { requestId: string; heartbeatMs: number },
  ) {
    raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': opts.requestId,
    });
    // Comment lines keep idle streams alive through proxies while the agent thinks.
    this.#heartbeat = setInterval(() => {
      if (!raw.destroyed) raw.write(': ping\n\n');
    }, opts.heartbeatMs);
  }

  /** One `data:` event holding `data` as JSON; nothing once the client is gone. */
  send(data: unknown): void {
    this.#write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** OpenAI's terminator. */
  done(): void {
    this.#write('data: [DONE]\n\n');
  }

  /** Stops the heartbeat and ends the response. Idempotent. */
  end(): void {
    clearInterval(this.#heartbeat);
    if (!this.raw.destroyed) this.raw.end();
  }

  #write(text: string): void {
    const raw = this.raw;
    if (raw.destroyed) return;
    // Every chunk written in one turn of the event loop leaves in one write: events that arrive
    // together (a burst from the model, a busy Redis connection) cost one syscall, not one each.
    if (!this.#corked) {
      this.#corked = true;
      raw.cork();
      process.nextTick(() => {
        this.#corked = false;
        raw.uncork();
      });
    }
    raw.write(text);
  }
}
