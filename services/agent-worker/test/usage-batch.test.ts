import { afterAll, beforeAll, expect, it } from 'vitest';
import pino from 'pino';
import { sql } from 'kysely';
import type { DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { usageRecorder } from '../src/usage.js';

/** The usage recorder writes many model calls' rows with one INSERT, and a bad row loses only itself. */

let handle: DbHandle;
beforeAll(async () => {
  handle = await createTestPglite();
});
afterAll(async () => {
  await handle?.close();
});

/**
 * The transactions that wrote rows of `prefix`: one INSERT outside a transaction is one, and
 * rows written by one statement share its `xmin`. Counted in the database, since the recorder's
 * statement is compiled once per process (a plugin on this handle would not see it).
 */
const writesOf = async (prefix: string) =>
  Number(
    (await sql<{ n: string }>`select count(distinct xmin::text) as n from run_usage where run_id like ${`${prefix}%`}`.execute(handle.db)).rows[0]!.n,
  );

const done = (model: string, prompt: number) => ({ type: 'done' as const, finishReason: 'stop', provider: 'p', model, usage: { promptTokens: prompt, completionTokens: 1, totalTokens: prompt + 1 } });
const rowsOf = async (prefix: string) =>
  (await handle.db.selectFrom('run_usage').select(['run_id', 'model', 'prompt_tokens']).where('run_id', 'like', `${prefix}%`).orderBy('id').execute()).map((r) => [
    r.run_id,
    r.model,
    Number(r.prompt_tokens),
  ]);

it('writes the model calls of many runs with one INSERT, soon after they come', async () => {
  const recorder = usageRecorder({ db: handle.db, logger: pino({ level: 'silent' }) });
  for (let i = 0; i < 20; i++) recorder.record({ id: `batch-${i}`, agentId: 'a', principal: i === 0 ? 'api:x' : '' }, done('m', i));
  expect(await rowsOf('batch-')).toEqual([]);
  await new Promise((r) => setTimeout(r, 200));
  expect(await rowsOf('batch-')).toEqual(Array.from({ length: 20 }, (_, i) => [`batch-${i}`, 'm', i]));
  expect(await writesOf('batch-')).toBe(1);
  // drain writes what is still waiting, at once.
  recorder.record({ id: 'batch-last', agentId: 'a', principal: '' }, done('m', 7));
  await recorder.drain();
  expect(await rowsOf('batch-last')).toEqual([['batch-last', 'm', 7]]);
  expect(await writesOf('batch-')).toBe(2);
});

it('writes a failed batch row by row: the bad row is logged, the others are kept', async () => {
  const lines: string[] = [];
  const recorder = usageRecorder({ db: handle.db, logger: pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) }) });
  recorder.record({ id: 'mixed-1', agentId: 'a', principal: '' }, done('fine', 1));
  // Postgres refuses a NUL character in text: this row's INSERT fails.
  recorder.record({ id: 'mixed-2', agentId: 'a', principal: '' }, done('bad\u0000model', 2));
  recorder.record({ id: 'mixed-3', agentId: 'a', principal: '' }, done('fine', 3));
  await recorder.drain();
  expect(await rowsOf('mixed-')).toEqual([
    ['mixed-1', 'fine', 1],
    ['mixed-3', 'fine', 3],
  ]);
  expect(lines.filter((l) => l.includes('model call usage not recorded'))).toHaveLength(1);
  expect(lines.find((l) => l.includes('model call usage not recorded'))).toContain('mixed-2');
});
