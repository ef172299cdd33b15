/**
 * The benchmarks' own fake model: an OpenAI-compatible `/v1/chat/completions` that answers every
 * request with the same reply, at a configured pace, and keeps nothing per request (the test
 * suite's scriptable fake in libs/testing records every request, which a run of a million would
 * feel). Plain node:http, so that the fake costs as little CPU as possible on the shared box.
 *
 *   npx tsx bench/fake-model.ts --port=18080 --ttft-ms=0 --tokens-per-second=0 --tokens=50
 *
 * --ttft-ms: delay before the first content delta (and before the body of a non-streaming reply).
 * --tokens-per-second: pace of the deltas after the first; 0 sends them all at once.
 * --tokens: deltas per answer; delta i is `tok<i> ` (so a client can check order and loss).
 * Binds 127.0.0.1 only. Prints `fake model listening on <url>` when ready.
 */
import http from 'node:http';
import { fileURLToPath } from 'node:url';

export interface BenchFakeOptions {
  port?: number;
  ttftMs?: number;
  tokensPerSecond?: number;
  tokens?: number;
}

export interface BenchFake {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const fakeToken = (i: number) => `tok${i} `;

/** The whole text of one answer of `tokens` deltas. */
export function fakeAnswer(tokens: number): string {
  let s = '';
  for (let i = 0; i < tokens; i++) s += fakeToken(i);
  return s;
}

export function startBenchFake(opts: BenchFakeOptions = {}): Promise<BenchFake> {
  const ttftMs = opts.ttftMs ?? 0;
  const tokens = opts.tokens ?? 50;
  const gapMs = opts.tokensPerSecond ? 1000 / opts.tokensPerSecond : 0;
  const created = Math.floor(Date.now() / 1000);
  const answer = fakeAnswer(tokens);
  // Deltas and the closing events are the same for every request but the id: build them once.
  const deltaJson = Array.from({ length: tokens }, (_, i) => JSON.stringify({ content: fakeToken(i) }));
  const usage = { prompt_tokens: 10, completion_tokens: tokens, total_tokens: 10 + tokens };
  let seq = 0;

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model', created, owned_by: 'bench' }] }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"not found"}}');
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      let parsed: { stream?: unknown; stream_options?: { include_usage?: unknown } };
      try {
        parsed = JSON.parse(body) as typeof parsed;
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"invalid JSON"}}');
        return;
      }
      const id = `chatcmpl-fake${++seq}`;
      if (parsed.stream !== true) {
        const reply = JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: 'fake-model',
          choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
          usage,
        });
        const send = () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(reply);
        };
        const wait = ttftMs + gapMs * Math.max(0, tokens - 1);
        if (wait > 0) setTimeout(send, wait);
        else send();
        return;
      }
      const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"fake-model","choices":[{"index":0,"delta":`;
      const chunk = (delta: string, finish: string | null = null) => `data: ${head}${delta},"finish_reason":${finish === null ? 'null' : `"${finish}"`}}]}\n\n`;
      const includeUsage = parsed.stream_options?.include_usage === true;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(chunk('{"role":"assistant","content":""}'));
      const finish = () => {
        let tail = chunk('{}', 'stop');
        if (includeUsage) tail += `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"fake-model","choices":[],"usage":${JSON.stringify(usage)}}\n\n`;
        res.end(`${tail}data: [DONE]\n\n`);
      };
      let closed = false;
      res.on('close', () => (closed = true));
      if (gapMs === 0) {
        // Burst: every delta in one write, after the time to first token.
        const all = () => {
          if (closed) return;
          res.write(deltaJson.map((d) => chunk(d)).join(''));
          finish();
        };
        if (ttftMs > 0) setTimeout(all, ttftMs);
        else all();
        return;
      }
      // Paced: delta i is due at start + ttft + i * gap, so timer lateness does not accumulate.
      const start = performance.now();
      let i = 0;
      const tick = () => {
        if (closed) return;
        const now = performance.now();
        while (i < tokens && start + ttftMs + i * gapMs <= now + 0.5) res.write(chunk(deltaJson[i++]!));
        if (i >= tokens) return finish();
        setTimeout(tick, Math.max(0, start + ttftMs + i * gapMs - performance.now()));
      };
      setTimeout(tick, ttftMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        port,
        close: () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      });
    });
  });
}

const argOf = (name: string): number | undefined => {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) {
    console.error(`--${name} must be a non-negative number, got "${raw}"`);
    process.exit(2);
  }
  return n;
};

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const a of process.argv.slice(2)) {
    if (!/^--(port|ttft-ms|tokens-per-second|tokens)=[\d.]+$/.test(a)) {
      console.error(`unknown or malformed argument ${a}; use --port=N --ttft-ms=N --tokens-per-second=N --tokens=N`);
      process.exit(2);
    }
  }
  const fake = await startBenchFake({
    port: argOf('port') ?? 18080,
    ttftMs: argOf('ttft-ms') ?? 0,
    tokensPerSecond: argOf('tokens-per-second') ?? 0,
    tokens: argOf('tokens') ?? 50,
  });
  console.log(`fake model listening on ${fake.url}`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
