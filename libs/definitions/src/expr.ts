/**
 * A subset of RuleGo's expression language (github.com/expr-lang/expr) for `exprFilter` and
 * `exprTransform`, evaluated here rather than by a library: none on the npm registry speaks expr's
 * syntax (`nil`, `msg[:1]`, `upper(x)`, `not in`), and an own tree walker has no `eval`, no
 * prototype access (fields are own properties of JSON values only) and no loops, so a hostile
 * expression costs time and memory linear in its length and the message size (both capped).
 *
 * Supported: literals (numbers, '...' "..." `...` strings, true, false, nil, [arrays],
 * {maps}), variables, `a.b`, `a?.b`, `a[i]`, `a[i:j]`, `! not - +`, `** * / % + -`,
 * `== != < <= > >=`, `in`, `not in`, `contains`, `startsWith`, `endsWith`, `&& and || or`,
 * `??`, `c ? a : b`, and the functions of FUNCTIONS. Types are strict as in expr (`nil + 'x'`
 * is an error); an unknown variable is nil. Not supported (a compile error naming it):
 * `matches` (regular expressions can be made to run for ever), closures and predicates
 * (`all`, `filter`, `map`, `#`), `let`, pipes, ranges and `${node.x}` node references.
 */

export const MAX_EXPR_LENGTH = 4096;
const MAX_DEPTH = 64;
/** Longest string an expression may build (concatenation, replace, join, toJSON). */
export const MAX_EXPR_STRING = 1 << 20;

type Value = null | boolean | number | string | Value[] | { [k: string]: Value };

type Ast =
  | { k: 'lit'; v: Value }
  | { k: 'var'; name: string }
  | { k: 'arr'; items: Ast[] }
  | { k: 'map'; entries: Array<[string, Ast]> }
  | { k: 'member'; obj: Ast; key: Ast; optional: boolean }
  | { k: 'slice'; obj: Ast; from: Ast | undefined; to: Ast | undefined }
  | { k: 'call'; name: string; args: Ast[] }
  | { k: 'unary'; op: string; arg: Ast }
  | { k: 'bin'; op: string; left: Ast; right: Ast }
  | { k: 'cond'; test: Ast; yes: Ast; no: Ast };

export class ExprError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExprError';
  }
}

type Tok = { t: 'num'; v: number } | { t: 'str'; v: string } | { t: 'id'; v: string } | { t: 'op'; v: string } | { t: 'eof' };

const OPS = ['?.', '??', '==', '!=', '<=', '>=', '&&', '||', '**', '?', ':', '<', '>', '!', '+', '-', '*', '/', '%', '(', ')', '[', ']', '{', '}', ',', '.'];
const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '`': '`', '0': '\0' };

function lex(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] as string;
    if (/\s/.test(c)) { i++; continue; }
    const num = /^(?:\d[\d_]*)?(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(src.slice(i))?.[0] ?? '';
    if (num !== '' && /\d/.test(c) || (c === '.' && /\d/.test(src[i + 1] ?? ''))) {
      toks.push({ t: 'num', v: Number(num.replaceAll('_', '')) });
      i += num.length;
    } else if (c === "'" || c === '"' || c === '`') {
      let v = '';
      let j = i + 1;
      while (j < src.length && src[j] !== c) {
        if (src[j] === '\\' && c !== '`') {
          const e = ESCAPES[src[j + 1] ?? ''];
          if (e === undefined) throw new ExprError(`unknown escape \\${src[j + 1] ?? ''} at ${j}`);
          v += e;
          j += 2;
        } else v += src[j++];
      }
      if (j >= src.length) throw new ExprError(`unterminated string starting at ${i}`);
      toks.push({ t: 'str', v });
      i = j + 1;
    } else if (/[A-Za-z_$]/.test(c)) {
      const id = /^[A-Za-z_$][\w$]*/.exec(src.slice(i))?.[0] as string;
      toks.push({ t: 'id', v: id });
      i += id.length;
    } else {
      const op = OPS.find((o) => src.startsWith(o, i));
      if (!op) throw new ExprError(`unexpected "${c}" at ${i}`);
      toks.push({ t: 'op', v: op });
      i += op.length;
    }
  }
  toks.push({ t: 'eof' });
  return toks;
}

