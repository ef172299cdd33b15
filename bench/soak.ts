/**
 * The soak run (issue 13, item 4): mixed load on a local cluster for a while, one reading a
 * minute, and whether anything keeps growing once warm.
 *
 *   npm run soak                                   # 20 minutes at 6 requests/s, a worker killed every 2 minutes, writes docs/benchmarks.md
 *   npm run soak -- --minutes=3 --rate=4 --no-write
 *
 * Options: --minutes=N (default 20), --kill-every=S seconds between SIGKILLs of an agent-worker
 * (default 120; 0: none; each is replaced at once, and a stream it was answering may end with the
 * clean "worker stopped" error event, counted apart from the failures), --rate=R operations started per second (default 6),
 * --warmup=M minutes left out of the growth fits (default 5, or half of a shorter run), --cron-every=S seconds between cron
 * fires (default 5), --max-error-rate=F (default 0.01), --no-write (print only).
 *
 * The cluster is libs/testing's startLocalCluster: 2 gateways behind its round-robin proxy, 2
 * agent-workers, 1 scheduler, 1 channel-connector, each its real main.ts under tsx, on a
 * throwaway database `agentry_soak_<random>` on the local Postgres and a Redis prefix of its own.
 * The fake model (libs/testing's startFakeModel) and the proxy run in this process with the
 * load generator; at a few requests a second they need a few percent of a core.
 *
 * Load, open loop (operations start at the rate whatever the previous ones do, up to 100 in
 * flight, beyond which one is counted as shed): streamed and non-streamed chats, chats on a few
 * long-lived `sessionId`s (their history grows all run), streams the client drops after the first
 * token (the run is cancelled), chats whose model asks for the `read` tool, agent create / read /
 * update / list / delete, workspace file writes and reads on a fixed set of paths, chats with wrong
 * API keys (401), and a cron job (six fields, every few seconds) on the soak agent.
 *
 * Every minute: RSS (/proc/<pid>/status VmRSS) of each process, V8 heap used and event-loop lag
 * p99 from each service's /metrics (prom-client's default metrics; the p99 covers the time since
 * the previous scrape, since prom-client resets its histogram on every scrape and only this
 * script scrapes), chat streams open on the gateways, Redis INFO used_memory (the whole server,
 * shared with anything else on it) and the keys and bytes (MEMORY USAGE) under the prefix,
 * Postgres connections to the database (pg_stat_activity, this script's own left out) and its
 * size, operations done and failed in the minute, cron fires.
 *
 * Exits non-zero when the failures (unexpected status or answer, timeouts, shed operations)
 * exceed --max-error-rate, a service process dies, cron fired under 80 % of its ticks after the
 * warm-up, or a service's RSS grows faster than the threshold after the warm-up; the section is
 * written either way (a failed run is worth reading). Everything on 127.0.0.1; the processes, the
 * database, the Redis keys and the temporary directory are removed on every exit path,
 * Ctrl-C included. Not part of `npm test`.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import {
  cleanupRedisPrefix,
  startFakeModel,
  startFakeTelegram,
  startLocalCluster,
  type FakeModel,
  type FakePlatform,
  type FakeReply,
  type FakeRequest,
  type LocalCluster,
  type SpawnedService,
} from '@agentry/testing';
import { BENCH_POSTGRES_URL, BENCH_REDIS_URL, createBenchDatabase, gitCommit, linearFit, rssMb, theilSenSlope, scrapeMetrics, sleep, writeDocSection, type BenchDatabase } from './lib.js';

// ---------------------------------------------------------------------------------------------
// Settings

const argv = process.argv.slice(2);
const KNOWN = /^--(no-write|kill-every=\d+|minutes=\d+|rate=\d+(\.\d+)?|warmup=\d+|cron-every=\d+|max-error-rate=\d+(\.\d+)?)$/;
for (const a of argv) {
  if (!KNOWN.test(a)) {
    console.error(`unknown or malformed argument ${a}; use --minutes=N --rate=R --warmup=M --cron-every=S --max-error-rate=F --no-write`);
    process.exit(2);
  }
}
const option = (name: string, fallback: number) => {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return raw === undefined ? fallback : Number(raw);
};
const MINUTES = option('minutes', 20);
const KILL_EVERY_S = option('kill-every', 120);
const RATE = option('rate', 6);
const WARMUP = option('warmup', Math.min(5, Math.floor(MINUTES / 2)));
const CRON_EVERY = option('cron-every', 5);
const MAX_ERROR_RATE = option('max-error-rate', 0.01);
const WRITE = !argv.includes('--no-write');
if (MINUTES < 1 || WARMUP >= MINUTES || RATE <= 0 || RATE > 200 || CRON_EVERY < 1 || CRON_EVERY > 59 || 60 % CRON_EVERY !== 0 || MAX_ERROR_RATE < 0 || MAX_ERROR_RATE >= 1) {
  console.error('--minutes must be >= 1 and above --warmup, --rate in (0, 200], --cron-every a divisor of 60, --max-error-rate in [0, 1)');
  process.exit(2);
}

const POSTGRES_URL = BENCH_POSTGRES_URL;
const REDIS_URL = BENCH_REDIS_URL;

const SECTION = 'soak';
const ACCOUNT_KEY = `sk-soak-${randomBytes(16).toString('hex')}`;
const PROVIDER_KEY = `sk-soak-provider-${randomBytes(8).toString('hex')}`;
const REPLY_WORDS = 20;
const REPLY = Array.from({ length: REPLY_WORDS }, (_, i) => `soak${i} `).join('');
const SLOW_REPLY = Array.from({ length: 40 }, (_, i) => `slow${i} `).join('');
const TOOL_ANSWER = 'The tool answered.';
const SESSIONS = 8;
const WORKSPACE_FILES = 20;
const MAX_IN_FLIGHT = 100;
const REQUEST_TIMEOUT_MS = 60_000;
/**
 * Whether a series' lowest and highest values both rise, from the first half of its minutes to
 * the second, by more than `perHour` allows. A service's RSS is a sawtooth (the allocator gives
 * pages back every several minutes: 180 -> 280 -> 180 MB in the 2026-11-29 run), and a slope fitted
 * over a few of its teeth follows where the run happened to stop; a leak lifts the troughs and the
 * peaks alike.
 */
