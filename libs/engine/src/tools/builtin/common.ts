import { isUtf8 } from 'node:buffer';
import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { isAppError } from '@agentry/errors';
import { inWorkspaceTransaction, toBuffer, type Db, type WorkspaceEntry } from '@agentry/db';
import { normaliseWorkspacePath } from '@agentry/definitions';
import { ToolError, type ToolContext, type ToolDefinition } from '../types.js';

/** A built-in tool: a ToolDefinition plus the JSON schema of its per-agent `config`. */
export interface BuiltinTool extends ToolDefinition {
  /** Schema of `tools[].config` for this tool in an `ai/agent` node (all fields optional). */
  configSchema: TSchema;
}

/** The largest workspace file the tools write unless `config.maxFileSize` says otherwise. */
const DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024;

/**
 * The largest file a tool may write: its `maxFileSize`, else the deployment's
 * `workspace.max_file_bytes` (`ctx.maxFileBytes`), never more than the latter, so that an agent's
 * own configuration cannot write files the API would refuse.
 */
export function fileSizeLimit(configured: number | undefined, ctx: Pick<ToolContext, 'maxFileBytes'>): number {
  const ceiling = ctx.maxFileBytes ?? Number.POSITIVE_INFINITY;
  return Math.min(configured ?? ctx.maxFileBytes ?? DEFAULT_MAX_FILE_SIZE, ceiling);
}

/** One line per problem, naming the argument (or config field) and saying what is expected. */
function describeErrors(schema: TSchema, value: unknown, root: string): string {
  const out: string[] = [];
  const where = (pointer: string) => {
    const path = pointer
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), root);
    return path;
  };
  for (const e of Value.Errors(schema, value)) {
    const params = e.params as { requiredProperties?: string[]; additionalProperties?: string[]; allowedValues?: unknown[] };
    const at = where(e.instancePath);
    if (e.keyword === 'boolean') continue;
    if (e.keyword === 'required') {
      const missing = (params.requiredProperties ?? []).map((p) => (at ? `${at}.${p}` : p));
      out.push(`missing required ${root ? 'field' : 'argument'}${missing.length === 1 ? '' : 's'} ${missing.join(', ')}`);
    } else if (e.keyword === 'additionalProperties') {
      const known = Object.keys((schema as { properties?: object }).properties ?? {});
      for (const extra of params.additionalProperties ?? []) {
        out.push(`${at ? `${at}.` : ''}${extra}: unknown ${root ? 'field' : 'argument'}${at === root && known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`);
      }
    } else if (e.keyword === 'enum') {
      out.push(`${at || '(root)'}: must be one of ${(params.allowedValues ?? []).map((v) => JSON.stringify(v)).join(', ')}`);
    } else {
      out.push(`${at || '(root)'}: ${e.message}`);
    }
  }
  return [...new Set(out)].join('; ');
}

/** The arguments checked against the tool's schema; a ToolError naming each bad argument otherwise. */
export function checkArgs<T>(tool: string, schema: TSchema, args: unknown): T {
  const value = args ?? {};
  if (Value.Check(schema, value)) return value as T;
  throw new ToolError(`${tool}: invalid arguments: ${describeErrors(schema, value, '')}`);
}

/** The tool's `config` checked against its schema (an operator's mistake, reported as such). */
export function checkConfig<T>(tool: string, schema: TSchema, config: unknown): T {
  const value = config ?? {};
  if (Value.Check(schema, value)) return value as T;
  throw new ToolError(`${tool}: the agent's configuration of this tool is invalid: ${describeErrors(schema, value, 'config')}`);
}

/**
 * A path from the model, normalised and confined to the workspace: absolute paths, `~`, `..`
 * past the root, NUL bytes and backslashes are refused with a ToolError naming the argument.
 */
export function toolPath(raw: string | undefined, argument = 'path'): string {
  const input = raw ?? '';
  if (input.startsWith('/') || input.startsWith('~') || /^[A-Za-z]:/.test(input)) {
    throw new ToolError(`${argument} "${input}" is absolute; paths are relative to the workspace root (e.g. "notes/todo.md")`);
  }
  try {
    return normaliseWorkspacePath(input);
  } catch (err) {
    if (isAppError(err)) throw new ToolError(`${argument}: ${err.message.replace(/^Invalid input: /, '')}`);
    throw err;
  }
}

/** A path that must name an entry (not the root). */
export function entryPath(raw: string | undefined, argument = 'path'): string {
  const path = toolPath(raw, argument);
  if (path === '') throw new ToolError(`${argument} must name a file below the workspace root`);
  return path;
}

