import type { Static } from 'typebox';
import { writeWorkspaceFile } from '@agentry/db';
import { RegexTimeoutError, replaceInWorker } from '../regex-runner.js';
import { ToolError, type ToolContext } from '../types.js';
import { editSpec } from '@agentry/definitions';
import {
  fileSizeLimit,
  checkArgs,
  checkConfig,
  compileRegex,
  entryPath,
  isBinary,
  joinLines,
  modifyFile,
  plural,
  splitLines,
  workspaceQuota,
  type BuiltinTool,
} from './common.js';

const Parameters = editSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = editSpec.configSchema;
type Config = Static<typeof Config>;

function newLines(content: string, crlf: boolean): string[] {
  const text = content.endsWith('\n') ? content.slice(0, -1) : content;
  return text.split('\n').map((l) => (crlf && !l.endsWith('\r') ? `${l}\r` : l));
}

function checkLine(n: number, total: number, argument: string, path: string): void {
  if (n > total) throw new ToolError(`${argument} ${n} is past the end of "${path}" (${plural(total, 'line')})`);
}

async function searchReplace(text: string, args: Args, cfg: Config, path: string, ctx: ToolContext): Promise<{ text: string; summary: string }> {
  const search = args.search;
  if (search === undefined) throw new ToolError('edit: operation "search" needs the argument search (and usually replace)');
  const replace = args.replace ?? '';
  const global = args.global ?? false;
  if (args.use_regex) {
    compileRegex(search, '', 'search');
    let result: { text: string; count: number; matches: number };
    try {
      result = await replaceInWorker(text, { source: search, flags: 'm', replacement: replace, global, timeoutMs: cfg.regexTimeoutMs ?? 2000, signal: ctx.signal });
    } catch (err) {
      if (err instanceof RegexTimeoutError) throw new ToolError(`search: ${err.message}`);
      throw err;
    }
    if (result.count === 0) throw new ToolError(`search: the regular expression /${search}/ matches nothing in "${path}"`);
    if (!global && result.matches > 1) {
      throw new ToolError(`search: /${search}/ matches ${result.matches} times in "${path}"; make it match once, or set global: true to replace all`);
    }
    return { text: result.text, summary: `replaced ${plural(result.count, 'match', 'matches')}` };
  }
  const count = text.split(search).length - 1;
  if (count === 0) {
    throw new ToolError(`search: the text was not found in "${path}" (it must match exactly, whitespace and indentation included; read the file first)`);
  }
  if (!global && count > 1) {
    throw new ToolError(`search: the text occurs ${count} times in "${path}"; include more surrounding text so it occurs once, or set global: true to replace all`);
  }
  const next = global ? text.split(search).join(replace) : text.replace(search, () => replace);
  return { text: next, summary: `replaced ${plural(count, 'occurrence')}` };
}

function lineEdit(text: string, args: Args, path: string): { text: string; summary: string } {
  const { lines, trailingNewline } = splitLines(text);
  const crlf = text.includes('\r\n');
  const op = args.operation;
  if (op === 'line') {
    if (args.line_number === undefined || args.new_content === undefined) throw new ToolError('edit: operation "line" needs line_number and new_content');
    checkLine(args.line_number, lines.length, 'line_number', path);
    const added = newLines(args.new_content, crlf);
    lines.splice(args.line_number - 1, 1, ...added);
    return { text: joinLines(lines, trailingNewline), summary: `replaced line ${args.line_number} with ${plural(added.length, 'line')}` };
  }
  if (op === 'insert') {
    if (args.new_content === undefined) throw new ToolError('edit: operation "insert" needs new_content');
    if ((args.insert_after === undefined) === (args.insert_before === undefined)) {
      throw new ToolError('edit: operation "insert" needs exactly one of insert_after and insert_before');
    }
    const at = args.insert_after ?? (args.insert_before as number) - 1;
    if (args.insert_after !== undefined) checkLine(args.insert_after, lines.length, 'insert_after', path);
    else checkLine(args.insert_before as number, Math.max(lines.length, 1), 'insert_before', path);
    const added = newLines(args.new_content, crlf);
    lines.splice(at, 0, ...added);
    return { text: joinLines(lines, trailingNewline || text === ''), summary: `inserted ${plural(added.length, 'line')} after line ${at}` };
  }
  // delete
  if (!args.delete_lines) throw new ToolError('edit: operation "delete" needs delete_lines');
  const doomed = [...new Set(args.delete_lines)].sort((a, b) => b - a);
  for (const n of doomed) checkLine(n, lines.length, 'delete_lines', path);
  for (const n of doomed) lines.splice(n - 1, 1);
  return { text: joinLines(lines, trailingNewline), summary: `deleted ${plural(doomed.length, 'line')}` };
}

export const editTool: BuiltinTool = {
  ...editSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('edit', Parameters, raw);
    const cfg = checkConfig<Config>('edit', Config, ctx.config);
    const path = entryPath(args.path);
    const operation = args.operation ?? 'search';
    const max = fileSizeLimit(cfg.maxFileSize, ctx);
    return modifyFile(
      ctx.db,
      ctx.agentId,
      path,
      async (current) => {
        if (!current) throw new ToolError(`file "${path}" not found (create it with the write tool)`);
        if (isBinary(current)) throw new ToolError(`"${path}" is a binary file; the edit tool changes text files only`);
        const text = current.toString('utf8');
        const { text: next, summary } =
          operation === 'search' ? await searchReplace(text, { ...args, operation }, cfg, path, ctx) : lineEdit(text, { ...args, operation }, path);
        const bytes = Buffer.from(next, 'utf8');
        if (bytes.byteLength > max) throw new ToolError(`the file would be ${plural(bytes.byteLength, 'byte')}; workspace files are limited to ${plural(max, 'byte')}`);
        if (next === text) return { result: `Edited "${path}": ${summary}; the content is unchanged.` };
        const lineCount = splitLines(next).lines.length;
        return { bytes, result: `Edited "${path}": ${summary} (the file now has ${plural(lineCount, 'line')}).` };
      },
      async (trx, bytes) => writeWorkspaceFile(trx, ctx.agentId, path, bytes, 'overwrite', await workspaceQuota(ctx)),
    );
  },
};