function envelopeRises(points: ReadonlyArray<readonly [number, number]>, perHour: number): boolean {
  const values = points.filter(([, v]) => Number.isFinite(v));
  if (values.length < 4) return true;
  const half = Math.floor(values.length / 2);
  const [a, b] = [values.slice(0, half), values.slice(values.length - half)];
  const hours = (b[0]![0] - a[0]![0]) / 60;
  const allowed = perHour * hours;
  const lo = (xs: typeof a) => Math.min(...xs.map(([, v]) => v));
  const hi = (xs: typeof a) => Math.max(...xs.map(([, v]) => v));
  return lo(b) - lo(a) > allowed && hi(b) - hi(a) > allowed;
}

/** Growth per hour above which a series is "grows" (see the verdict table's threshold column). */
const RSS_MB_PER_HOUR = 20;
const HEAP_MB_PER_HOUR = 20;
const LAG_MS_PER_HOUR = 20;
const REDIS_MB_PER_HOUR = 10;
const PREFIX_MB_PER_HOUR = 2;
const PG_CONNS_PER_HOUR = 2;
const CRON_MIN_SHARE = 0.8;

/** Operation kinds and their share of the mix (percent). */
const MIX = [
  ['stream', 22],
  ['non-stream', 13],
  ['session', 15],
  ['cancel', 8],
  ['tool', 7],
  ['channel', 8],
  ['agent-crud', 8],
  ['workspace', 12],
  ['invalid-key', 7],
] as const;
type OpKind = (typeof MIX)[number][0];
const MIX_TOTAL = MIX.reduce((s, [, w]) => s + w, 0);

// ---------------------------------------------------------------------------------------------
// State shared by the load, the sampler and the cleanup

interface ServiceHandle {
  name: string;
  svc: SpawnedService;
  metricsUrl: string;
}

interface Sample {
  minute: number;
  at: number;
  rss: Record<string, number>;
  heapMb: Record<string, number>;
  lagP99Ms: Record<string, number>;
  openStreams: number;
  redisUsedMb: number;
  prefixKeys: number;
  prefixMb: number;
  pgConnections: number;
  dbSizeMb: number;
  ok: number;
  failed: number;
  shed: number;
  byKind: Record<string, { ok: number; failed: number }>;
  cronSucceeded: number;
  cronOther: number;
}

const state: {
  work?: string;
  db?: BenchDatabase;
  prefix?: string;
  fake?: FakeModel;
  /** The chat platform the channel messages come from and the agent's answers go to. */
  telegram?: FakePlatform;
  cluster?: LocalCluster;
  admin?: pg.Client;
  redis?: Redis;
  stopping: boolean;
  fatal?: string;
} = { stopping: false };

