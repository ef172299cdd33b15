import { CONNECTION_PATH, NODE_PATH, type SaveProblem } from './chain-graph';

/**
 * Where in the DSL tab's text a problem is: a JSON syntax error at its offset, and a problem the
 * gateway or the canvas's checks name by path (`metadata.nodes[3] ("x"), restApiCall:
 * configuration: ...`, a node id) at the line of that node, setting or connection. Pure, so it is
 * tested on its own (test/code-lines.test.ts); components/CodeEditor.tsx draws the result.
 */

export interface CodeProblem {
  from: number;
  to: number;
  severity: 'error' | 'warning';
  message: string;
}

/** The 1-based line of `offset` in `text`. */
export function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < Math.min(offset, text.length); i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** The offset where 1-based `line` and `column` are in `text`. */
function offsetOf(text: string, line: number, column: number): number {
  let at = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf('\n', at);
    if (nl < 0) return text.length;
    at = nl + 1;
  }
  return Math.min(text.length, at + Math.max(0, column - 1));
}

/**
 * Where JSON.parse failed: the strict scan's offset; else what the engine's message says (`at
 * position 45`, `line 3 column 5`; it names none for some errors), else the end.
 */
function syntaxOffset(text: string, message: string): number {
  try {
    scan(text);
  } catch (err) {
    if (err instanceof SyntaxAt) return err.at;
  }
  const lc = /line (\d+) column (\d+)/.exec(message);
  const pos = /position (\d+)/.exec(message);
  return lc ? offsetOf(text, Number(lc[1]), Number(lc[2])) : pos ? Number(pos[1]) : text.length;
}

/**
 * The syntax error of `text` as JSON, at its offset, or null when it parses. The engine's message
 * does not always give the offset, so the strict scan below finds it.
 */
export function jsonSyntaxProblem(text: string): CodeProblem | null {
  try {
    JSON.parse(text);
    return null;
  } catch (err) {
    const raw = err instanceof Error ? err.message : String(err);
    const from = syntaxOffset(text, raw);
    // The engine's text minus its own offsets and a quoted copy of the document: the line says where.
    const message = raw
      .replace(/\s*\(line \d+ column \d+\)/, '')
      .replace(/\s*(?:in JSON )?at position \d+/, '')
      .replace(/,\s*"[\s\S]*" is not valid JSON$/, '')
      .trim();
    return { from, to: Math.min(text.length, from + 1), severity: 'error', message: `Not valid JSON: ${message || 'syntax error'}` };
  }
}

/** A JSON value's place in the text: the value itself, the property it is the value of, its members. */
interface Spot {
  from: number;
  to: number;
  /** Where the property's key starts (members of objects). */
  keyFrom?: number;
  kids?: Map<string, Spot>;
}

/** Where strict JSON scanning stopped: the offset of the first character that cannot be there. */
class SyntaxAt extends Error {
  constructor(readonly at: number) {
    super(`JSON syntax error at ${at}`);
  }
}

const LITERAL = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/;

/** The places of every value in `text`, scanned as strict JSON; throws SyntaxAt where it is not. */
function scan(text: string): Spot {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i] as string)) i++;
  };
  const expect = (c: string) => {
    ws();
    if (text[i] !== c) throw new SyntaxAt(i);
    i++;
  };
  const str = (): string => {
    if (text[i] !== '"') throw new SyntaxAt(i);
    const start = i++;
    while (i < text.length && text[i] !== '"') {
      if (text.charCodeAt(i) < 32) throw new SyntaxAt(i);
      i += text[i] === '\\' ? 2 : 1;
    }
    if (i >= text.length) throw new SyntaxAt(text.length);
    i++;
    try {
      return JSON.parse(text.slice(start, i)) as string;
    } catch {
      throw new SyntaxAt(start);
    }
  };
  const members = (close: string, member: (n: number) => [string, Spot]): Map<string, Spot> => {
    const kids = new Map<string, Spot>();
    i++;
    ws();
    if (text[i] === close) {
      i++;
      return kids;
    }
    for (let n = 0; ; n++) {
      ws();
      const [key, spot] = member(n);
      kids.set(key, spot);
      ws();
      if (text[i] === ',') i++;
      else if (text[i] === close) {
        i++;
        return kids;
      } else throw new SyntaxAt(i);
    }
  };
  const value = (): Spot => {
    ws();
    const from = i;
    const c = text[i];
    if (c === '{') {
      const kids = members('}', () => {
        const keyFrom = i;
        const key = str();
        expect(':');
        return [key, { ...value(), keyFrom }];
      });
      return { from, to: i, kids };
    }
    if (c === '[') {
      const kids = members(']', (n) => [String(n), value()]);
      return { from, to: i, kids };
    }
    if (c === '"') {
      str();
      return { from, to: i };
    }
    const lit = LITERAL.exec(text.slice(i, i + 400));
    if (!lit) throw new SyntaxAt(i);
    i += lit[0].length;
    return { from, to: i };
  };
  const root = value();
  ws();
  if (i < text.length) throw new SyntaxAt(i);
  return root;
}

