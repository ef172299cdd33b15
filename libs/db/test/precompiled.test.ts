import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { precompiled } from '../src/precompiled.js';

describe('precompiled (a statement built and compiled once)', () => {
  it('sends the SQL text a per-call build compiles, with each call\'s arguments in their places and the constants kept', () => {
    const build = precompiled<{ id: string; n: number }, never>((qb, a) =>
      qb.updateTable('runs').set({ status: 'running', attempts: a('n') }).where('id', '=', a('id')).where('source', '=', 'api'),
    );
    const first = build.compiled({ id: 'r1', n: 3 });
    expect(first.sql).toBe('update "runs" set "status" = $1, "attempts" = $2 where "id" = $3 and "source" = $4');
    expect(first.parameters).toEqual(['running', 3, 'r1', 'api']);
    const second = build.compiled({ id: 'r2', n: 4 });
    // The very string: compiled once, not equal text rebuilt.
    expect(second.sql).toBe(first.sql);
    expect(second.parameters).toEqual(['running', 4, 'r2', 'api']);
    expect(first.parameters).toEqual(['running', 3, 'r1', 'api']);
  });

  it('takes an sql template, an argument used twice, and positional arguments', () => {
    const raw = precompiled<[string, string], { x: string }>((_qb, a) => sql<{ x: string }>`select ${a(0)}::text as x where ${a(1)} <> ${a(0)}`);
    const q = raw.compiled(['a', 'b']);
    expect(q.sql).toBe('select $1::text as x where $2 <> $3');
    expect(q.parameters).toEqual(['a', 'b', 'a']);
  });

  it('refuses an argument inside a value (it would be sent as the placeholder object)', () => {
    const nested = precompiled<{ id: string }, never>((_qb, a) => sql`select ${[a('id')]}`);
    expect(() => nested.compiled({ id: 'x' })).toThrow(/whole parameter/);
  });
});