/** Runs a repository call; the registry's errors (409 "already exists", 404, ...) become ToolErrors. */
export async function dbCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isAppError(err) && err.status < 500) throw new ToolError(err.message);
    throw err;
  }
}

/** Binary: a NUL byte in the first 8 KiB, or not valid UTF-8. */
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, 8192).includes(0) || !isUtf8(bytes);
}

export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/** Cuts a line for display. */
export function clipLine(line: string, max = 500): string {
  return line.length > max ? `${line.slice(0, max)}… [line cut at ${max} of ${line.length} characters]` : line;
}

/** Every entry below `dir` (`''` = the whole workspace), without contents, sorted by path. */
export async function listTree(db: Db, agentId: string, dir: string): Promise<WorkspaceEntry[]> {
  let query = db.selectFrom('workspace_entries').select(['path', 'is_dir', 'size', 'mod_time']).where('agent_id', '=', agentId);
  if (dir !== '') query = query.where((eb) => eb.fn<boolean>('starts_with', ['path', eb.val(`${dir}/`)]));
  const rows = await query.execute();
  return rows
    .map((r) => ({ path: r.path, name: r.path.slice(r.path.lastIndexOf('/') + 1), isDir: r.is_dir, size: Number(r.size), modTime: r.mod_time }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The contents of the given files, fetched in batches; files that vanished are left out. */
export async function readContents(db: Db, agentId: string, paths: string[], batch = 50): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (let i = 0; i < paths.length; i += batch) {
    const slice = paths.slice(i, i + batch);
    const rows = await db
      .selectFrom('workspace_entries')
      .select(['path', 'content'])
      .where('agent_id', '=', agentId)
      .where('is_dir', '=', false)
      .where('path', 'in', slice)
      .execute();
    for (const r of rows) out.set(r.path, toBuffer(r.content ?? new Uint8Array()));
  }
  return out;
}

/**
 * Read-modify-write of one file in a transaction with the row locked, so two edits of the same
 * file never lose one another. `change` gets the current bytes (undefined when the file is
 * missing) and answers the new bytes, or undefined to leave the file as it is.
 */
export async function modifyFile<T>(
  db: Db,
  agentId: string,
  path: string,
  change: (current: Buffer | undefined) => Promise<{ bytes?: Buffer; result: T }>,
  write: (trx: Db, bytes: Buffer, existed: boolean) => Promise<unknown>,
): Promise<T> {
  return dbCall(() =>
    // The agent's lock before the file's, as every workspace write takes them (inWorkspaceTransaction).
    inWorkspaceTransaction(db, agentId, async (trx) => {
      const row = await trx
        .selectFrom('workspace_entries')
        .select(['is_dir', 'content'])
        .where('agent_id', '=', agentId)
        .where('path', '=', path)
        .forUpdate()
        .executeTakeFirst();
      if (row?.is_dir) throw new ToolError(`"${path}" is a directory, not a file`);
      const current = row ? toBuffer(row.content ?? new Uint8Array()) : undefined;
      const { bytes, result } = await change(current);
      if (bytes) await write(trx, bytes, row !== undefined);
      return result;
    }),
  );
}

/**
 * The write option that keeps the agent's workspace under its owner's
 * `security.quotas.workspaceBytesPerAgent` (none when the context sets no limit); a write past
 * it fails with the quota's words, which dbCall hands to the model as the tool's error.
 */
export async function workspaceQuota(ctx: Pick<ToolContext, 'workspaceByteLimit'>): Promise<{ maxTotalBytes?: number }> {
  const max = await ctx.workspaceByteLimit?.();
  return max === undefined ? {} : { maxTotalBytes: max };
}

/** Splits text into lines; a final newline does not start another line. */
export function splitLines(text: string): { lines: string[]; trailingNewline: boolean } {
  if (text === '') return { lines: [], trailingNewline: false };
  const trailingNewline = text.endsWith('\n');
  const lines = (trailingNewline ? text.slice(0, -1) : text).split('\n');
  return { lines, trailingNewline };
}

export function joinLines(lines: string[], trailingNewline: boolean): string {
  if (lines.length === 0) return '';
  return lines.join('\n') + (trailingNewline ? '\n' : '');
}

/** A regex from the model, compiled to check its syntax (ToolError naming the argument). */
export function compileRegex(source: string, flags: string, argument: string): RegExp {
  try {
    return new RegExp(source, flags);
  } catch (err) {
    throw new ToolError(`${argument} is not a valid regular expression: ${(err as Error).message}`);
  }
}
