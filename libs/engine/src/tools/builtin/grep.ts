import type { Static } from 'typebox';
import { getWorkspaceEntry } from '@agentry/db';
import { GlobSyntaxError, fileFilter } from '../glob-match.js';
import { RegexTimeoutError, grepInWorker, type GrepFile, type GrepFileResult } from '../regex-runner.js';
import { ToolError, type ToolContext } from '../types.js';
import { grepSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, clipLine, compileRegex, isBinary, listTree, plural, readContents, toolPath, type BuiltinTool } from './common.js';

const Parameters = grepSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = grepSpec.configSchema;
type Config = Static<typeof Config>;

const MAX_OUTPUT_CHARS = 100_000;

function filter(glob: string | undefined, argument: string): ((p: string) => boolean) | undefined {
  if (glob === undefined) return undefined;
  try {
    return fileFilter(glob);
  } catch (err) {
    if (err instanceof GlobSyntaxError) throw new ToolError(`${argument}: ${err.message}`);
    throw err;
  }
}

type Mode = NonNullable<Args['output_mode']>;
type Candidate = { path: string; size: number };

export const grepTool: BuiltinTool = {
  ...grepSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('grep', Parameters, raw);
    const cfg = checkConfig<Config>('grep', Config, ctx.config);
    const flags = args['-i'] ? 'i' : '';
    compileRegex(args.pattern, flags, 'pattern');
    const mode = args.output_mode ?? 'content';
    const limit = Math.min(args.head_limit ?? cfg.maxResults ?? 100, cfg.hardMaxLimit ?? 1000);
    const globs = { include: filter(args.include, 'include'), exclude: filter(args.exclude, 'exclude') };
    const root = toolPath(args.path);
    const notes: string[] = [];
    const picked = withinBudget(await candidatesOf(ctx, root, globs), cfg, notes);
    const { files, binaries } = await readTexts(ctx, picked);
    ctx.signal.throwIfAborted();
    const results = await search(files, { source: args.pattern, flags, mode, limit, cfg, signal: ctx.signal });
    const tail = notes.length > 0 ? `\n[${notes.join('; ')}]` : '';
    const where = root === '' ? 'the workspace' : `"${root}"`;
    if (results.length === 0) return `No match for /${args.pattern}/${flags} in ${where} (${plural(files.length, 'file')} searched${binaries > 0 ? `, ${binaries} binary skipped` : ''}).${tail}`;
    const { out, truncated } = mode === 'content' ? contentLines(results, files, args, limit) : summaryLines(results, mode, limit);
    const more = truncated ? `\n[... more results not shown (limit ${limit}); narrow the search or raise head_limit]` : '';
    return `${out.join('\n')}${more}${tail}`;
  },
};

/** The files under `root` (or `root` itself) that `include` and `exclude` let through, globs relative to the searched directory. */
async function candidatesOf(ctx: ToolContext, root: string, { include, exclude }: Record<'include' | 'exclude', ((p: string) => boolean) | undefined>): Promise<Candidate[]> {
  let candidates: Candidate[];
  let base = root;
  if (root === '') {
    candidates = (await listTree(ctx.db, ctx.agentId, '')).filter((e) => !e.isDir);
  } else {
    const entry = await getWorkspaceEntry(ctx.db, ctx.agentId, root);
    if (!entry) throw new ToolError(`path "${root}" not found`);
    if (entry.isDir) candidates = (await listTree(ctx.db, ctx.agentId, root)).filter((e) => !e.isDir);
    else {
      candidates = [entry];
      base = root.includes('/') ? root.slice(0, root.lastIndexOf('/')) : '';
    }
  }
  const rel = (p: string) => (base === '' ? p : p.slice(base.length + 1));
  return candidates.filter((f) => (!include || include(rel(f.path))) && !(exclude && exclude(rel(f.path))));
}