const counts = { ok: 0, failed: 0, shed: 0, workerLost: 0, byKind: {} as Record<string, { ok: number; failed: number }> };
/** Workers SIGKILLed on purpose (--kill-every), and how long each replacement took to be ready. */
const kills: Array<{ at: number; name: string; readyMs: number }> = [];
const killedOnPurpose = new Set<SpawnedService>();
const failureExamples = new Map<string, number>();
let inFlight = 0;
let opSeq = 0;

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const started = Date.now();
  state.work = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-soak-'));
  state.fake = await startFakeModel({ defaultReply: fakeReply });
  state.telegram = await startFakeTelegram();
  const configPath = path.join(state.work, 'config.yaml');
  fs.writeFileSync(
    configPath,
    [
      // `info`, as shipped: startLocalCluster waits for the services' start-up lines, and the
      // probe ports of worker, scheduler and connector are only known from their logs.
      'logging: {level: info}',
      'models:',
      '  default_provider: fake',
      `  providers: {fake: {base_url: "${state.fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
      `channels: {api: {accounts: {soak: {api_key: "${ACCOUNT_KEY}"}}}}`,
    ].join('\n'),
  );
  state.db = await createBenchDatabase(POSTGRES_URL, 'agentry_soak');
  state.prefix = `soak-${randomBytes(4).toString('hex')}`;
  console.log(`soak: database ${state.db.name}, Redis prefix ${state.prefix}; starting the cluster...`);
  state.cluster = await startLocalCluster({
    configPath,
    databaseUrl: state.db.url,
    redisUrl: REDIS_URL,
    redisPrefix: state.prefix,
    secretKey: `soak-master-key-${randomBytes(16).toString('hex')}`,
    gateways: 2,
    workers: 2,
    schedulers: 1,
    connectors: 1,
    proxy: { host: '127.0.0.1' },
  });
  const cluster = state.cluster;
  const services = await serviceHandles(cluster);
  for (const s of services) {
    void s.svc.exited().then((code) => {
      if (!state.stopping && !killedOnPurpose.has(s.svc)) state.fatal ??= `${s.name} exited (code ${code}) during the run:\n${s.svc.output().slice(-3000)}`;
    });
  }
  const base = `${cluster.url}/api/v1`;
  console.log(`soak: cluster up on ${cluster.url} (${services.map((s) => `${s.name} pid ${s.svc.proc.pid}`).join(', ')})`);

  state.admin = new pg.Client({ connectionString: state.db.url });
  await state.admin.connect();
  state.redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2, connectionName: `${state.prefix}:soak-sampler` });
  state.redis.on('error', () => {});

  await setUp(base);
  const samples: Sample[] = [];
  let cronBefore = await cronCounts();
  samples.push(await sample(0, services, cronBefore, cronBefore));
  printSample(samples[0]!);

  const t0 = Date.now();
  const load = runLoad(base, t0 + MINUTES * 60_000);
  const killing = killWorkers(cluster, services, t0 + MINUTES * 60_000);
  for (let minute = 1; minute <= MINUTES; minute++) {
    while (Date.now() < t0 + minute * 60_000) {
      if (state.fatal) break;
      await sleep(Math.min(1000, t0 + minute * 60_000 - Date.now()));
    }
    if (state.fatal) break;
    const cronNow = await cronCounts();
    samples.push(await sample(minute, services, cronBefore, cronNow));
    cronBefore = cronNow;
    printSample(samples.at(-1)!);
    // The fake keeps every request it saw; without this its growth would be ours.
    state.fake.reset();
  }
  state.stopping = true;
  const drained = await load;
  await killing;

  const report = analyse(samples, services, drained);
  const body = render(samples, services, report, started);
  console.log(body);
  if (WRITE) writeDocSection(SECTION, body);
  if (report.problems.length > 0) {
    console.error(`\nsoak: FAILED\n- ${report.problems.join('\n- ')}`);
    return 1;
  }
  console.log('\nsoak: passed');
  return 0;
}

/**
 * Names each process and finds its /metrics: a gateway's own port, else the probe port the
 * process logged (HEALTH_PORT is 0, since every worker gets the same environment).
 */
async function serviceHandles(cluster: LocalCluster): Promise<ServiceHandle[]> {
  const out: ServiceHandle[] = [];
  const roles = [
    ['gateway', /"msg":"gateway listening"/],
    ['worker', /"msg":"probes listening"/],
    ['scheduler', /"msg":"probes listening"/],
    ['connector', /"msg":"probes listening"/],
  ] as const;
  for (const [role, pattern] of roles) {
    for (const [i, svc] of cluster.byRole[role].entries()) {
      const port = (JSON.parse(await svc.waitForLine(pattern, 30_000)) as { port: number }).port;
      out.push({ name: `${role}-${i + 1}`, svc, metricsUrl: `http://127.0.0.1:${port}/metrics` });
    }
  }
  return out;
}

async function setUp(base: string): Promise<void> {
  await expectStatus(
    'create agent soak',
    api(base, 'POST', '/agents', agentBody('soak', { systemPrompt: 'You are the soak agent.' })),
    201,
  );
  await expectStatus(
    'create agent soak-tools',
    api(base, 'POST', '/agents', agentBody('soak-tools', { systemPrompt: 'You read notes.', tools: [{ type: 'builtin', name: 'read' }] })),
    201,
  );
  for (let i = 0; i < WORKSPACE_FILES; i++) {
    await expectStatus(`workspace file ${i}`, api(base, 'PUT', `/agents/soak/workspace/file?path=notes/${i}.md`, { content: noteContent(i) }), 200);
  }
  await expectStatus(
    'create channel account',
    api(base, 'POST', '/channels/chat_d/accounts', { id: 'soak', name: 'Soak bot', dm_policy: 'allow', group_policy: 'disabled', ...state.telegram!.account, binding: { agentId: 'soak' } }),
    201,
  );
  await expectStatus(
    'create cron job',
    api(base, 'POST', '/cron', { name: 'soak tick', schedule: `*/${CRON_EVERY} * * * * *`, message: 'cron tick', target: 'soak' }),
    201,
  );
}

// ---------------------------------------------------------------------------------------------
// The fake model's answers

function fakeReply(req: FakeRequest): FakeReply {
  const last = req.body.messages.at(-1);
  if (last?.role === 'tool') return { text: TOOL_ANSWER };
  const content = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
  if (content.includes('[tool]')) return { toolCalls: [{ name: 'read', arguments: JSON.stringify({ path: 'notes/0.md' }) }] };
  // Slow enough that the client's drop after the first token lands mid-stream.
  if (content.includes('[slow]')) return { text: SLOW_REPLY, chunkDelayMs: 50 };
  return { text: REPLY, chunkDelayMs: 2 };
}

// ---------------------------------------------------------------------------------------------
// Load

async function runLoad(base: string, until: number): Promise<{ leftInFlight: number }> {
  const interval = 1000 / RATE;
  let next = Date.now();
  const running = new Set<Promise<void>>();
  while (Date.now() < until && !state.fatal) {
    if (inFlight >= MAX_IN_FLIGHT) counts.shed++;
    else {
      const kind = pickKind(opSeq);
      const n = opSeq++;
      inFlight++;
      const p = runOp(base, kind, n)
        .then(
          () => record(kind, true),
          (err: unknown) => record(kind, false, err),
        )
        .finally(() => {
          inFlight--;
          running.delete(p);
        });
      running.add(p);
    }
    next += interval;
    const wait = next - Date.now();
    if (wait > 0) await sleep(wait);
  }
  // Operations still running finish (each is bounded by its request timeout).
  const deadline = sleep(REQUEST_TIMEOUT_MS + 5000).then(() => 'timeout' as const);
  await Promise.race([Promise.all(running), deadline]);
  return { leftInFlight: running.size };
}

