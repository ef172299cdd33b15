import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@agentry/testing';
import { describeWithPostgres } from '@agentry/testing';
import { migrationNames } from '../src/index.js';
import { runMigrateCommand } from '../src/migrate-command.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

async function run(argv: string[], databaseUrl?: string) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runMigrateCommand(argv, { databaseUrl }, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

describe('migrate command', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'agentry-migrate-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('migrates a PGlite folder, then finds it up to date', async () => {
    const dataDir = path.join(root, 'pgdata');
    const first = await run(['--data-dir', dataDir]);
    expect(first).toEqual({
      code: 0,
      out: [`migrating PGlite folder ${dataDir}`, ...migrationNames().map((n) => `applied ${n}`)],
      err: [],
    });
    const second = await run([`--data-dir=${dataDir}`]);
    expect(second.code).toBe(0);
    expect(second.out.at(-1)).toBe('already up to date');
  });

  it('rejects an unknown flag with one line', async () => {
    const result = await run(['--bogus']);
    expect(result.code).toBe(1);
    expect(result.err).toHaveLength(1);
    expect(result.err[0]).toMatch(/^migrate failed: .*bogus/);
  });

  it('as a process, prints one line without a stack and exits 1 when the database is unreachable', async () => {
    const failure = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--conditions=@agentry/source', 'libs/db/src/cli.ts'],
      { cwd: repoRoot, env: { ...process.env, DATABASE_URL: 'postgres://postgres:secret@127.0.0.1:1/nowhere' }, timeout: 20_000 },
    ).then(
      () => undefined,
      (err: { code?: number; stdout: string; stderr: string }) => err,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stdout).toBe('migrating postgres://postgres:***@127.0.0.1:1/nowhere\n');
    expect(failure?.stderr).toMatch(/^migrate failed: .*ECONNREFUSED.*\n$/);
    expect(failure?.stderr.split('\n')).toHaveLength(2);
  });
});

describeWithPostgres('migrate command on Postgres', () => {
  let empty: TestDatabase;
  beforeAll(async () => {
    empty = await createTestDatabase({ migrated: false });
  });
  afterAll(() => empty?.drop());

  it('migrates DATABASE_URL, ignoring --data-dir', async () => {
    const result = await run(['--data-dir', '/nonexistent/never/created'], empty.url);
    expect(result.code).toBe(0);
    expect(result.out.slice(1)).toEqual(migrationNames().map((n) => `applied ${n}`));
  });
});
