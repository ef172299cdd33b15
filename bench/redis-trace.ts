/**
 * What one run costs Redis, command by command: a cluster (one gateway, one agent-worker, a
 * redis-server of its own), one warm-up chat, then N chats with MONITOR on, grouped by command
 * and key shape (ids replaced by <id>). Not timed; counts only, so it answers on a busy box too.
 *
 *   npx tsx --conditions=@agentry/source bench/redis-trace.ts [--runs=5] [--stream]
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { startFakeModel } from '@agentry/testing';
import { benchKeys, startCluster } from './cluster.js';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
const runs = Number(arg('runs', '5'));
const stream = process.argv.includes('--stream');

const fake = await startFakeModel({ defaultReply: { text: Array.from({ length: 50 }, () => 'tok ') } });
const keys = benchKeys();
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-redis-trace-'));
const fakePort = Number(new URL(fake.url).port);
const cluster = await startCluster({ gateways: 1, workers: 1, fakePort, keys, work, name: 'trace', runtime: 'tsx' });
const chat = () =>
  fetch(`http://127.0.0.1:${cluster.port}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.account}` },
    body: JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'hi' }], stream }),
  }).then((r) => r.text());
try {
  await chat();
  await new Promise((r) => setTimeout(r, 2000));
  const monitor = await new Redis(cluster.redis.url).monitor();
  const lines: string[] = [];
  monitor.on('monitor', (_time: string, args: string[]) => lines.push(args.map((a) => (a.length > 60 ? a.slice(0, 60) + '…' : a)).join(' ')));
  for (let i = 0; i < runs; i++) await chat();
  await new Promise((r) => setTimeout(r, 1500));
  monitor.disconnect();
  const shape = (l: string) => l.replace(/[0-9a-f]{8}-[0-9a-f-]{27,}/g, '<id>').replace(/\b\d{6,}\b/g, '<n>').split(' ').slice(0, 3).join(' ');
  const counts = new Map<string, number>();
  for (const l of lines) counts.set(shape(l), (counts.get(shape(l)) ?? 0) + 1);
  console.log(`${lines.length} commands for ${runs} runs (${(lines.length / runs).toFixed(1)} per run), stream=${stream}`);
  for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${(v / runs).toFixed(1).padStart(6)}  ${k}`);
  if (process.argv.includes('--raw')) console.log(lines.join('\n'));
} finally {
  await cluster.stop();
  await fake.close();
}
