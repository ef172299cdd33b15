/**
 * The benches' streaming client: one chat completion over SSE (node:http, keep-alive, parsed by
 * hand), timed with performance.now() and checked token by token against the fake model's
 * `tok0 tok1 ...` answer (bench/fake-model.ts). Used by bench/chat-overhead.ts and
 * bench/scale-out.ts.
 */
import http from 'node:http';
import { errorText } from './lib.js';

/** What a stream must carry to count as good. */
export interface StreamExpectation {
  /** Deltas the fake sends (`tok0 ` .. `tok<tokens-1> `). */
  tokens: number;
  /** The whole answer. */
  text: string;
  /** A stream not complete by then is an error. */
  timeoutMs: number;
}


export interface Fidelity {
  /** Tokens of the fake's answer that never arrived. */
  lost: number;
  /** Tokens that arrived more than once. */
  duplicated: number;
  /** Tokens that arrived after a later one. */
  reordered: number;
}

export interface Sample {
  ok: boolean;
  error?: string;
  /** Request start to the first non-empty `delta.content`, ms. */
  ttftMs: number;
  /** Tokens received (the fake's deltas are one word each; Agentry may join deltas into one chunk). */
  tokens: number;
  /** Tokens after the first per second of (last - first token); Infinity when all came in one read. */
  tokensPerSecond: number;
  /** Arrival gap of each token after the first (a token joined with the one before it counts 0), ms. */
  gaps: number[];
  fidelity: Fidelity;
}

export interface Endpoint {
  port: number;
  path: string;
  headers: Record<string, string>;
  body: string;
  agent: http.Agent;
}

/** Compares the `tok<i>` words received with 0..TOKENS-1 in order. */
export function fidelityOf(indices: number[], tokens: number): Fidelity {
  const seen = new Map<number, number>();
  let reordered = 0;
  let highest = -1;
  for (const i of indices) {
    seen.set(i, (seen.get(i) ?? 0) + 1);
    if (i < highest) reordered++;
    highest = Math.max(highest, i);
  }
  let lost = 0;
  for (let i = 0; i < tokens; i++) if (!seen.has(i)) lost++;
  let duplicated = 0;
  for (const n of seen.values()) duplicated += n - 1;
  return { lost, duplicated, reordered };
}

export function streamOnce(ep: Endpoint, expect: StreamExpectation): Promise<Sample> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let firstAt = -1;
    let lastAt = -1;
    let text = '';
    let done = false;
    let settled = false;
    /** A 200 came: token fidelity counts only streams that started (a refusal loses nothing). */
    let streaming = false;
    const indices: number[] = [];
    const gaps: number[] = [];
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const fidelity = streaming ? fidelityOf(indices, expect.tokens) : { lost: 0, duplicated: 0, reordered: 0 };
      if (!error && !done) error = 'the stream ended without data: [DONE]';
      if (!error && text !== expect.text) error = `content differs from the fake's reply (${indices.length} tokens, ${text.length} chars)`;
      const span = lastAt - firstAt;
      const afterFirst = indices.length - 1;
      resolve({
        ok: !error,
        ...(error ? { error } : {}),
        ttftMs: firstAt < 0 ? NaN : firstAt - t0,
        tokens: indices.length,
        tokensPerSecond: afterFirst > 0 ? (span > 0.05 ? (afterFirst * 1000) / span : Infinity) : NaN,
        gaps,
        fidelity,
      });
    };
    const req = http.request({ host: '127.0.0.1', port: ep.port, path: ep.path, method: 'POST', agent: ep.agent, headers: ep.headers }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (c: string) => {
          if (body.length < 500) body += c;
        });
        res.on('end', () => finish(`HTTP ${res.statusCode}: ${body.slice(0, 200)}`));
        res.on('error', (err) => finish(errorText(err)));
        return;
      }
      streaming = true;
      let buf = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buf += chunk;
        for (let idx = buf.indexOf('\n\n'); idx >= 0; idx = buf.indexOf('\n\n')) {
          const event = buf.slice(0, idx);
          buf = buf.slice(idx + 2);
          for (const line of event.split('\n')) {
            if (!line.startsWith('data:')) continue; // `: ping` heartbeats, `event:` lines
            const data = line.slice(5).trim();
            if (data === '[DONE]') {
              done = true;
              continue;
            }
            let parsed: { error?: unknown; choices?: { delta?: { content?: unknown } }[] };
            try {
              parsed = JSON.parse(data) as typeof parsed;
            } catch {
              return finish(`unparseable SSE data: ${data.slice(0, 100)}`);
            }
            if (parsed.error !== undefined) return finish(`error event: ${JSON.stringify(parsed.error).slice(0, 200)}`);
            const content = parsed.choices?.[0]?.delta?.content;
            if (typeof content !== 'string' || content.length === 0) continue;
            for (const word of content.split(' ')) {
              if (word === '') continue;
              const m = /^tok(\d+)$/.exec(word);
              indices.push(m ? Number(m[1]) : -1);
              if (firstAt < 0) firstAt = now;
              else gaps.push(now - lastAt);
              lastAt = now;
            }
            text += content;
          }
        }
      });
      res.on('end', () => finish());
      res.on('error', (err) => finish(errorText(err)));
      res.on('aborted', () => finish('the response was aborted'));
    });
    const timer = setTimeout(() => req.destroy(new Error(`no complete answer within ${expect.timeoutMs} ms`)), expect.timeoutMs);
    req.on('error', (err) => finish(errorText(err)));
    req.end(ep.body);
  });
}