/**
 * Every --kill-every seconds one agent-worker (in turn) is SIGKILLed and a replacement started at
 * once; the replacement takes the killed one's place in the samples (its RSS series restarts).
 */
async function killWorkers(cluster: LocalCluster, services: ServiceHandle[], until: number): Promise<void> {
  if (KILL_EVERY_S <= 0) return;
  for (let n = 0; ; n++) {
    const at = Date.now() + KILL_EVERY_S * 1000;
    if (at >= until - 10_000) return;
    while (Date.now() < at) {
      if (state.fatal || state.stopping) return;
      await sleep(Math.min(1000, at - Date.now()));
    }
    const workers = services.filter((s) => s.name.startsWith('worker-'));
    const victim = workers[n % workers.length]!;
    killedOnPurpose.add(victim.svc);
    victim.svc.proc.kill('SIGKILL');
    const killedAt = Date.now();
    let fresh: SpawnedService;
    let port: number;
    try {
      fresh = await cluster.start('worker');
      port = (JSON.parse(await fresh.waitForLine(/"msg":"probes listening"/, 30_000)) as { port: number }).port;
    } catch (err) {
      // Reported like a service that died: the run is judged failed, its section still written.
      state.fatal ??= `the replacement of ${victim.name} did not start: ${(err as Error).message.slice(0, 500)}`;
      return;
    }
    victim.svc = fresh;
    victim.metricsUrl = `http://127.0.0.1:${port}/metrics`;
    kills.push({ at: killedAt, name: victim.name, readyMs: Date.now() - killedAt });
    console.log(`soak: ${victim.name} SIGKILLed, its replacement ready after ${Date.now() - killedAt} ms`);
    void fresh.exited().then((code) => {
      if (!state.stopping && !killedOnPurpose.has(fresh)) state.fatal ??= `${victim.name} (replacement) exited (code ${code}) during the run:\n${fresh.output().slice(-3000)}`;
    });
  }
}

/** A deterministic interleaving of the mix: the same run every time for the same rate. */
function pickKind(n: number): OpKind {
  // Multiplying by a number coprime to the total spreads consecutive operations over the mix.
  let slot = (n * 37) % MIX_TOTAL;
  for (const [kind, weight] of MIX) {
    if (slot < weight) return kind;
    slot -= weight;
  }
  return MIX[0][0];
}

function record(kind: OpKind, ok: boolean, err?: unknown): void {
  const k = (counts.byKind[kind] ??= { ok: 0, failed: 0 });
  // A worker killed on purpose under a run that had started answering: the guaranteed clean error, not a failure.
  if (!ok && KILL_EVERY_S > 0 && /the worker running this request stopped after it had started answering/.test(String((err as Error | undefined)?.message ?? err))) {
    counts.workerLost++;
    return;
  }
  if (ok) {
    counts.ok++;
    k.ok++;
    return;
  }
  counts.failed++;
  k.failed++;
  const msg = `${kind}: ${err instanceof Error ? err.message : String(err)}`.slice(0, 300);
  failureExamples.set(msg, (failureExamples.get(msg) ?? 0) + 1);
  if (failureExamples.get(msg) === 1) console.error(`soak: failure ${msg}`);
}

const busyPaths = new Set<number>();

async function runOp(base: string, kind: OpKind, n: number): Promise<void> {
  switch (kind) {
    case 'stream':
      return chat(base, { model: 'soak', content: `stream ${n}`, stream: true, expect: REPLY });
    case 'non-stream':
      return chat(base, { model: 'soak', content: `plain ${n}`, stream: false, expect: REPLY });
    case 'session':
      return chat(base, { model: 'soak', content: `turn ${n}`, stream: n % 2 === 0, expect: REPLY, sessionId: `soak-session-${n % SESSIONS}` });
    case 'tool':
      return chat(base, { model: 'soak-tools', content: `[tool] read the note ${n}`, stream: n % 2 === 0, expect: TOOL_ANSWER });
    case 'cancel':
      return cancelledChat(base, n);
    case 'channel':
      return channelMessage(base, n);
    case 'invalid-key': {
      const res = await fetch(`${base}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer sk-wrong-${randomBytes(12).toString('hex')}` },
        body: JSON.stringify({ model: 'soak', stream: n % 2 === 0, messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const body = await res.text();
      // The OpenAI-compatible routes answer errors in OpenAI's shape: { error: { message, type, code } }.
      if (res.status !== 401 || typeof (JSON.parse(body) as { error?: { message?: unknown } }).error?.message !== 'string') throw new Error(`wrong key: ${res.status} ${body.slice(0, 200)}`);
      return;
    }
    case 'agent-crud': {
      const id = `soak-tmp-${n}`;
      await expectStatus('create', api(base, 'POST', '/agents', agentBody(id, {})), 201);
      const got = await expectStatus('get', api(base, 'GET', `/agents/${id}`), 200);
      if ((got as { ruleChain?: { id?: string } }).ruleChain?.id !== id) throw new Error(`get ${id}: wrong agent`);
      await expectStatus('update', api(base, 'PUT', `/agents/${id}`, { ...agentBody(id, {}), ruleChain: { id, name: `${id} renamed` } }), 200);
      await expectStatus('list', api(base, 'GET', '/agents?page=1&size=20'), 200);
      await expectStatus('delete', api(base, 'DELETE', `/agents/${id}`), [200, 204]);
      return;
    }
    case 'workspace': {
      // One operation per path at a time, so the read-back must see this write.
      let i = n % WORKSPACE_FILES;
      for (let tries = 0; busyPaths.has(i) && tries < WORKSPACE_FILES; tries++) i = (i + 1) % WORKSPACE_FILES;
      if (busyPaths.has(i)) throw new Error('every workspace path busy');
      busyPaths.add(i);
      try {
        const content = noteContent(n);
        await expectStatus('write', api(base, 'PUT', `/agents/soak/workspace/file?path=notes/${i}.md`, { content }), 200);
        const read = (await expectStatus('read', api(base, 'GET', `/agents/soak/workspace/file?path=notes/${i}.md`), 200)) as { content?: string };
        if (read.content !== content) throw new Error(`workspace read-back of notes/${i}.md differs`);
      } finally {
        busyPaths.delete(i);
      }
      return;
    }
  }
}

async function chat(base: string, o: { model: string; content: string; stream: boolean; expect: string; sessionId?: string }): Promise<void> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNT_KEY}` },
    body: JSON.stringify({ model: o.model, stream: o.stream, messages: [{ role: 'user', content: o.content }], ...(o.sessionId ? { sessionId: o.sessionId } : {}) }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  if (res.status !== 200) throw new Error(`chat ${o.stream ? 'stream' : 'plain'}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  if (!o.stream) {
    const body = (await res.json()) as { choices?: Array<{ message?: { content?: string } }> };
    const text = body.choices?.[0]?.message?.content ?? '';
    if (text.trim() !== o.expect.trim()) throw new Error(`chat plain: unexpected answer "${text.slice(0, 80)}"`);
    return;
  }
  const { text, done, error } = await readSse(res);
  if (error) throw new Error(`chat stream: error event ${error.slice(0, 200)}`);
  if (!done) throw new Error('chat stream: ended without [DONE]');
  if (text.trim() !== o.expect.trim()) throw new Error(`chat stream: unexpected answer "${text.slice(0, 80)}"`);
}

