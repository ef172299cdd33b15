// A model provider for e2e/compose.test.ts, run with `node` in a container on the compose
// stack's network (the workers reach it by name; the test through a loopback-published port).
// Dependency-free: it runs from the Agentry image, whose node_modules are pruned. OpenAI's chat
// completions shape: the answer is `answer: <last user message>`; a last message starting with
// "slow" streams SLOW_DELTAS deltas SLOW_DELAY_MS apart, long enough to kill a worker mid-stream.
// GET /inflight lists the remote addresses of the streams in progress (which worker runs it).
import http from 'node:http';

const SLOW_DELTAS = 120;
const SLOW_DELAY_MS = 250;
const inflight = new Set();

function lastUserText(body) {
  const m = [...(body.messages ?? [])].reverse().find((x) => x.role === 'user');
  return typeof m?.content === 'string' ? m.content : JSON.stringify(m?.content ?? '');
}

function chunk(res, model, delta, finish) {
  const event = { id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finish }] };
  res.write(`data: ${JSON.stringify(event)}\n\n`);
}

async function stream(req, res, body) {
  const model = body.model ?? 'fake-model';
  const text = lastUserText(body);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  chunk(res, model, { role: 'assistant', content: '' }, null);
  const slow = text.startsWith('slow');
  const entry = { remote: req.socket.remoteAddress?.replace(/^::ffff:/, ''), text };
  if (slow) inflight.add(entry);
  try {
    const parts = slow ? Array.from({ length: SLOW_DELTAS }, (_, i) => `t${i} `) : [`answer: ${text}`];
    for (const part of parts) {
      if (res.destroyed) return;
      chunk(res, model, { content: part }, null);
      if (slow) await new Promise((r) => setTimeout(r, SLOW_DELAY_MS));
    }
    chunk(res, model, {}, 'stop');
    res.end('data: [DONE]\n\n');
  } finally {
    inflight.delete(entry);
  }
}

const server = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => {
    raw += c;
    if (raw.length > 1 << 20) req.destroy();
  });
  req.on('end', () => {
    const json = (status, value) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'GET' && req.url === '/inflight') return json(200, [...inflight]);
    if (req.method === 'GET' && req.url === '/v1/models') return json(200, { object: 'list', data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'fake' }] });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return json(404, { error: { message: `no route ${req.method} ${req.url}` } });
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      return json(400, { error: { message: 'not JSON' } });
    }
    if (body.stream) return void stream(req, res, body);
    return json(200, {
      id: 'chatcmpl-fake',
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? 'fake-model',
      choices: [{ index: 0, message: { role: 'assistant', content: `answer: ${lastUserText(body)}` }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  });
});
process.on('SIGTERM', () => process.exit(0));
server.listen(8080, '0.0.0.0', () => console.log('fake model listening on :8080'));
