import {
  createQueryId,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type QueryExecutorProvider,
  type QueryResult,
} from 'kysely';
import type { Db } from './handle.js';
import type { Database } from './tables.js';

/** Where an argument goes in a statement being compiled: found again in its parameters by identity. */
class Slot {
  constructor(readonly name: string | number) {}
}

/**
 * Builds and compiles statements without a connection. Both engines compile with Kysely's
 * Postgres compiler (PGlite's dialect uses it too), so the text is the one a connected Kysely
 * would send, and a named prepared statement (postgres.ts) keeps its name.
 */
const compiler = new Kysely<Database>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/** A query builder, or an `sql` template (which compiles with an executor provider). */
export interface Statement<R> {
  compile(provider: QueryExecutorProvider): CompiledQuery<R>;
}

export type Arg<A> = <K extends keyof A & (string | number)>(name: K) => A[K];

export interface Precompiled<A, R> {
  /** Runs the statement with these arguments, on `db` or the transaction it is. */
  (db: Db, args: A): Promise<QueryResult<R>>;
  /** The statement as it is sent: the SQL compiled once, the parameters of these arguments. */
  compiled(args: A): CompiledQuery<R>;
}

/**
 * A statement of a run's hot path, built and compiled once (on its first use) instead of on
 * every call: Kysely's building and compiling were a few percent of the gateway's and the
 * worker's CPU. `build` must give the same statement whatever the arguments are (they are
 * placeholders there, never read: branch on them outside, one Precompiled per shape), and must
 * pass each argument where Kysely makes it a parameter (a value, never `sql.lit` or a reference).
 * The same SQL string object is sent every time, which also makes the statement-name lookup of
 * postgres.ts a hash already computed.
 */
export function precompiled<A extends object, R>(build: (qb: Kysely<Database>, arg: Arg<A>) => Statement<R>): Precompiled<A, R> {
  let compiled: CompiledQuery<R> | undefined;
  // Per parameter: the argument's name, or undefined for a constant the builder put there.
  let names: Array<string | number | undefined> = [];
  let constants: unknown[] = [];
  const compile = (): CompiledQuery<R> => {
    const query = build(compiler, ((name: string | number) => new Slot(name)) as Arg<A>).compile(compiler);
    names = query.parameters.map((p) => (p instanceof Slot ? p.name : undefined));
    constants = query.parameters.map((p) => (p instanceof Slot ? undefined : p));
    // A Slot inside a value (an array or object parameter) would be sent as is: refuse the shape.
    if (names.filter((n) => n !== undefined).length !== countSlots(query.parameters)) {
      throw new Error('precompiled: an argument must be a whole parameter, not part of one');
    }
    return (compiled = query);
  };
  const make = (args: A): CompiledQuery<R> => {
    const query = compiled ?? compile();
    const parameters = new Array<unknown>(names.length);
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      parameters[i] = name === undefined ? constants[i] : (args as Record<string | number, unknown>)[name];
    }
    return { sql: query.sql, parameters, query: query.query, queryId: createQueryId() };
  };
  const run = ((db: Db, args: A) => db.executeQuery(make(args))) as Precompiled<A, R>;
  run.compiled = make;
  return run;
}

function countSlots(value: unknown, seen = new Set<unknown>()): number {
  if (value instanceof Slot) return 1;
  if (typeof value !== 'object' || value === null || seen.has(value)) return 0;
  seen.add(value);
  let n = 0;
  for (const v of Object.values(value)) n += countSlots(v, seen);
  return n;
}