/**
 * A direct message posted by the platform to the account's webhook, as Telegram posts it; done
 * when the agent's answer reached the platform through the connector. Each operation is its own
 * sender, so the answer to wait for is the one sent to that chat.
 */
async function channelMessage(base: string, n: number): Promise<void> {
  const tg = state.telegram!;
  const chatId = `${700000 + n}`;
  const { headers, body } = tg.inbound({ eventId: `soak-${n}`, chatId, chatType: 'dm', senderId: chatId, text: `channel ${n}` });
  const res = await fetch(`${base}/channels/chat_d/accounts/soak/events`, { method: 'POST', headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  if (res.status !== 200) throw new Error(`channel event: ${res.status} ${(await res.text()).slice(0, 200)}`);
  const deadline = Date.now() + REQUEST_TIMEOUT_MS;
  for (;;) {
    const sent = tg.sent.find((m) => m.chatId === chatId);
    if (sent) {
      if (sent.text?.trim() !== REPLY.trim()) throw new Error(`channel: unexpected answer "${(sent.text ?? '').slice(0, 80)}"`);
      return;
    }
    if (Date.now() > deadline || state.fatal) throw new Error(`channel: no answer sent to chat ${chatId} within ${REQUEST_TIMEOUT_MS / 1000} s`);
    await sleep(100);
  }
}

/** A stream the client drops after its first token; the run is then cancelled on the worker. */
async function cancelledChat(base: string, n: number): Promise<void> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('timeout before the first token')), REQUEST_TIMEOUT_MS);
  try {
    const res = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ACCOUNT_KEY}` },
      body: JSON.stringify({ model: 'soak', stream: true, messages: [{ role: 'user', content: `[slow] ${n}` }] }),
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`cancel: ${res.status} ${(await res.text()).slice(0, 200)}`);
    const { text } = await readSse(res, () => controller.abort());
    if (!text.startsWith('slow0')) throw new Error(`cancel: unexpected first token "${text.slice(0, 40)}"`);
  } catch (err) {
    if (controller.signal.aborted && (controller.signal.reason as Error | undefined)?.message !== 'timeout before the first token') return;
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** Reads an SSE chat stream; `onFirstText` (when given) is called on the first text and the read stops there. */
async function readSse(res: Response, onFirstText?: () => void): Promise<{ text: string; done: boolean; error?: string }> {
  const decoder = new TextDecoder();
  let buf = '';
  let text = '';
  let done = false;
  let error: string | undefined;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        const parsed = JSON.parse(data) as { error?: unknown; choices?: Array<{ delta?: { content?: string } }> };
        if (parsed.error !== undefined) error = JSON.stringify(parsed.error);
        const piece = parsed.choices?.[0]?.delta?.content;
        if (piece) {
          text += piece;
          if (onFirstText) {
            onFirstText();
            return { text, done, error };
          }
        }
      }
    }
  }
  return { text, done, error };
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

function agentBody(id: string, configuration: Record<string, unknown>) {
  return {
    ruleChain: { id, name: id },
    metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', ...configuration } }], connections: [] },
  };
}

function noteContent(n: number): string {
  return `note ${n}\n${'lorem ipsum dolor sit amet '.repeat(80)}`;
}

async function api(base: string, method: string, url: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  return { status: res.status, text: await res.text() };
}

async function expectStatus(what: string, call: Promise<{ status: number; text: string }>, want: number | number[]): Promise<unknown> {
  const { status, text } = await call;
  if (!(Array.isArray(want) ? want : [want]).includes(status)) throw new Error(`${what}: ${status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Sampling

async function cronCounts(): Promise<{ succeeded: number; other: number }> {
  const r = await state.admin!.query<{ status: string; n: string }>('select status, count(*)::text as n from cron_runs group by status');
  let succeeded = 0;
  let other = 0;
  for (const row of r.rows) {
    if (row.status === 'succeeded') succeeded += Number(row.n);
    // Still running at the time of the sample: counted once it ends, in a later minute.
    else if (row.status !== 'running') other += Number(row.n);
  }
  return { succeeded, other };
}

/** A service that cannot answer a scrape within 10 s is stuck, whatever the requests say. */
const metricsMisses: string[] = [];
let last = { ok: 0, failed: 0, shed: 0, byKind: {} as Record<string, { ok: number; failed: number }> };

async function sample(minute: number, services: ServiceHandle[], cronBefore: { succeeded: number; other: number }, cronNow: { succeeded: number; other: number }): Promise<Sample> {
  const rss: Record<string, number> = {};
  const heapMb: Record<string, number> = {};
  const lagP99Ms: Record<string, number> = {};
  let openStreams = 0;
  for (const s of services) rss[s.name] = rssMb(s.svc.proc.pid);
  rss.bench = rssMb(process.pid);
  await Promise.all(
    services.map(async (s) => {
      const svc = s.svc;
      try {
        const m = await scrapeMetrics(s.metricsUrl);
        heapMb[s.name] = (m.first.get('nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20;
        lagP99Ms[s.name] = (m.first.get('nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000;
        openStreams += m.sums.get('agentry_chat_active_streams') ?? 0;
      } catch (err) {
        heapMb[s.name] = NaN;
        lagP99Ms[s.name] = NaN;
        // The worker this soak has just SIGKILLed, its replacement not yet in its place: nothing to scrape.
        if (killedOnPurpose.has(svc)) return;
        metricsMisses.push(`minute ${minute}: ${s.name}'s /metrics did not answer (${(err as Error).message})`);
      }
    }),
  );
  const info = await state.redis!.info('memory');
  const usedMemory = Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? NaN);
  const { keys, bytes } = await prefixUsage();
  const pgc = await state.admin!.query<{ conns: string; size: string }>(
    'select (select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid())::text as conns, pg_database_size(current_database())::text as size',
  );
  const byKind: Record<string, { ok: number; failed: number }> = {};
  for (const [kind, c] of Object.entries(counts.byKind)) {
    const before = last.byKind[kind] ?? { ok: 0, failed: 0 };
    byKind[kind] = { ok: c.ok - before.ok, failed: c.failed - before.failed };
  }
  const s: Sample = {
    minute,
    at: Date.now(),
    rss,
    heapMb,
    lagP99Ms,
    openStreams,
    redisUsedMb: usedMemory / 2 ** 20,
    prefixKeys: keys,
    prefixMb: bytes / 2 ** 20,
    pgConnections: Number(pgc.rows[0]!.conns),
    dbSizeMb: Number(pgc.rows[0]!.size) / 2 ** 20,
    ok: counts.ok - last.ok,
    failed: counts.failed - last.failed,
    shed: counts.shed - last.shed,
    byKind,
    cronSucceeded: cronNow.succeeded - cronBefore.succeeded,
    cronOther: cronNow.other - cronBefore.other,
  };
  last = { ok: counts.ok, failed: counts.failed, shed: counts.shed, byKind: structuredClone(counts.byKind) };
  return s;
}

/** Keys under the prefix and their MEMORY USAGE total (SCAN, so the shared server is not blocked). */
async function prefixUsage(): Promise<{ keys: number; bytes: number }> {
  const redis = state.redis!;
  let cursor = '0';
  let keys = 0;
  let bytes = 0;
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${state.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    keys += batch.length;
    if (batch.length > 0) {
      const pipe = redis.pipeline();
      for (const k of batch) pipe.memory('USAGE', k);
      for (const [err, v] of (await pipe.exec()) ?? []) if (!err && typeof v === 'number') bytes += v;
    }
  } while (cursor !== '0');
  return { keys, bytes };
}

function printSample(s: Sample): void {
  const rss = Object.entries(s.rss)
    .map(([k, v]) => `${k} ${v.toFixed(0)}`)
    .join(', ');
  console.log(
    `[min ${s.minute}] ok ${s.ok} failed ${s.failed} shed ${s.shed} cron ${s.cronSucceeded}/${s.cronOther} | RSS MB ${rss} | Redis ${s.redisUsedMb.toFixed(1)} MB, prefix ${s.prefixKeys} keys ${s.prefixMb.toFixed(2)} MB | PG ${s.pgConnections} conns ${s.dbSizeMb.toFixed(1)} MB | streams ${s.openStreams}`,
  );
}

// ---------------------------------------------------------------------------------------------
// Verdicts and the section

interface Verdict {
  series: string;
  unit: string;
  first: number;
  lastValue: number;
  slopePerHour: number;
  /** Least squares, shown beside the robust slope: the two differ when a few samples stand out. */
  leastSquaresPerHour: number;
  threshold: number | undefined;
  flat: boolean | undefined;
  gate: boolean;
}

function analyse(samples: Sample[], services: ServiceHandle[], drained: { leftInFlight: number }) {
  const problems: string[] = [];
  if (state.fatal) problems.push(state.fatal);
  problems.push(...metricsMisses);
  const total = counts.ok + counts.failed + counts.shed;
  const bad = counts.failed + counts.shed;
  if (total === 0) problems.push('no operation ran');
  else if (bad / total > MAX_ERROR_RATE) problems.push(`${bad} of ${total} operations failed or were shed (${((100 * bad) / total).toFixed(2)} %, the limit is ${(100 * MAX_ERROR_RATE).toFixed(2)} %)`);
  if (drained.leftInFlight > 0) problems.push(`${drained.leftInFlight} operations still running ${REQUEST_TIMEOUT_MS / 1000 + 5} s after the load stopped`);
  const afterWarmup = samples.filter((s) => s.minute > WARMUP);
  const cronFired = afterWarmup.reduce((n, s) => n + s.cronSucceeded, 0);
  const cronFailed = samples.reduce((n, s) => n + s.cronOther, 0);
  const cronExpected = afterWarmup.length * (60 / CRON_EVERY);
  if (afterWarmup.length > 0 && cronFired < CRON_MIN_SHARE * cronExpected) problems.push(`cron: ${cronFired} successful fires after the warm-up, expected about ${cronExpected}`);
  if (cronFailed > 0) problems.push(`cron: ${cronFailed} fires did not succeed`);

  const fitted = samples.filter((s) => s.minute >= WARMUP);
  const verdicts: Verdict[] = [];
  const add = (series: string, unit: string, pick: (s: Sample) => number, threshold: number | undefined, gate = false) => {
    const points = fitted.map((s) => [s.minute, pick(s)] as const);
    const slopePerHour = theilSenSlope(points) * 60;
    const leastSquaresPerHour = linearFit(points).slope * 60;
    const flat = threshold === undefined || !Number.isFinite(slopePerHour) ? undefined : slopePerHour <= threshold || !envelopeRises(points, threshold);
    verdicts.push({ series, unit, first: pick(fitted[0] ?? samples[0]!), lastValue: pick(samples.at(-1)!), slopePerHour, leastSquaresPerHour, threshold, flat, gate });
    if (gate && flat === false) problems.push(`${series} grows ${slopePerHour.toFixed(1)} ${unit}/hour after the warm-up (threshold ${threshold})`);
  };
  // A worker replaced every few minutes has no growth to judge: its series restarts with each process.
  for (const s of services) add(`RSS ${s.name}`, 'MB', (x) => x.rss[s.name]!, RSS_MB_PER_HOUR, !(KILL_EVERY_S > 0 && s.name.startsWith('worker-')));
  add('RSS bench (load, fake model, proxy)', 'MB', (x) => x.rss.bench!, undefined);
  for (const s of services) add(`V8 heap used ${s.name}`, 'MB', (x) => x.heapMb[s.name]!, HEAP_MB_PER_HOUR);
  for (const s of services) add(`event-loop lag p99 ${s.name}`, 'ms', (x) => x.lagP99Ms[s.name]!, LAG_MS_PER_HOUR);
  add('Redis used_memory (whole server)', 'MB', (x) => x.redisUsedMb, REDIS_MB_PER_HOUR);
  add('Redis keys under the prefix', 'keys', (x) => x.prefixKeys, undefined);
  add('Redis bytes under the prefix', 'MB', (x) => x.prefixMb, PREFIX_MB_PER_HOUR);
  add('Postgres connections', 'conns', (x) => x.pgConnections, PG_CONNS_PER_HOUR);
  add('Postgres database size', 'MB', (x) => x.dbSizeMb, undefined);
  return { problems, verdicts, cronFired, cronExpected, cronFailed, total, bad };
}

function render(samples: Sample[], services: ServiceHandle[], report: ReturnType<typeof analyse>, started: number): string {
  const names = services.map((s) => s.name);
  const f0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : 'n/a');
  const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : 'n/a');
  const signed = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(1)}` : 'n/a');
  const lines: string[] = [
    `<!-- bench:${SECTION}:start -->`,
    `## Soak: ${MINUTES} minutes of mixed load on a local cluster (${new Date().toISOString()})`,
    '',
    `Machine: ${os.availableParallelism()} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; commit ${gitCommit()}; command \`npm run soak${argv.length ? ` -- ${argv.join(' ')}` : ''}\`; ${Math.round((Date.now() - started) / 60_000)} min in all. The box is shared: the load generator, the fake model and the proxy run in the bench process, and other work (tests) may run on the same cores; that moves lag and CPU, not growth.`,
    '',
    `Cluster: ${names.join(', ')} (each its main.ts under tsx, \`info\` logging), behind libs/testing's round-robin proxy; Postgres and Redis on 127.0.0.1. Load: ${RATE} operations/s started open-loop (at most ${MAX_IN_FLIGHT} in flight), mixed ${MIX.map(([k, w]) => `${k} ${w} %`).join(', ')}; a cron job \`*/${CRON_EVERY} * * * * *\`. A chat answers ${REPLY_WORDS} words (2 ms apart); sessions: ${SESSIONS} \`sessionId\`s used all run; cancel: a 40-word answer 50 ms apart dropped after its first token; tool: the model asks for \`read\`, then answers; agent-crud: create, get, update, list, delete (5 requests); workspace: write then read one of ${WORKSPACE_FILES} files of 2 KB (2 requests); invalid-key: a chat with a wrong key, 401 expected; channel: a direct message from a new sender posted to a Telegram account's webhook (the fake Telegram), done when the agent's answer reached the platform through the connector.`,
    '',
    `Worker kills: ${KILL_EVERY_S > 0 ? `one agent-worker SIGKILLed every ${KILL_EVERY_S} s and replaced at once (${kills.length} kills; replacements ready after ${kills.map((k) => `${(k.readyMs / 1000).toFixed(1)} s`).join(', ') || '-'}); ${counts.workerLost} operations ended with the clean "worker stopped" error (a run that had started answering on a killed worker), counted apart from the failures` : 'none (--kill-every=0)'}.`,
    '',
    `Result: ${report.total} operations, ${report.bad} failed or shed; cron fired ${report.cronFired} times after the warm-up (about ${report.cronExpected} ticks), ${report.cronFailed} did not succeed. ${report.problems.length === 0 ? '**Passed.**' : `**Failed:** ${report.problems.map((p) => p.split('\n')[0]).join('; ')}.`}`,
    '',
    '### Memory per process, each minute (RSS / V8 heap used, MB)',
    '',
    `| minute | ${names.join(' | ')} | bench RSS |`,
    `|---|${names.map(() => '---|').join('')}---|`,
    ...samples.map((s) => `| ${s.minute} | ${names.map((n) => `${f0(s.rss[n]!)} / ${f0(s.heapMb[n]!)}`).join(' | ')} | ${f0(s.rss.bench!)} |`),
    '',
    '### Load and event-loop lag, each minute',
    '',
    'Operations ended in the minute before the reading (minute 0: before the load); lag is the p99 of each service over that minute, in ms.',
    '',
    `| minute | ok | failed | shed | cron fires | open streams | ${names.map((n) => `lag ${n}`).join(' | ')} |`,
    `|---|---|---|---|---|---|${names.map(() => '---|').join('')}`,
    ...samples.map((s) => `| ${s.minute} | ${s.ok} | ${s.failed} | ${s.shed} | ${s.cronSucceeded}${s.cronOther ? ` (+${s.cronOther} not ok)` : ''} | ${s.openStreams} | ${names.map((n) => f1(s.lagP99Ms[n]!)).join(' | ')} |`),
    '',
    '### Redis and Postgres, each minute',
    '',
    '| minute | Redis used_memory (MB, whole server) | keys under the prefix | MB under the prefix | Postgres connections | database size (MB) |',
    '|---|---|---|---|---|---|',
    ...samples.map((s) => `| ${s.minute} | ${f1(s.redisUsedMb)} | ${s.prefixKeys} | ${s.prefixMb.toFixed(2)} | ${s.pgConnections} | ${f1(s.dbSizeMb)} |`),
    '',
    `### Growth after the warm-up (fits over minutes ${WARMUP}..${samples.at(-1)!.minute})`,
    '',
    'A series is flat when its Theil-Sen slope (the median of the slopes between every pair of minutes, robust to the odd sample taken just after a GC or after the allocator returned pages) is at most the threshold per hour, or when its lowest and its highest values do not both rise from the first half of the fitted minutes to the second by more than the threshold allows (RSS is a sawtooth of several minutes: a slope over a few teeth follows where the run stopped, a leak lifts troughs and peaks alike); RSS over its threshold fails the run, the others are reported. The least-squares slope is shown beside it: where the two differ a lot, a few samples stand out and the table above tells which. Series without a threshold grow by design or are not ours alone (see the reading).',
    '',
    `| series | at minute ${WARMUP} | at the end | slope per hour (Theil-Sen) | least squares | threshold per hour | verdict |`,
    '|---|---|---|---|---|---|---|',
    ...report.verdicts.map(
      (v) =>
        `| ${v.series} | ${f1(v.first)} ${v.unit} | ${f1(v.lastValue)} ${v.unit} | ${signed(v.slopePerHour)} ${v.unit} | ${signed(v.leastSquaresPerHour)} ${v.unit} | ${v.threshold === undefined ? '-' : `${v.threshold} ${v.unit}`} | ${v.flat === undefined ? 'reported' : v.flat ? 'flat' : v.gate ? '**grows (fails)**' : '**grows**'} |`,
    ),
    '',
  ];
  if (failureExamples.size > 0) {
    lines.push('Failures, by message (first 10):', '');
    for (const [msg, n] of [...failureExamples].sort((a, b) => b[1] - a[1]).slice(0, 10)) lines.push(`- ${n} x \`${msg.replace(/`/g, "'")}\``);
    lines.push('');
  }
  lines.push(`<!-- bench:${SECTION}:end -->`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Cleanup on every exit path

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  return (cleaning ??= (async () => {
    state.stopping = true;
    const step = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        console.error(`soak: cleanup of ${what} failed: ${(err as Error).message}`);
      }
    };
    await step('the cluster', async () => state.cluster?.stop('SIGTERM'));
    killChildren();
    await step('the fake model', async () => state.fake?.close());
    await step('the fake chat platform', async () => state.telegram?.close());
    await step('the sampler connections', async () => {
      state.redis?.disconnect();
      await state.admin?.end();
    });
    await step('the Redis keys', async () => state.prefix && cleanupRedisPrefix(REDIS_URL, state.prefix));
    await step('the database', async () => state.db?.drop());
    if (state.work) fs.rmSync(state.work, { recursive: true, force: true });
  })());
}

/**
 * Kills this process's own children by pid (from /proc): covers a signal that arrives while the
 * cluster is still starting, before startLocalCluster has handed its processes back.
 */
function killChildren(): void {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) process.kill(Number(entry), 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

async function bail(code: number, why: string): Promise<never> {
  console.error(`soak: ${why}; cleaning up`);
  // Stops the load loop and the sampler from starting more work against a cluster going away.
  state.fatal ??= why;
  await cleanup();
  process.exit(code);
}

process.once('SIGINT', () => void bail(130, 'interrupted'));
process.once('SIGTERM', () => void bail(143, 'terminated'));
process.on('exit', () => killChildren());
const watchdog = setTimeout(() => void bail(1, `watchdog: the soak ran past ${MINUTES + 15} minutes`), (MINUTES + 15) * 60_000);
watchdog.unref();

main().then(
  async (code) => {
    await cleanup();
    process.exit(code);
  },
  async (err: unknown) => {
    console.error(err);
    await bail(1, 'failed');
  },
);