const WORD_OPS: Record<string, string> = { and: '&&', or: '||' };
/** Binary operators by precedence level, lowest first (after `??`, `||`, `&&`). */
const COMPARE = new Set(['==', '!=', '<', '<=', '>', '>=', 'in', 'not in', 'contains', 'startsWith', 'endsWith']);
const UNSUPPORTED = new Set(['matches', 'let', 'all', 'any', 'none', 'one', 'filter', 'map', 'count', 'find', 'findIndex', 'sortBy', 'groupBy', 'reduce']);

class Parser {
  #i = 0;
  #depth = 0;
  constructor(private readonly toks: Tok[]) {}

  parse(): Ast {
    const ast = this.#ternary();
    const rest = this.#peek();
    if (rest.t !== 'eof') throw new ExprError(`unexpected ${describe(rest)}`);
    return ast;
  }

  #peek(): Tok {
    return this.toks[this.#i] as Tok;
  }
  #next(): Tok {
    return this.toks[this.#i++] as Tok;
  }
  #isOp(v: string): boolean {
    const t = this.#peek();
    return t.t === 'op' && t.v === v;
  }
  #expect(v: string): void {
    const t = this.#next();
    if (t.t !== 'op' || t.v !== v) throw new ExprError(`expected "${v}", found ${describe(t)}`);
  }
  /** The binary operator at the cursor, words included (`and`, `not in`), without consuming it. */
  #binOp(): { op: string; len: number } | undefined {
    const t = this.#peek();
    if (t.t === 'op') return { op: t.v, len: 1 };
    if (t.t !== 'id') return undefined;
    if (UNSUPPORTED.has(t.v)) throw new ExprError(`"${t.v}" is not supported`);
    if (t.v in WORD_OPS) return { op: WORD_OPS[t.v] as string, len: 1 };
    if (t.v === 'not') {
      const n = this.toks[this.#i + 1];
      return n?.t === 'id' && n.v === 'in' ? { op: 'not in', len: 2 } : undefined;
    }
    return COMPARE.has(t.v) ? { op: t.v, len: 1 } : undefined;
  }

  #ternary(): Ast {
    if (++this.#depth > MAX_DEPTH) throw new ExprError(`the expression nests deeper than ${MAX_DEPTH} levels`);
    const test = this.#binary(0);
    let ast = test;
    if (this.#isOp('?')) {
      this.#next();
      const yes = this.#ternary();
      this.#expect(':');
      ast = { k: 'cond', test, yes, no: this.#ternary() };
    }
    this.#depth--;
    return ast;
  }

  #binary(level: number): Ast {
    if (level === LEVELS.length) return this.#power();
    let left = this.#binary(level + 1);
    for (let op = this.#binOp(); op && (LEVELS[level] as Set<string>).has(op.op); op = this.#binOp()) {
      this.#i += op.len;
      left = { k: 'bin', op: op.op, left, right: this.#binary(level + 1) };
    }
    return left;
  }

  #power(): Ast {
    const base = this.#unary();
    if (!this.#isOp('**')) return base;
    this.#next();
    return { k: 'bin', op: '**', left: base, right: this.#power() };
  }

  #unary(): Ast {
    const t = this.#peek();
    if ((t.t === 'op' && ['!', '-', '+'].includes(t.v)) || (t.t === 'id' && t.v === 'not')) {
      this.#next();
      if (++this.#depth > MAX_DEPTH) throw new ExprError(`the expression nests deeper than ${MAX_DEPTH} levels`);
      const arg = this.#unary();
      this.#depth--;
      return { k: 'unary', op: t.v === 'not' ? '!' : t.v, arg };
    }
    return this.#postfix(this.#primary());
  }

  #postfix(start: Ast): Ast {
    let ast = start;
    for (;;) {
      if (this.#isOp('.') || this.#isOp('?.')) {
        const optional = (this.#next() as { v: string }).v === '?.';
        const name = this.#next();
        if (name.t !== 'id') throw new ExprError(`expected a field name, found ${describe(name)}`);
        ast = { k: 'member', obj: ast, key: { k: 'lit', v: name.v }, optional };
      } else if (this.#isOp('[')) {
        this.#next();
        const from = this.#isOp(':') ? undefined : this.#ternary();
        if (this.#isOp(':')) {
          this.#next();
          const to = this.#isOp(']') ? undefined : this.#ternary();
          ast = { k: 'slice', obj: ast, from, to };
        } else ast = { k: 'member', obj: ast, key: from as Ast, optional: false };
        this.#expect(']');
      } else return ast;
    }
  }

  #list(close: string): Ast[] {
    const items: Ast[] = [];
    while (!this.#isOp(close)) {
      items.push(this.#ternary());
      if (!this.#isOp(close)) this.#expect(',');
    }
    this.#next();
    return items;
  }

  #primary(): Ast {
    const t = this.#next();
    if (t.t === 'num' || t.t === 'str') return { k: 'lit', v: t.v };
    if (t.t === 'op' && t.v === '(') {
      const inner = this.#ternary();
      this.#expect(')');
      return inner;
    }
    if (t.t === 'op' && t.v === '[') return { k: 'arr', items: this.#list(']') };
    if (t.t === 'op' && t.v === '{') return this.#mapLiteral();
    if (t.t !== 'id') throw new ExprError(`unexpected ${describe(t)}`);
    if (t.v === 'true' || t.v === 'false') return { k: 'lit', v: t.v === 'true' };
    if (t.v === 'nil') return { k: 'lit', v: null };
    if (UNSUPPORTED.has(t.v)) throw new ExprError(`"${t.v}" is not supported`);
    if (this.#isOp('(')) {
      if (!Object.hasOwn(FUNCTIONS, t.v)) throw new ExprError(`unknown function ${t.v}()`);
      this.#next();
      return { k: 'call', name: t.v, args: this.#list(')') };
    }
    return { k: 'var', name: t.v };
  }

  #mapLiteral(): Ast {
    const entries: Array<[string, Ast]> = [];
    while (!this.#isOp('}')) {
      const key = this.#next();
      if (key.t !== 'id' && key.t !== 'str') throw new ExprError(`expected a map key, found ${describe(key)}`);
      this.#expect(':');
      entries.push([key.v, this.#ternary()]);
      if (!this.#isOp('}')) this.#expect(',');
    }
    this.#next();
    return { k: 'map', entries };
  }
}

const LEVELS: ReadonlyArray<Set<string>> = [new Set(['??']), new Set(['||']), new Set(['&&']), COMPARE, new Set(['+', '-']), new Set(['*', '/', '%'])];

function describe(t: Tok): string {
  return t.t === 'eof' ? 'the end of the expression' : `"${String(t.v)}"`;
}

const compiled = new Map<string, Ast>();

/** Parses an expression (cached); throws an ExprError saying what is wrong. */
export function compileExpr(src: string): Ast {
  const hit = compiled.get(src);
  if (hit) return hit;
  if (src.trim() === '') throw new ExprError('the expression is empty');
  if (src.length > MAX_EXPR_LENGTH) throw new ExprError(`the expression is longer than ${MAX_EXPR_LENGTH} characters`);
  if (src.includes('${')) throw new ExprError('${...} node references are not supported; use msg, metadata, id, type, data or dataType');
  const ast = new Parser(lex(src.trim().replace(/;$/, ''))).parse();
  if (compiled.size >= 512) compiled.clear();
  compiled.set(src, ast);
  return ast;
}

/** Evaluates `src` with `env` (JSON values) and returns a JSON value; throws an ExprError. */
export function evalExpr(src: string, env: Record<string, unknown>): Value {
  return evaluate(compileExpr(src), env as Record<string, Value>);
}

function typeName(v: Value): string {
  if (v === null) return 'nil';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'map';
  return typeof v === 'boolean' ? 'bool' : typeof v;
}

function isMap(v: Value): v is { [k: string]: Value } {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkString(s: string): string {
  if (s.length > MAX_EXPR_STRING) throw new ExprError(`a string longer than ${MAX_EXPR_STRING} characters`);
  return s;
}

function num(v: Value, what: string): number {
  if (typeof v !== 'number') throw new ExprError(`${what} needs a number, not ${typeName(v)}`);
  return v;
}

function str(v: Value, what: string): string {
  if (typeof v !== 'string') throw new ExprError(`${what} needs a string, not ${typeName(v)}`);
  return v;
}

function bool(v: Value, what: string): boolean {
  if (typeof v !== 'boolean') throw new ExprError(`${what} needs a bool, not ${typeName(v)}`);
  return v;
}

/** JSON with map keys sorted, as Go's encoding/json writes maps. */
export function stableJson(v: unknown, indent = ''): string {
  return JSON.stringify(sortKeys(v), null, indent);
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
}

function equal(a: Value, b: Value): boolean {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  return stableJson(a) === stableJson(b);
}

function evaluate(ast: Ast, env: Record<string, Value>): Value {
  switch (ast.k) {
    case 'lit':
      return ast.v;
    case 'var':
      return Object.hasOwn(env, ast.name) ? (env[ast.name] ?? null) : null;
    case 'arr':
      return ast.items.map((a) => evaluate(a, env));
    case 'map':
      return Object.fromEntries(ast.entries.map(([k, a]) => [k, evaluate(a, env)]));
    case 'member':
      return member(evaluate(ast.obj, env), () => evaluate(ast.key, env), ast.optional);
    case 'slice':
      return slice(evaluate(ast.obj, env), ast.from && evaluate(ast.from, env), ast.to && evaluate(ast.to, env));
    case 'call':
      return (FUNCTIONS[ast.name] as (args: Value[]) => Value)(ast.args.map((a) => evaluate(a, env)));
    case 'unary': {
      const v = evaluate(ast.arg, env);
      if (ast.op === '!') return !bool(v, '!');
      return ast.op === '-' ? -num(v, 'unary -') : num(v, 'unary +');
    }
    case 'cond':
      return bool(evaluate(ast.test, env), 'the condition of ?:') ? evaluate(ast.yes, env) : evaluate(ast.no, env);
    case 'bin':
      return binary(ast.op, ast.left, ast.right, env);
  }
}

function member(obj: Value, key: () => Value, optional: boolean): Value {
  if (obj === null && optional) return null;
  const k = key();
  if (isMap(obj)) {
    if (typeof k !== 'string') throw new ExprError(`a map key must be a string, not ${typeName(k)}`);
    return Object.hasOwn(obj, k) ? (obj[k] ?? null) : null;
  }
  if (Array.isArray(obj) || typeof obj === 'string') {
    if (typeof k !== 'number' || !Number.isInteger(k)) throw new ExprError(`cannot fetch ${JSON.stringify(k)} from ${typeName(obj)}`);
    const items = Array.isArray(obj) ? obj : [...obj];
    const i = k < 0 ? items.length + k : k;
    if (i < 0 || i >= items.length) throw new ExprError(`index out of range: ${k} (length ${items.length})`);
    return items[i] as Value;
  }
  throw new ExprError(`cannot fetch ${JSON.stringify(k)} from ${typeName(obj)}`);
}

function slice(obj: Value, from: Value | undefined, to: Value | undefined): Value {
  if (!Array.isArray(obj) && typeof obj !== 'string') throw new ExprError(`cannot slice ${typeName(obj)}`);
  const items = Array.isArray(obj) ? obj : [...obj];
  const bound = (v: Value | undefined, d: number) => {
    if (v === undefined) return d;
    const n = num(v, 'a slice bound');
    return Math.min(items.length, Math.max(0, n < 0 ? items.length + n : n));
  };
  const part = items.slice(bound(from, 0), bound(to, items.length));
  return Array.isArray(obj) ? part : part.join('');
}

function binary(op: string, l: Ast, r: Ast, env: Record<string, Value>): Value {
  if (op === '&&') return bool(evaluate(l, env), '&&') && bool(evaluate(r, env), '&&');
  if (op === '||') return bool(evaluate(l, env), '||') || bool(evaluate(r, env), '||');
  const a = evaluate(l, env);
  if (op === '??') return a ?? evaluate(r, env);
  const b = evaluate(r, env);
  switch (op) {
    case '==': return equal(a, b);
    case '!=': return !equal(a, b);
    case 'in': return contains(b, a);
    case 'not in': return !contains(b, a);
    case 'contains': return str(a, op).includes(str(b, op));
    case 'startsWith': return str(a, op).startsWith(str(b, op));
    case 'endsWith': return str(a, op).endsWith(str(b, op));
    case '+': return plus(a, b);
    case '<': case '<=': case '>': case '>=': return compare(op, a, b);
    default: return arithmetic(op, num(a, op), num(b, op));
  }
}

function contains(container: Value, item: Value): boolean {
  if (Array.isArray(container)) return container.some((x) => equal(x, item));
  if (isMap(container)) return typeof item === 'string' && Object.hasOwn(container, item);
  throw new ExprError(`"in" needs an array or a map on its right, not ${typeName(container)}`);
}

function plus(a: Value, b: Value): Value {
  if (typeof a === 'number' && typeof b === 'number') return a + b;
  if (typeof a === 'string' && typeof b === 'string') return checkString(a + b);
  if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
  throw new ExprError(`invalid operation: ${typeName(a)} + ${typeName(b)}`);
}

function compare(op: string, a: Value, b: Value): boolean {
  if (!((typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string'))) {
    throw new ExprError(`invalid operation: ${typeName(a)} ${op} ${typeName(b)}`);
  }
  if (op === '<') return a < b;
  if (op === '<=') return a <= b;
  return op === '>' ? a > b : a >= b;
}

function arithmetic(op: string, a: number, b: number): number {
  let out: number;
  if (op === '-') out = a - b;
  else if (op === '*') out = a * b;
  else if (op === '/') out = a / b;
  else if (op === '**') out = a ** b;
  else {
    if (!Number.isInteger(a) || !Number.isInteger(b)) throw new ExprError('% needs integers');
    if (b === 0) throw new ExprError('integer divide by zero');
    out = a % b;
  }
  if (!Number.isFinite(out)) throw new ExprError(`${a} ${op} ${b} is not a finite number`);
  return out;
}

function arity(name: string, args: Value[], min: number, max = min): void {
  if (args.length < min || args.length > max) throw new ExprError(`${name}() takes ${min === max ? min : `${min} to ${max}`} arguments, not ${args.length}`);
}

/** fn(name, arity, body): a builtin checking its argument count. */
function fn(name: string, min: number, max: number, body: (a: Value[]) => Value): (args: Value[]) => Value {
  return (args) => {
    arity(name, args, min, max);
    return body(args);
  };
}

const s1 = (name: string, f: (s: string) => Value) => fn(name, 1, 1, ([a]) => f(str(a as Value, `${name}()`)));
const n1 = (name: string, f: (n: number) => number) => fn(name, 1, 1, ([a]) => f(num(a as Value, `${name}()`)));

function toNumber(name: string, v: Value): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  throw new ExprError(`${name}() cannot convert ${typeName(v)} ${JSON.stringify(v)}`);
}

function lengthOf(v: Value): number {
  if (typeof v === 'string') return [...v].length;
  if (Array.isArray(v)) return v.length;
  if (isMap(v)) return Object.keys(v).length;
  throw new ExprError(`len() needs a string, array or map, not ${typeName(v)}`);
}

function numbers(name: string, args: Value[]): number[] {
  const list = args.length === 1 && Array.isArray(args[0]) ? args[0] : args;
  if (list.length === 0) throw new ExprError(`${name}() needs at least one number`);
  return list.map((v) => num(v, `${name}()`));
}

/** The builtins (a subset of expr's), by name; anything else is an unknown function. */
const FUNCTIONS: Readonly<Record<string, (args: Value[]) => Value>> = Object.freeze(Object.assign(Object.create(null) as Record<string, (args: Value[]) => Value>, {
  len: fn('len', 1, 1, ([a]) => lengthOf(a as Value)),
  upper: s1('upper', (s) => s.toUpperCase()),
  lower: s1('lower', (s) => s.toLowerCase()),
  trim: fn('trim', 1, 2, ([a, c]) => trimChars(str(a as Value, 'trim()'), c === undefined ? undefined : str(c, 'trim()'))),
  trimPrefix: fn('trimPrefix', 2, 2, ([a, p]) => { const s = str(a as Value, 'trimPrefix()'); const x = str(p as Value, 'trimPrefix()'); return s.startsWith(x) ? s.slice(x.length) : s; }),
  trimSuffix: fn('trimSuffix', 2, 2, ([a, p]) => { const s = str(a as Value, 'trimSuffix()'); const x = str(p as Value, 'trimSuffix()'); return x && s.endsWith(x) ? s.slice(0, -x.length) : s; }),
  hasPrefix: fn('hasPrefix', 2, 2, ([a, p]) => str(a as Value, 'hasPrefix()').startsWith(str(p as Value, 'hasPrefix()'))),
  hasSuffix: fn('hasSuffix', 2, 2, ([a, p]) => str(a as Value, 'hasSuffix()').endsWith(str(p as Value, 'hasSuffix()'))),
  indexOf: fn('indexOf', 2, 2, ([a, p]) => str(a as Value, 'indexOf()').indexOf(str(p as Value, 'indexOf()'))),
  lastIndexOf: fn('lastIndexOf', 2, 2, ([a, p]) => str(a as Value, 'lastIndexOf()').lastIndexOf(str(p as Value, 'lastIndexOf()'))),
  split: fn('split', 2, 2, ([a, sep]) => str(a as Value, 'split()').split(str(sep as Value, 'split()'))),
  replace: fn('replace', 3, 3, ([a, o, n]) => checkString(str(a as Value, 'replace()').replaceAll(str(o as Value, 'replace()'), () => str(n as Value, 'replace()')))),
  join: fn('join', 1, 2, ([a, sep]) => {
    if (!Array.isArray(a)) throw new ExprError(`join() needs an array, not ${typeName(a as Value)}`);
    return checkString(a.map((x) => str(x, 'join()')).join(sep === undefined ? '' : str(sep, 'join()')));
  }),
  abs: n1('abs', Math.abs),
  ceil: n1('ceil', Math.ceil),
  floor: n1('floor', Math.floor),
  round: n1('round', Math.round),
  int: fn('int', 1, 1, ([a]) => Math.trunc(toNumber('int', a as Value))),
  float: fn('float', 1, 1, ([a]) => toNumber('float', a as Value)),
  string: fn('string', 1, 1, ([a]) => (typeof a === 'string' ? a : stableJson(a))),
  toJSON: fn('toJSON', 1, 1, ([a]) => checkString(stableJson(a, '  '))),
  fromJSON: fn('fromJSON', 1, 1, ([a]) => {
    try {
      return JSON.parse(str(a as Value, 'fromJSON()')) as Value;
    } catch {
      throw new ExprError('fromJSON(): not JSON');
    }
  }),
  keys: fn('keys', 1, 1, ([a]) => { if (!isMap(a as Value)) throw new ExprError('keys() needs a map'); return Object.keys(a as object).sort(); }),
  values: fn('values', 1, 1, ([a]) => { if (!isMap(a as Value)) throw new ExprError('values() needs a map'); const m = a as Record<string, Value>; return Object.keys(m).sort().map((k) => m[k] as Value); }),
  max: fn('max', 1, 64, (args) => Math.max(...numbers('max', args))),
  min: fn('min', 1, 64, (args) => Math.min(...numbers('min', args))),
  sum: fn('sum', 1, 1, ([a]) => { if (!Array.isArray(a)) throw new ExprError('sum() needs an array'); return a.reduce<number>((t, v) => t + num(v, 'sum()'), 0); }),
  first: fn('first', 1, 1, ([a]) => (Array.isArray(a) ? (a[0] ?? null) : null)),
  last: fn('last', 1, 1, ([a]) => (Array.isArray(a) ? (a[a.length - 1] ?? null) : null)),
  type: fn('type', 1, 1, ([a]) => typeName(a as Value)),
}));

function trimChars(s: string, chars: string | undefined): string {
  if (chars === undefined) return s.trim();
  const set = new Set(chars);
  let i = 0;
  let j = s.length;
  while (i < j && set.has(s[i] as string)) i++;
  while (j > i && set.has(s[j - 1] as string)) j--;
  return s.slice(i, j);
}
