import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SseWriter } from '../src/chat/sse-writer.js';

/**
 * The writer on a real node:http response, read as raw bytes: what the client's HTTP parser
 * sees, chunk framing included. Node 24 (the image's runtime) writes the terminating chunk of a
 * response ended while corked before the chunks it held back, so a stream whose last events and
 * end came in one turn ended cleanly without them (the image test's "answer: " instead of
 * "answer: streamed 1", and never a finish_reason or [DONE]).
 */

interface Served {
  /** The response body up to the terminating chunk, de-chunked, and any bytes after it. */
  body: Promise<{ body: string; terminated: boolean; after: string }>;
  /** `writableCorked` of the response at each `end()` call. */
  corkedAtEnd: number[];
  /** Writes the response's socket has handed to the kernel so far (`_write` and `_writev` calls). */
  socketWrites: () => number;
}

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Serves one request with `handle`, asks it over a raw socket, and decodes the chunked body. */
async function serve(handle: (sse: SseWriter, later: (fn: () => void) => void) => void): Promise<Served> {
  const corkedAtEnd: number[] = [];
  let writes = 0;
  const server = http.createServer((req, res) => {
    // Each call is one write(2) (or writev(2)) of the socket: what a stream costs in syscalls.
    const socket = res.socket as net.Socket & { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
    for (const name of ['_write', '_writev'] as const) {
      const original = socket[name].bind(socket);
      socket[name] = (...args: unknown[]) => {
        writes++;
        original(...args);
      };
    }
    const end = res.end.bind(res);
    res.end = ((...args: Parameters<typeof res.end>) => {
      corkedAtEnd.push(res.writableCorked);
      return end(...args);
    }) as typeof res.end;
    const sse = new SseWriter(res, { requestId: 'r1', heartbeatMs: 60_000 });
    handle(sse, (fn) => setTimeout(fn, 20));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const body = new Promise<{ body: string; terminated: boolean; after: string }>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    let raw = '';
    socket.on('data', (d) => (raw += d.toString('latin1')));
    socket.on('error', reject);
    // Long enough for anything written after the terminator to arrive too.
    setTimeout(() => {
      socket.destroy();
      resolve(dechunk(raw.slice(raw.indexOf('\r\n\r\n') + 4)));
    }, 300);
  });
  return { body, corkedAtEnd, socketWrites: () => writes };
}

function dechunk(raw: string): { body: string; terminated: boolean; after: string } {
  let body = '';
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) return { body, terminated: false, after: raw.slice(at) };
    const size = parseInt(raw.slice(at, eol), 16);
    if (size === 0) return { body, terminated: true, after: raw.slice(eol + 4) };
    body += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

describe('SseWriter', () => {
  it('ends the body after the events written in the same turn, not before them', async () => {
    const served = await serve((sse, later) => {
      sse.send({ n: 1 });
      // The last text and the end of the run arrive together: written and ended in one turn.
      later(() => {
        sse.send({ n: 2 });
        sse.done();
        sse.end();
      });
    });
    const { body, terminated, after } = await served.body;
    expect(body).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');
    expect(terminated).toBe(true);
    expect(after).toBe('');
    // What Node 20 forgives and Node 24 does not: ending a response that is still corked.
    expect(served.corkedAtEnd).toEqual([0]);
  });

  it('ends cleanly when nothing was written in the ending turn', async () => {
    const served = await serve((sse, later) => {
      sse.send({ n: 1 });
      later(() => sse.end());
    });
    const { body, terminated, after } = await served.body;
    expect(body).toBe('data: {"n":1}\n\n');
    expect(terminated).toBe(true);
    expect(after).toBe('');
    expect(served.corkedAtEnd).toEqual([0]);
  });

  it('sends the events of one turn in one write of the socket', async () => {
    const perTurn: number[] = [];
    const served = await serve((sse, later) => {
      sse.send({ n: 1 });
      later(() => {
        const before = served.socketWrites();
        // Three runs' worth of output in one turn: a Redis message carrying several events.
        sse.send({ n: 2 }, 'r:2');
        sse.comment('retry {"attempt":2}');
        sse.send({ n: 3 }, 'r:3');
        setImmediate(() => {
          perTurn.push(served.socketWrites() - before);
          sse.done();
          sse.end();
        });
      });
    });
    const { body, terminated } = await served.body;
    expect(body).toBe('data: {"n":1}\n\nid: r:2\ndata: {"n":2}\n\n: retry {"attempt":2}\n\nid: r:3\ndata: {"n":3}\n\ndata: [DONE]\n\n');
    expect(terminated).toBe(true);
    // Node 24's corked response wrote the chunk's length, its CRLF, each piece and the closing CRLF apart: 6 writes.
    expect(perTurn).toEqual([1]);
  });
});
