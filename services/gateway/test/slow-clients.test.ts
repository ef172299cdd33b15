import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { buildGateway, seedGateway } from '@agentry/gateway';

/**
 * Issue 20, finding 6: 400 connections trickling one byte every 10 s stayed open for ever
 * (fastify's requestTimeout was 0). A listening gateway with a short request timeout and a
 * small per-address cap, driven over raw sockets.
 */
let runtime: Runtime;
let app: FastifyInstance;
let port = 0;
let cwd: string;
const MAX_PER_ADDRESS = 3;

beforeAll(async () => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-slow-'));
  fs.writeFileSync(path.join(cwd, 'config.yaml'), `server: {host: 127.0.0.1, port: 0, request_timeout_ms: 300, max_connections_per_address: ${MAX_PER_ADDRESS}}\n`);
  runtime = await bootstrap({
    service: 'gateway-test',
    mode: 'embedded',
    argv: [],
    env: {},
    cwd,
    logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await seedGateway(runtime);
  app = await buildGateway(runtime);
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as net.AddressInfo).port;
  runtime.health.markStarted();
});

afterAll(async () => {
  await app.close();
  await runtime.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

interface Conn {
  socket: net.Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<string>;
}

function connect(): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    const closed = new Promise<string>((r) => socket.once('close', () => r(received)));
    socket.once('error', () => {});
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

/** Writes one byte at a time until the server closes the socket. */
function trickle(conn: Conn, text: string): void {
  let i = 0;
  const timer = setInterval(() => {
    if (conn.socket.destroyed || i >= text.length) return clearInterval(timer);
    conn.socket.write(text[i++]!);
  }, 50);
  conn.socket.once('close', () => clearInterval(timer));
}

async function health(): Promise<string> {
  const conn = await connect();
  conn.socket.end('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  return conn.closed;
}

describe('slow clients (server.request_timeout_ms, server.max_connections_per_address)', () => {
  it('a body trickled slower than request_timeout_ms is answered 408 {error} and its connection closed', async () => {
    const conn = await connect();
    conn.socket.write('POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
    trickle(conn, `{"username":"${'a'.repeat(900)}`);
    const answer = await conn.closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('{"error":"Request timeout"}');
  });

  it('headers trickled slower than request_timeout_ms are cut the same way', async () => {
    const conn = await connect();
    trickle(conn, `GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ${'b'.repeat(500)}`);
    expect(await conn.closed).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('one address holds at most max_connections_per_address connections; a freed slot serves again', async () => {
    const held = await Promise.all(Array.from({ length: MAX_PER_ADDRESS }, () => connect()));
    const extra = await connect();
    expect(await extra.closed).toBe('');
    held[0]!.socket.destroy();
    await held[0]!.closed;
    // The server counts the close when it sees it: retry until the slot shows as free.
    let answer = '';
    while (!answer.startsWith('HTTP/1.1 200')) answer = await health();
    expect(answer).toContain('OK');
    for (const c of held) c.socket.destroy();
  });
});
