import type { Static } from 'typebox';
import { getWorkspaceEntry, listWorkspaceDir, readWorkspaceFile } from '@agentry/db';
import { GlobSyntaxError, fileFilter } from '../glob-match.js';
import { ToolError, type ToolContext } from '../types.js';
import { readSpec } from '@agentry/definitions';
import { checkArgs, checkConfig, clipLine, entryPath, isBinary, listTree, plural, readContents, toolPath, type BuiltinTool } from './common.js';

const Parameters = readSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = readSpec.configSchema;
type Config = Static<typeof Config>;

async function readFile(args: Args, cfg: Config, ctx: ToolContext): Promise<string> {
  if (args.path === undefined) throw new ToolError('read: missing required argument path (the file to read)');
  const path = entryPath(args.path);
  const found = await readWorkspaceFile(ctx.db, ctx.agentId, path);
  if (!found) throw new ToolError(`file "${path}" not found (use operation "list" or the glob tool to see what exists)`);
  if (!found.content) throw new ToolError(`"${path}" is a directory; use operation "list" to see its entries`);
  if (isBinary(found.content)) return `"${path}" is a binary file (${plural(found.content.byteLength, 'byte')}); its content is not shown.`;
  if (found.content.byteLength === 0) return `"${path}" is empty.`;

  const maxLines = cfg.maxReadLines ?? 1000;
  const maxChars = cfg.maxReadChars ?? 100_000;
  const text = found.content.toString('utf8');
  const lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  const total = lines.length;
  const from = args.line_from ?? 1;
  if (from > total) throw new ToolError(`line_from ${from} is past the end of "${path}" (${plural(total, 'line')})`);
  if (args.line_to !== undefined && args.line_to < from) throw new ToolError(`line_to (${args.line_to}) is before line_from (${from})`);
  const wantedTo = Math.min(args.line_to ?? total, total);
  const to = Math.min(wantedTo, from + maxLines - 1);

  const width = String(to).length;
  const out: string[] = [];
  let chars = 0;
  let last = from - 1;
  for (let n = from; n <= to; n++) {
    const line = `${String(n).padStart(width)}\t${clipLine((lines[n - 1] ?? '').replace(/\r$/, ''), 2000)}`;
    if (chars + line.length + 1 > maxChars && out.length > 0) break;
    out.push(line);
    chars += line.length + 1;
    last = n;
  }
  const header = `${path} (lines ${from}-${last} of ${total})`;
  let footer = '';
  if (last < wantedTo) {
    const why = last < to ? `${maxChars} characters` : `${maxLines} lines`;
    footer = `\n[... truncated at ${why}: ${wantedTo - last} more lines; continue with line_from=${last + 1}]`;
  } else if (last < total && args.line_to === undefined) {
    footer = `\n[... ${total - last} more lines; continue with line_from=${last + 1}]`;
  }
  return `${header}\n${out.join('\n')}${footer}`;
}

async function listDir(args: Args, cfg: Config, ctx: ToolContext): Promise<string> {
  const dir = toolPath(args.path);
  if (dir !== '') {
    const entry = await getWorkspaceEntry(ctx.db, ctx.agentId, dir);
    if (!entry) throw new ToolError(`directory "${dir}" not found`);
    if (!entry.isDir) throw new ToolError(`"${dir}" is a file, not a directory; read it with operation "file"`);
  }
  const entries = await listWorkspaceDir(ctx.db, ctx.agentId, dir);
  const label = dir === '' ? 'the workspace root' : `"${dir}"`;
  if (entries.length === 0) return `${label} is empty.`;
  const max = cfg.maxListEntries ?? 500;
  const shown = entries.slice(0, max).map((e) => (e.isDir ? `${e.name}/` : `${e.name} (${plural(e.size, 'byte')}, modified ${e.modTime.toISOString()})`));
  const more = entries.length > max ? `\n[... ${entries.length - max} more entries not shown]` : '';
  return `Entries of ${label} (directories end with "/"):\n${shown.join('\n')}${more}`;
}

async function search(args: Args, cfg: Config, ctx: ToolContext): Promise<string> {
  if (args.query === undefined) throw new ToolError('read: operation "search" needs the argument query');
  const dir = toolPath(args.path);
  const pattern = args.pattern ?? '*.md';
  let matches: (p: string) => boolean;
  try {
    matches = fileFilter(pattern);
  } catch (err) {
    if (err instanceof GlobSyntaxError) throw new ToolError(`pattern: ${err.message}`);
    throw err;
  }
  const prefix = dir === '' ? '' : `${dir}/`;
  const files = (await listTree(ctx.db, ctx.agentId, dir)).filter((e) => !e.isDir && e.size <= 4 * 1024 * 1024 && matches(e.path.slice(prefix.length)));
  const max = cfg.maxSearchResults ?? 30;
  const needle = args.query.toLowerCase();
  const hits: string[] = [];
  let more = false;
  for (let i = 0; i < files.length && !more; i += 50) {
    ctx.signal.throwIfAborted();
    const batch = files.slice(i, i + 50).map((f) => f.path);
    const contents = await readContents(ctx.db, ctx.agentId, batch);
    for (const path of batch) {
      const bytes = contents.get(path);
      if (!bytes || isBinary(bytes)) continue;
      const lines = bytes.toString('utf8').split('\n');
      for (let n = 0; n < lines.length; n++) {
        const line = (lines[n] ?? '').replace(/\r$/, '');
        if (!line.toLowerCase().includes(needle)) continue;
        if (hits.length >= max) {
          more = true;
          break;
        }
        hits.push(`${path}:${n + 1}: ${clipLine(line.trim(), 300)}`);
      }
      if (more) break;
    }
  }
  const where = `${files.length === 1 ? '1 file' : `${files.length} files`} matching "${pattern}"${dir ? ` under "${dir}"` : ''}`;
  if (hits.length === 0) return `No line contains "${args.query}" in ${where}.`;
  return `${plural(hits.length, 'match', 'matches')} for "${args.query}" in ${where}:\n${hits.join('\n')}${more ? `\n[... more matches not shown (limit ${max}); narrow the search]` : ''}`;
}

export const readTool: BuiltinTool = {
  ...readSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('read', Parameters, raw);
    const cfg = checkConfig<Config>('read', Config, ctx.config);
    switch (args.operation ?? 'file') {
      case 'list':
        return listDir(args, cfg, ctx);
      case 'search':
        return search(args, cfg, ctx);
      default:
        return readFile(args, cfg, ctx);
    }
  },
};
