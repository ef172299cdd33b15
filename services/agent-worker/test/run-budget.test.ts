import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Kysely, PostgresDialect, sql, type PostgresPool } from 'kysely';
import pg from 'pg';
import { Redis } from 'ioredis';
import { createRedisBus } from '@agentry/bus/redis';
import { type RunEvent } from '@agentry/contracts';
import { getRun, insertRuleChain, type Database, type DbHandle } from '@agentry/db';
import { type ModelCallRequest, type ModelEvent } from '@agentry/engine';
import { GatewayReplies, newRunId, submitRun } from '@agentry/runs';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { cleanupRedisPrefix, createTestDatabase, describeWithRedis, redisUrl, uniqueRedisPrefix, waitFor, type TestDatabase } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';

/**
 * Issue 39's per-run budget of Postgres transactions (docs/benchmarks.md, "Issue 39: time to
 * first token, cluster"): a streamed chat outside a session, from the gateway's insert to the
 * usage row, counted at the driver (every statement the pool's clients send, BEGIN..COMMIT as
 * one), never timed. Of those, the synchronous commits that write (each waits for a WAL flush)
 * counted before the run's first event reached its listener.
 */
const BUDGET = {
  /** The run insert, the claim, the finish, the usage row. */
  transactions: 4,
  /** The claim: it must be durable before anything is published (a retry reads `attempts`). */
  syncCommitsBeforeFirstToken: 1,
  /** Commits that wait for a WAL flush (at most: concurrent ones share a flush): the claim, the finish, the usage row. */
  syncCommits: 3,
  /**
   * Round trips the worker's own Redis connection makes between picking the job up and asking the
   * model: the run's lease and the listener check of its gateway's reply channel, in one write.
   */
  redisRoundTripsBeforeModel: 1,
};

/**
 * The commands of each write on one socket (the Redis producer connection, told by its port), while
 * `on`: a write is one round trip's request, however many commands it carries.
 */
class SocketWrites {
  on = false;
  port = 0;
  readonly writes: string[][] = [];
  readonly #original = net.Socket.prototype.write;

  install(): void {
    const original = this.#original;
    const seen = (socket: net.Socket, chunk: unknown): void => {
      if (this.on && socket.localPort === this.port) this.writes.push(commandNames(chunk));
    };
    net.Socket.prototype.write = function (this: net.Socket, chunk: unknown, ...rest: unknown[]) {
      seen(this, chunk);
      return (original as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof original;
  }

  uninstall(): void {
    net.Socket.prototype.write = this.#original;
  }
}

/** The command names in a chunk of RESP requests (arrays of bulk strings). */
function commandNames(chunk: unknown): string[] {
  const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
  const names: string[] = [];
  let at = 0;
  const line = (): string => {
    const end = buf.indexOf('\r\n', at);
    const text = buf.toString('latin1', at, end);
    at = end + 2;
    return text;
  };
  while (at < buf.length && buf[at] === 0x2a) {
    const n = Number(line().slice(1));
    for (let i = 0; i < n; i++) {
      const len = Number(line().slice(1));
      if (i === 0) names.push(buf.toString('latin1', at, at + len).toUpperCase());
      at += len + 2;
    }
  }
  return names;
}

/** Counts what a pool's clients send: transactions, and the synchronous ones that write. */
class StatementCounter {
  transactions = 0;
  syncWrites = 0;
  readonly statements: string[] = [];
  readonly #open = new Map<object, { writes: boolean; deferred: boolean }>();

  reset(): void {
    this.transactions = 0;
    this.syncWrites = 0;
    this.statements.length = 0;
  }

  seen(client: object, text: string): void {
    const s = text.trim().toLowerCase();
    // The streamed mark: written only by a run still going 50 ms after its first text (RunProgress),
    // which a loaded machine decides here, not the code; it is off the first token's path.
    if (/^update "runs" set "streamed" = /.test(s)) return;
    this.statements.push(s.replace(/\s+/g, ' ').slice(0, 100));
    const writes = /\b(insert|update|delete)\b/.test(s);
    const deferred = /set_config\('synchronous_commit', 'off'/.test(s);
    const tx = this.#open.get(client);
    if (s === 'begin' || s.startsWith('begin ')) {
      this.#open.set(client, { writes: false, deferred: false });
    } else if (s === 'commit' || s === 'rollback') {
      this.#open.delete(client);
      this.#ended(s === 'commit' && tx !== undefined && tx.writes && !tx.deferred);
    } else if (tx) {
      tx.writes ||= writes;
      tx.deferred ||= deferred || /set local synchronous_commit/.test(s);
    } else {
      this.#ended(writes && !deferred);
    }
  }

  #ended(syncWrite: boolean): void {
    this.transactions += 1;
    if (syncWrite) this.syncWrites += 1;
  }
}

/** A Postgres handle whose every statement goes through `counter` first. */
function countingHandle(url: string, counter: StatementCounter): DbHandle {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const counted: PostgresPool = {
    connect: async () => {
      const client = await pool.connect();
      return {
        query: ((text: unknown, values?: unknown[]) => {
          if (typeof text === 'string') counter.seen(client, text);
          return client.query(text as string, values);
        }) as never,
        release: () => client.release(),
      };
    },
    end: () => pool.end(),
  };
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: counted }) });
  return { db, dialect: 'postgres', ping: async () => void (await sql`select 1`.execute(db)), close: () => db.destroy() };
}

