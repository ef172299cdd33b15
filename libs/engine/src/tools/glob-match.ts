/**
 * Glob patterns over workspace paths (`/`-separated, relative): `*` and `?` stay inside one
 * segment, `**` as a whole segment spans any number of segments (including none), `{a,b}` are
 * alternatives and `[abc]` / `[a-z]` / `[!abc]` classes; `\` escapes. Matching is case-sensitive,
 * as the workspace is, and names starting with `.` are matched like any other.
 *
 * Patterns come from the model, so matching never backtracks exponentially: a pattern is
 * compiled to tokens and matched by memoised search over (token, position) pairs, at most
 * tokens x path length states (a regex for `*a*a*a*b` can take seconds on one long name).
 */

export class GlobSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GlobSyntaxError';
  }
}

const MAX_PATTERN = 1024;
const MAX_ALTERNATIVES = 256;

type Token =
  | { t: 'lit'; c: string }
  | { t: 'one' }
  | { t: 'star' }
  /** `**` followed by `/`: nothing, or anything that ends with `/` (whole directories). */
  | { t: 'dirs' }
  /** `**` at the end: anything, `/` included. */
  | { t: 'all' }
  | { t: 'class'; negate: boolean; ranges: Array<[string, string]> };

/** `a{b,c{d,e}}` -> `ab`, `acd`, `ace`. */
function expandBraces(pattern: string): string[] {
  let open = -1;
  let depth = 0;
  const commas: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close > 0) i = close;
      continue;
    }
    if (c === '{') {
      if (depth === 0) open = i;
      depth++;
    } else if (c === '}' && depth > 0) {
      depth--;
      if (depth === 0) {
        const body = pattern.slice(open + 1, i);
        const parts: string[] = [];
        let from = 0;
        for (const comma of commas) {
          parts.push(body.slice(from, comma - open - 1));
          from = comma - open;
        }
        parts.push(body.slice(from));
        const before = pattern.slice(0, open);
        const after = pattern.slice(i + 1);
        const out: string[] = [];
        for (const part of parts) {
          for (const expanded of expandBraces(`${before}${part}${after}`)) {
            out.push(expanded);
            if (out.length > MAX_ALTERNATIVES) throw new GlobSyntaxError(`"${pattern}" expands to more than ${MAX_ALTERNATIVES} alternatives`);
          }
        }
        return out;
      }
    } else if (c === ',' && depth === 1) {
      commas.push(i);
    }
  }
  if (depth > 0) throw new GlobSyntaxError(`unclosed "{" in "${pattern}"`);
  return [pattern];
}

function tokenize(pattern: string): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '*') {
      let j = i + 1;
      while (pattern[j] === '*') j++;
      const wholeSegment = j - i >= 2 && (i === 0 || pattern[i - 1] === '/') && (j === pattern.length || pattern[j] === '/');
      if (wholeSegment && j === pattern.length) tokens.push({ t: 'all' });
      else if (wholeSegment) {
        tokens.push({ t: 'dirs' });
        j++; // the `/` is part of the token
      } else tokens.push({ t: 'star' });
      i = j - 1;
    } else if (c === '?') {
      tokens.push({ t: 'one' });
    } else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close < 0) throw new GlobSyntaxError(`unclosed "[" in "${pattern}"`);
      let body = pattern.slice(i + 1, close);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      const chars = [...body.replace(/\\(.)/g, '$1')];
      const ranges: Array<[string, string]> = [];
      for (let k = 0; k < chars.length; k++) {
        const from = chars[k] as string;
        if (chars[k + 1] === '-' && k + 2 < chars.length) {
          ranges.push([from, chars[k + 2] as string]);
          k += 2;
        } else ranges.push([from, from]);
      }
      tokens.push({ t: 'class', negate, ranges });
      i = close;
    } else if (c === '\\' && i + 1 < pattern.length) {
      i++;
      tokens.push({ t: 'lit', c: pattern[i] as string });
    } else {
      tokens.push({ t: 'lit', c });
    }
  }
  return tokens;
}

function matcher(tokens: Token[]): (path: string) => boolean {
  return (path) => {
    const n = path.length;
    const width = n + 1;
    // 0 unknown, 1 no, 2 yes
    const memo = new Uint8Array((tokens.length + 1) * width);
    const m = (p: number, s: number): boolean => {
      const key = p * width + s;
      const known = memo[key];
      if (known) return known === 2;
      let ok = false;
      const tok = tokens[p];
      if (!tok) ok = s === n;
      else if (tok.t === 'lit') ok = path[s] === tok.c && m(p + 1, s + 1);
      else if (tok.t === 'one') ok = s < n && path[s] !== '/' && m(p + 1, s + 1);
      else if (tok.t === 'class') {
        const ch = path[s];
        ok = ch !== undefined && ch !== '/' && tok.ranges.some(([a, b]) => ch >= a && ch <= b) !== tok.negate && m(p + 1, s + 1);
      } else if (tok.t === 'star') ok = m(p + 1, s) || (s < n && path[s] !== '/' && m(p, s + 1));
      else if (tok.t === 'all') ok = true;
      else {
        // dirs: skip, or take everything up to and including a later `/`.
        ok = m(p + 1, s);
        for (let j = s; !ok && j < n; j++) if (path[j] === '/') ok = m(p + 1, j + 1);
      }
      memo[key] = ok ? 2 : 1;
      return ok;
    };
    return m(0, 0);
  };
}

/** A matcher for the whole path against `pattern`. Throws GlobSyntaxError for a malformed one. */
export function compileGlob(pattern: string): (path: string) => boolean {
  if (pattern.length > MAX_PATTERN) throw new GlobSyntaxError(`pattern longer than ${MAX_PATTERN} characters`);
  const alternatives = expandBraces(pattern).map((p) => matcher(tokenize(p)));
  return alternatives.length === 1 ? (alternatives[0] as (path: string) => boolean) : (path) => alternatives.some((m) => m(path));
}

/**
 * A matcher for file filters in the style of ripgrep's `--glob`: a pattern without `/` matches
 * the file name at any depth (`*.md`), one with `/` matches the whole path relative to the
 * search root (`docs/**\/*.md`).
 */
export function fileFilter(pattern: string): (relativePath: string) => boolean {
  const trimmed = pattern.replace(/^\.\//, '').replace(/^\/+/, '');
  const match = compileGlob(trimmed);
  if (trimmed.includes('/')) return match;
  return (p) => match(p.slice(p.lastIndexOf('/') + 1));
}
