import { expect } from 'vitest';

/**
 * A streamed (SSE) response body read as it comes, for tests that kill a process under a live
 * stream: a connection that dies simply ends it, as a client sees its gateway or worker die.
 */
export class SseStream {
  text = '';
  done = false;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();

  constructor(res: Response) {
    expect(res.status).toBe(200);
    this.#reader = res.body!.getReader();
  }

  async #read(): Promise<void> {
    try {
      const { value, done } = await this.#reader.read();
      if (done) this.done = true;
      else this.text += this.#decoder.decode(value, { stream: true });
    } catch {
      this.done = true;
    }
  }

  /** Reads until `enough()` holds; throws when the stream ends or the time is up first. */
  protected async readUntil(enough: () => boolean, what: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!enough()) {
      if (this.done || Date.now() > deadline) throw new Error(`stream ended or timed out before ${what}:\n${this.text}`);
      await this.#read();
    }
  }

  /** Reads to the end (or the connection's death). */
  async rest(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.done) {
      if (Date.now() > deadline) throw new Error(`stream did not end within ${timeoutMs} ms:\n${this.text}`);
      await this.#read();
    }
  }

  /** The client closes its connection (its network went away). */
  async drop(): Promise<void> {
    this.done = true;
    await this.#reader.cancel();
  }
}

/** A chat completion stream read as text: waits on patterns, gives its data events, content and run id. */
export class ChatSseStream extends SseStream {
  /** Reads until the text so far matches. */
  until(pattern: RegExp, timeoutMs = 10_000): Promise<void> {
    return this.readUntil(() => pattern.test(this.text), String(pattern), timeoutMs);
  }

  events(): string[] {
    // An `id:` line (what a client resumes from) may come first.
    return this.text.split('\n\n').map((e) => e.replace(/^id: [^\n]*\n/, '')).filter((e) => e.startsWith('data: '));
  }

  /** The answer's text so far (the content deltas joined). */
  content(): string {
    return this.events()
      .filter((e) => e !== 'data: [DONE]')
      .map((e) => (JSON.parse(e.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content ?? '')
      .join('');
  }

  runId(): string {
    const id = /"id":"chatcmpl-([0-9a-f]+)"/.exec(this.text)?.[1];
    if (!id) throw new Error(`no chunk with an id yet:\n${this.text}`);
    return id;
  }
}