/** The deepest spot of `path` that the text has (a missing setting: its object). */
function deepest(root: Spot, path: readonly string[]): Spot {
  let at = root;
  for (const key of path) {
    const next = at.kids?.get(key);
    if (!next) break;
    at = next;
  }
  return at;
}

// Read as chain-graph.ts reads the gateway's problems; `configuration.a.b` / `unknown field "x"` narrow it down.
const CONFIG_PATH = /\bconfiguration((?:\.[A-Za-z_$][\w$]*|\[\d+\])*)/;
const UNKNOWN_FIELD = /unknown (?:field|property) "([^"]+)"/;
const CHAIN_PATH = /\bruleChain\.([A-Za-z_$][\w$]*)/;

/** The path in the DSL that a gateway problem names, or [] (the whole text). */
export function problemPath(problem: string): string[] {
  const node = NODE_PATH.exec(problem);
  if (node) {
    const base = ['metadata', 'nodes', node[1] as string];
    const config = CONFIG_PATH.exec(problem.slice(node.index + node[0].length));
    if (!config) return [...base, 'id'];
    const inner = (config[1] ?? '').split(/\.|\[(\d+)\]/).filter(Boolean);
    const unknown = UNKNOWN_FIELD.exec(problem);
    return [...base, 'configuration', ...inner, ...(unknown ? [unknown[1] as string] : [])];
  }
  const conn = CONNECTION_PATH.exec(problem);
  if (conn) return ['metadata', 'connections', conn[1] as string];
  const chain = CHAIN_PATH.exec(problem);
  return chain ? ['ruleChain', chain[1] as string] : [];
}

/** What to show for one problem on a line: the gateway's path prefix dropped (the line says where). */
function withoutPath(problem: string): string {
  return problem.replace(/^(?:.*?: )?metadata\.nodes\[\d+\](?: \("[^"]*"\))?,?\s*/, '') || problem;
}

export interface PlacedProblem {
  /** The gateway's text as it came (`metadata.nodes[3] ...`) or the canvas's issue. */
  text: string;
  severity: 'error' | 'warning';
  /** The node it is on: the canvas's checks', and a save's (see `SaveProblem`), whose index may have moved since. */
  nodeId?: string | undefined;
  /** The connection a save's problem was about, by its ends and relation. */
  connection?: SaveProblem['connection'];
}

/** Where `p` is in the chain as the text has it now: its path with today's index of its node or connection; null when that is gone. */
function currentPath(p: PlacedProblem, dsl: { metadata?: { nodes?: unknown; connections?: unknown } }): string[] | null {
  const path = problemPath(p.text);
  const list = (key: 'nodes' | 'connections') => (Array.isArray(dsl?.metadata?.[key]) ? (dsl.metadata[key] as Array<Record<string, unknown> | null>) : []);
  if (p.nodeId !== undefined) {
    const i = list('nodes').findIndex((n) => n?.id === p.nodeId);
    if (i < 0) return null;
    return path[1] === 'nodes' ? ['metadata', 'nodes', String(i), ...path.slice(3)] : ['metadata', 'nodes', String(i), 'id'];
  }
  if (p.connection) {
    const { fromId, toId, type } = p.connection;
    const i = list('connections').findIndex((c) => c?.fromId === fromId && c?.toId === toId && c?.type === type);
    return i < 0 ? null : ['metadata', 'connections', String(i)];
  }
  return path;
}

/**
 * Each problem of the DSL text at its place: a node's or connection's by where that element is
 * now (its id, its ends), else by the path it names, else at the start. One about an element
 * since deleted is left out. Text that does not parse: its syntax error alone (nothing else can
 * be placed).
 */
export function placeProblems(text: string, problems: readonly PlacedProblem[]): CodeProblem[] {
  const syntax = jsonSyntaxProblem(text);
  if (syntax) return [syntax];
  let root: Spot;
  try {
    root = scan(text);
  } catch {
    return [];
  }
  const dsl = JSON.parse(text) as { metadata?: { nodes?: unknown; connections?: unknown } };
  return problems.flatMap((p) => {
    const path = currentPath(p, dsl);
    if (!path) return [];
    const spot = path.length ? deepest(root, path) : undefined;
    const from = spot ? (spot.keyFrom ?? spot.from) : 0;
    // One line underlined: a whole node would be a block of red.
    const eol = text.indexOf('\n', from);
    const to = spot ? Math.min(spot.to, eol < 0 ? text.length : eol) : Math.min(text.length, 1);
    return [{ from, to: Math.max(from + 1, to), severity: p.severity, message: withoutPath(p.text) }];
  });
}