/** The paths searched within the size, file and scan limits; what was left out goes to `notes`. */
function withinBudget(all: Candidate[], cfg: Config, notes: string[]): string[] {
  const maxFileBytes = cfg.maxFileBytes ?? 2 * 1024 * 1024;
  const large = all.filter((f) => f.size > maxFileBytes);
  if (large.length > 0) notes.push(`${plural(large.length, 'file')} over ${maxFileBytes} bytes skipped (e.g. ${large[0]?.path})`);
  let candidates = all.filter((f) => f.size <= maxFileBytes);
  const maxFiles = cfg.maxFiles ?? 5000;
  if (candidates.length > maxFiles) {
    notes.push(`only the first ${maxFiles} of ${candidates.length} files were searched; narrow with path or include`);
    candidates = candidates.slice(0, maxFiles);
  }
  const maxScan = cfg.maxScanBytes ?? 32 * 1024 * 1024;
  let scanned = 0;
  const picked: string[] = [];
  for (const f of candidates) {
    if (scanned + f.size > maxScan) {
      notes.push(`stopped after ${scanned} bytes (limit ${maxScan}); ${candidates.length - picked.length} files not searched`);
      break;
    }
    scanned += f.size;
    picked.push(f.path);
  }
  return picked;
}

/** The texts of the picked files; binary ones are counted, not searched. */
async function readTexts(ctx: ToolContext, picked: string[]): Promise<{ files: GrepFile[]; binaries: number }> {
  const contents = await readContents(ctx.db, ctx.agentId, picked);
  const files: GrepFile[] = [];
  let binaries = 0;
  for (const path of picked) {
    const bytes = contents.get(path);
    if (!bytes) continue;
    if (isBinary(bytes)) binaries++;
    else files.push({ path, text: bytes.toString('utf8') });
  }
  return { files, binaries };
}

/** Runs the pattern in the regex worker (its deadline guards against catastrophic patterns). */
async function search(
  files: GrepFile[],
  opts: { source: string; flags: string; mode: Mode; limit: number; cfg: Config; signal: AbortSignal },
): Promise<GrepFileResult[]> {
  try {
    return await grepInWorker(files, {
      source: opts.source,
      flags: opts.flags,
      // Only as many lines as the mode can show: one per file for paths, all for counts.
      maxLinesPerFile: opts.mode === 'files_with_matches' ? 1 : opts.mode === 'count' ? Number.MAX_SAFE_INTEGER : opts.limit + 1,
      timeoutMs: opts.cfg.regexTimeoutMs ?? 5000,
      signal: opts.signal,
    });
  } catch (err) {
    if (err instanceof RegexTimeoutError) throw new ToolError(`pattern: ${err.message}`);
    throw err;
  }
}

/** `files_with_matches` and `count`: one line per file. */
function summaryLines(results: GrepFileResult[], mode: Exclude<Mode, 'content'>, limit: number): { out: string[]; truncated: boolean } {
  const out = results.slice(0, limit).map((r) => (mode === 'count' ? `${r.path}: ${r.lines.length}` : r.path));
  return { out, truncated: results.length > limit };
}

/** `content`: matching lines with their context, groups apart separated by `--`, within the limit and output size. */
function contentLines(results: GrepFileResult[], files: GrepFile[], args: Args, limit: number): { out: string[]; truncated: boolean } {
  const before = args['-B'] ?? args['-C'] ?? 0;
  const after = args['-A'] ?? args['-C'] ?? 0;
  const texts = new Map(files.map((f) => [f.path, f.text]));
  const out: string[] = [];
  let truncated = false;
  let shown = 0;
  let chars = 0;
  outer: for (const r of results) {
    const lines = (texts.get(r.path) ?? '').split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    const hits = new Set(r.lines);
    let lastPrinted = -1;
    for (const hit of r.lines) {
      if (hit <= lastPrinted) continue; // shown already, as context of an earlier match
      if (shown >= limit || chars > MAX_OUTPUT_CHARS) {
        truncated = true;
        break outer;
      }
      const from = Math.max(0, hit - before, lastPrinted + 1);
      const to = Math.min(lines.length - 1, hit + after);
      if ((before > 0 || after > 0) && lastPrinted >= 0 && from > lastPrinted + 1) out.push('--');
      for (let i = from; i <= to; i++) {
        const sep = hits.has(i) ? ':' : '-';
        const line = `${r.path}${sep}${i + 1}${sep}${clipLine((lines[i] ?? '').replace(/\r$/, ''), 500)}`;
        out.push(line);
        chars += line.length + 1;
        if (hits.has(i)) shown++;
      }
      lastPrinted = to;
    }
    if (before > 0 || after > 0) out.push('--');
  }
  if (out[out.length - 1] === '--') out.pop();
  return { out, truncated };
}
