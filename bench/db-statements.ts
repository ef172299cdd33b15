/**
 * Issue 39: the client-side CPU of a run's Postgres statements alone (the deferred run insert,
 * the claim, one usage row, the finish), in this process, against the real Postgres on a
 * throwaway database: no HTTP, Redis or model around them, so a change of the Postgres client
 * path shows without the cluster's noise. CPU is this process's (process.cpuUsage), per run.
 *
 *   npx tsx bench/db-statements.ts [<tree>...] [--runs=3000] [--rounds=3]
 *
 * Each <tree> is a checkout with libs/db built (default: this one; bench:ab leaves its builds in
 * /tmp/agentry-ab-<commit>); with several, rounds alternate between them in child processes.
 * Needs Postgres at 127.0.0.1:5432 (user postgres), or PGURL naming another server's `postgres` db.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';

const argv = process.argv.slice(2);
const RUNS = Number(argv.find((a) => a.startsWith('--runs='))?.slice(7) ?? 3000);
const ROUNDS = Number(argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 3);
const child = argv.includes('--child');
const trees = argv.filter((a) => !a.startsWith('--'));
const ADMIN_URL = process.env.PGURL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CONCURRENCY = 4;

async function measure(tree: string): Promise<void> {
  const dist = (file: string) => import(pathToFileURL(path.join(tree, 'libs/db/dist/src', file)).href);
  const db = await dist('index.js');
  const { openPostgres } = await dist('postgres.js');
  const name = `bench_db_statements_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const handle = openPostgres({ url: url.toString(), poolMax: CONCURRENCY });
  try {
    await db.migrateToLatest(handle.db);
    await db.insertRuleChain(handle.db, { id: 'agent', kind: 'agent', agentId: null, name: 'agent', category: null, dsl: {} });
    let next = 0;
    const run = async () => {
      const id = `run-${next++}`;
      const request = { model: 'agent', messages: [{ role: 'user', content: 'hello' }] };
      await db.insertRun(handle.db, { id, agentId: 'agent', sessionId: null, source: 'api', request, replyTo: 'gw', principal: 'api:app' }, { commit: 'deferred' });
      await db.claimRunOutsideSession(handle.db, id);
      await db.insertRunUsages(handle.db, [{ runId: id, agentId: 'agent', principal: 'api:app', provider: 'p', model: 'm', promptTokens: 3, completionTokens: 5 }]);
      await db.finishRun(handle.db, id, { status: 'succeeded', output: 'hi', usage: { prompt_tokens: 3, completion_tokens: 5 }, finishedAt: new Date() });
    };
    const loop = async (n: number) => {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (n-- > 0) await run();
        }),
      );
    };
    // Warm-up: JIT, the pool's connections, each statement prepared on each connection.
    await loop(1000);
    const before = process.cpuUsage();
    await loop(RUNS);
    const cpu = process.cpuUsage(before);
    console.log(JSON.stringify({ tree, runs: RUNS, cpuUsPerRun: Math.round((cpu.user + cpu.system) / RUNS), userUsPerRun: Math.round(cpu.user / RUNS) }));
  } finally {
    await handle.close();
    await admin.query(`drop database ${name}`);
    await admin.end();
  }
}

if (child) {
  await measure(trees[0]!);
} else {
  const list = trees.length ? trees : [path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')];
  const results = new Map<string, number[]>(list.map((t) => [t, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const tree of list) {
      const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), tree, `--runs=${RUNS}`, '--child'], { encoding: 'utf8' });
      const line = JSON.parse(out.trim().split('\n').pop()!) as { cpuUsPerRun: number };
      results.get(tree)!.push(line.cpuUsPerRun);
      console.log(`round ${r + 1} ${tree}: ${line.cpuUsPerRun} us CPU per run`);
    }
  }
  for (const [tree, xs] of results) console.log(`${tree}: median ${[...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]} us CPU per run (${xs.join(' / ')})`);
}