describeWithRedis("issue 39's per-run budget of Postgres transactions (a streamed chat, counted at the driver, never timed)", () => {
  const prefix = uniqueRedisPrefix();
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-run-budget-'));
  const counter = new StatementCounter();
  const redisWrites = new SocketWrites();
  /** The worker's producer writes when the model was asked (the run's first round trips). */
  let writesAtModel: string[][] = [];
  let test: TestDatabase;
  let runtime: Runtime;
  /** Resolved by the listener at the run's first event: the answer goes on only then, so that its end's writes come after. */
  let firstEventSeen: () => void = () => {};
  async function* fakeStream(req: ModelCallRequest): AsyncIterable<ModelEvent> {
    writesAtModel = [...redisWrites.writes];
    const seen = new Promise<void>((resolve) => (firstEventSeen = resolve));
    yield { type: 'text', text: `echo: ${String(req.messages.at(-1)!.content)}` };
    await seen;
    yield { type: 'done', finishReason: 'stop', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } };
  }

  beforeAll(async () => {
    // The watchdog's periodic check (a NUMSUB of its own) kept out of the counted window.
    fs.writeFileSync(path.join(cwd, 'config.yaml'), 'worker: {stall_timeout_ms: 1000}\nreliability: {listener_check_ms: 60000}\n');
    test = await createTestDatabase();
    runtime = await bootstrap({
      service: 'run-budget-test',
      mode: 'embedded',
      argv: [],
      env: { AGENTRY_SECRET_KEY: 'budget-master-key-0123456789-abcdef' },
      cwd,
      logDestination: { write: () => {} },
      openDb: async () => countingHandle(test.url, counter),
      openBus: (logger) => createRedisBus({ url: redisUrl(), prefix, logger }),
    });
    await insertRuleChain(test.handle.db, {
      id: 'w',
      kind: 'agent',
      agentId: null,
      name: 'W',
      category: null,
      dsl: { ruleChain: { id: 'w', name: 'W' }, metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'p' } }], connections: [] } },
    });
    await startAgentWorker(runtime, { stream: fakeStream });
    // The bus's producer (leases, listener checks, publishes) by its client port in CLIENT LIST.
    const admin = new Redis(redisUrl());
    try {
      const line = ((await admin.client('LIST')) as string).split('\n').find((l) => l.includes(` name=${prefix}:producer `));
      redisWrites.port = Number(/\baddr=\S*:(\d+)/.exec(line ?? '')?.[1]);
    } finally {
      admin.disconnect();
    }
    redisWrites.install();
  });
  afterAll(async () => {
    redisWrites.uninstall();
    await runtime?.lifecycle.shutdown('test');
    await test?.drop();
    await cleanupRedisPrefix(redisUrl(), prefix);
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  /** A streamed chat as the gateway's ChatRun submits it; the counts when its first event came, and at its end (usage row written). */
  async function chat(): Promise<{ beforeFirst: number; events: RunEvent[] }> {
    const runId = newRunId();
    const events: RunEvent[] = [];
    let beforeFirst = -1;
    // On the process's reply channel, as a gateway listens: the job names it (agent-run v3).
    const replies = GatewayReplies.of(runtime.bus.pubsub);
    const unsub = await replies.listen(runId, (e) => {
      if (events.length === 0) {
        beforeFirst = counter.syncWrites;
        firstEventSeen();
      }
      events.push(e);
    });
    redisWrites.writes.length = 0;
    redisWrites.on = true;
    await submitRun(
      { db: runtime.db.db, queue: runtime.bus.queue },
      { agentId: 'w', source: 'api', request: { messages: [{ role: 'user', content: 'hi' }], stream: true }, runId, replyTo: replies.id, commit: 'deferred' },
    );
    await waitFor(async () => events.some((e) => e.type === 'done' || e.type === 'error'), 10_000, 10);
    redisWrites.on = false;
    unsub();
    // Read on the test's own handle (not counted): the run's last writes are off its path.
    await waitFor(async () => (await getRun(test.handle.db, runId))?.status === 'succeeded', 10_000, 10);
    await waitFor(async () => (await test.handle.db.selectFrom('run_usage').select('id').where('run_id', '=', runId).execute()).length === 1, 10_000, 10);
    return { beforeFirst, events };
  }

  it('a streamed chat outside a session: at most 4 transactions, 3 synchronous commits, and one of them (the claim) before its first event', async () => {
    // Warm: the agent's definition and the budgets are read once per process, not per run.
    await chat();
    counter.reset();
    const { beforeFirst, events } = await chat();
    expect(events.map((e) => e.type)).toEqual(['text', 'done']);
    expect(counter.transactions, counter.statements.join('\n')).toBeLessThanOrEqual(BUDGET.transactions);
    expect(beforeFirst, counter.statements.join('\n')).toBeLessThanOrEqual(BUDGET.syncCommitsBeforeFirstToken);
    expect(counter.syncWrites, counter.statements.join('\n')).toBeLessThanOrEqual(BUDGET.syncCommits);
  });

  it("a streamed chat's worker makes one Redis round trip of its own between the job and the model request (the lease and the listener check together)", async () => {
    await chat();
    // The first write is the gateway's enqueue (the test shares the worker's bus); the worker's follow.
    const [enqueue, ...worker] = writesAtModel;
    expect(enqueue).toEqual(['EVALSHA']);
    expect(worker.length, JSON.stringify(writesAtModel)).toBeLessThanOrEqual(BUDGET.redisRoundTripsBeforeModel);
    expect(worker.flat().sort()).toEqual(['PUBSUB', 'SET']);
  });
});
