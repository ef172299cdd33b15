import { isUtf8 } from 'node:buffer';
/*
 * GET .../workspace/download has no response schema: it answers the file's raw bytes, not JSON.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import Type, { type Static } from 'typebox';
import { Errors } from '@agentry/errors';
import { Id, baseName, normaliseWorkspacePath, parentPath } from '@agentry/definitions';
import {
  deleteWorkspaceTree,
  getWorkspaceEntry,
  listWorkspaceDir,
  makeWorkspaceDir,
  moveWorkspaceEntry,
  readWorkspaceFile,
  writeWorkspaceFile,
  type WorkspaceEntry,
} from '@agentry/db';
import { SuccessBody, WorkspaceEntryList, WorkspaceFile, WorkspaceWritten, type WorkspaceEntry as WorkspaceListed } from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import { iso, requireAgent, typed } from './common.js';
import type { Principal } from '../auth/credentials.js';
import { workspaceByteLimit } from '../auth/quotas.js';

/** A body field the route does not name is a 400 naming it, not stored and ignored. */
const Closed = { additionalProperties: false } as const;
const Params = Type.Object({ agentId: Id });
const PathQuery = Type.Object({ path: Type.Optional(Type.String({ maxLength: 4096 })) });
/** `utf8` (default) or `base64`, for binary files sent as JSON. */
const Encoding = Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')]));
const FileBody = { content: Type.String(), encoding: Encoding };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The spec's entry: `name`, `isDir`, and for files `size` and `modTime` (ISO 8601 UTC). */
function listed(e: WorkspaceEntry): WorkspaceListed {
  return e.isDir ? { name: e.name, isDir: true } : { name: e.name, isDir: false, size: e.size, modTime: iso(e.modTime) };
}

/** A single entry in a write's answer: the listed fields plus its normalised `path`. */
function single(e: WorkspaceEntry): WorkspaceWritten {
  return { path: e.path, ...listed(e) };
}

function decode(content: string, encoding: 'utf8' | 'base64' | undefined): Buffer {
  if (encoding !== 'base64') return Buffer.from(content, 'utf8');
  const compact = content.replace(/\s+/g, '');
  if (compact.length % 4 === 1 || !BASE64.test(compact)) throw new Errors.VALIDATION('content is not valid base64');
  return Buffer.from(compact, 'base64');
}

const CONTENT_TYPES: Record<string, string> = {
  md: 'text/markdown; charset=utf-8',
  markdown: 'text/markdown; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  log: 'text/plain; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  ts: 'text/plain; charset=utf-8',
  py: 'text/plain; charset=utf-8',
  sh: 'text/plain; charset=utf-8',
  json: 'application/json',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  xml: 'application/xml',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  ico: 'image/x-icon',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  mp4: 'video/mp4',
  wasm: 'application/wasm',
};

/** By extension; unknown ones are `application/octet-stream`. */
export function guessContentType(name: string): string {
  const dot = name.lastIndexOf('.');
  return (dot > 0 && CONTENT_TYPES[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
}

/** `attachment` with an ASCII fallback name and the exact one in RFC 5987 form. */
function contentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

type Db = GatewayDeps['db']['db'];
type Params = Static<typeof Params>;
type PathQuery = Static<typeof PathQuery>;
type FileBody = { content: string; encoding?: 'utf8' | 'base64' };
/**
 * What a handler reads of its request. Narrow, so handlers can be named functions apart from the
 * registration; registering one still checks it against the route's schemas (type provider).
 */
interface Req<Q = unknown, B = unknown> {
  params: Params;
  query: Q;
  body: B;
  principal: Principal;
}
/** The reply, only to set a create's 201; the handler returns the body, serialized by the route's schema. */
interface Reply {
  code(status: 201): unknown;
}

function checkSize(deps: GatewayDeps, bytes: Buffer): void {
  const max = deps.config.current.workspace.max_file_bytes;
  if (bytes.byteLength > max) {
    throw new Errors.PAYLOAD_TOO_LARGE(`the file is ${bytes.byteLength} bytes; workspace files are limited to ${max} bytes`);
  }
}

/** A normalised path that is not the root. */
function entryPath(raw: string | undefined, what: string): string {
  const path = normaliseWorkspacePath(raw);
  if (path === '') throw new Errors.VALIDATION(`${what} needs a path below the workspace root`);
  return path;
}

/** The file's bytes, or 404 (no such file) or 400 (a directory). */
async function fileBytes(db: Db, agentId: string, path: string): Promise<Buffer> {
  const file = await readWorkspaceFile(db, agentId, path);
  if (!file) throw new Errors.NOT_FOUND(`workspace file "${path}"`);
  if (!file.content) throw new Errors.VALIDATION(`"${path}" is a directory`);
  return file.content;
}

function listEntries(deps: GatewayDeps) {
  return async (req: Req<PathQuery>): Promise<WorkspaceEntryList> => {
    const db = deps.db.db;
    const { agentId } = req.params;
    const dir = normaliseWorkspacePath(req.query.path);
    await requireAgent(db, agentId);
    if (dir !== '') {
      const entry = await getWorkspaceEntry(db, agentId, dir);
      if (!entry) throw new Errors.NOT_FOUND(`workspace path "${dir}"`);
      if (!entry.isDir) throw new Errors.VALIDATION(`"${dir}" is a file, not a directory`);
    }
    return (await listWorkspaceDir(db, agentId, dir)).map(listed);
  };
}

function readFile(deps: GatewayDeps) {
  return async (req: Req<PathQuery>): Promise<WorkspaceFile> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'reading a file');
    await requireAgent(deps.db.db, agentId);
    const content = await fileBytes(deps.db.db, agentId, path);
    // Text as it is; bytes that are not UTF-8 as base64, flagged, so nothing is mangled.
    return isUtf8(content) ? { content: content.toString('utf8') } : { content: content.toString('base64'), encoding: 'base64' };
  };
}

/** A plain user's writes keep the agent's workspace under security.quotas.workspaceBytesPerAgent; an admin's are not held. */
function quotaOf(deps: GatewayDeps, req: { principal: Principal }): { maxTotalBytes?: number } {
  const max = workspaceByteLimit(deps.config.current.security.quotas, req.principal);
  return max === undefined ? {} : { maxTotalBytes: max };
}

function overwriteFile(deps: GatewayDeps) {
  return async (req: Req<PathQuery, FileBody>): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'writing a file');
    const bytes = decode(req.body.content, req.body.encoding);
    checkSize(deps, bytes);
    await requireAgent(deps.db.db, agentId);
    return single((await writeWorkspaceFile(deps.db.db, agentId, path, bytes, 'overwrite', quotaOf(deps, req))).entry);
  };
}

function createFile(deps: GatewayDeps) {
  return async (req: Req<unknown, FileBody & { path: string }>, reply: Reply): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const path = entryPath(req.body.path, 'creating a file');
    const bytes = decode(req.body.content, req.body.encoding);
    checkSize(deps, bytes);
    await requireAgent(deps.db.db, agentId);
    const { entry } = await writeWorkspaceFile(deps.db.db, agentId, path, bytes, 'create', quotaOf(deps, req));
    reply.code(201);
    return single(entry);
  };
}

function createDir(deps: GatewayDeps) {
  return async (req: Req<unknown, { path: string }>, reply: Reply): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const path = entryPath(req.body.path, 'creating a directory');
    await requireAgent(deps.db.db, agentId);
    const entry = await makeWorkspaceDir(deps.db.db, agentId, path);
    reply.code(201);
    return single(entry);
  };
}

function deleteEntry(deps: GatewayDeps) {
  return async (req: Req<PathQuery>): Promise<SuccessBody> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'deleting');
    await requireAgent(deps.db.db, agentId);
    if ((await deleteWorkspaceTree(deps.db.db, agentId, path)) === 0) throw new Errors.NOT_FOUND(`workspace path "${path}"`);
    return { success: true };
  };
}

function renameEntry(deps: GatewayDeps) {
  return async (req: Req<PathQuery, { newName: string }>): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const from = entryPath(req.query.path, 'renaming');
    const { newName } = req.body;
    // A plain name renames in place; a name with a slash is a path from the root (a move).
    if (newName === '.' || newName === '..') throw new Errors.VALIDATION('newName must be a file or directory name');
    const to = entryPath(newName.includes('/') ? newName : `${parentPath(from)}/${newName}`, 'renaming');
    await requireAgent(deps.db.db, agentId);
    return single(await moveWorkspaceEntry(deps.db.db, agentId, from, to));
  };
}

function downloadFile(deps: GatewayDeps) {
  return async (req: Req<PathQuery>, reply: FastifyReply): Promise<FastifyReply> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'downloading');
    await requireAgent(deps.db.db, agentId);
    const content = await fileBytes(deps.db.db, agentId, path);
    const name = baseName(path);
    return reply
      .header('content-type', guessContentType(name))
      .header('content-disposition', contentDisposition(name))
      .header('content-length', content.byteLength)
      .send(content);
  };
}

/**
 * The agent's workspace: a virtual file tree in Postgres. Paths are normalised and confined to
 * the workspace (400 otherwise); writes create the directories above them; files are limited
 * to `workspace.max_file_bytes` (413 above) and kept byte-exact.
 */
export function workspaceRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const config = { access: 'owner', owns: 'agent' } as const;
  const Path = Type.String({ minLength: 1, maxLength: 4096 });
  const written = { 200: WorkspaceWritten };
  const created = { 201: WorkspaceWritten };

  api.get('/agents/:agentId/workspace/entries', { config, schema: { params: Params, querystring: PathQuery, response: { 200: WorkspaceEntryList } } }, listEntries(deps));
  api.get('/agents/:agentId/workspace/file', { config, schema: { params: Params, querystring: PathQuery, response: { 200: WorkspaceFile } } }, readFile(deps));
  api.put('/agents/:agentId/workspace/file', { config, schema: { params: Params, querystring: PathQuery, body: Type.Object(FileBody, Closed), response: written } }, overwriteFile(deps));
  api.post('/agents/:agentId/workspace/files', { config, schema: { params: Params, body: Type.Object({ path: Path, ...FileBody }, Closed), response: created } }, createFile(deps));
  api.post('/agents/:agentId/workspace/dirs', { config, schema: { params: Params, body: Type.Object({ path: Path }, Closed), response: created } }, createDir(deps));
  api.delete('/agents/:agentId/workspace/entry', { config, schema: { params: Params, querystring: PathQuery, response: { 200: SuccessBody } } }, deleteEntry(deps));
  api.patch('/agents/:agentId/workspace/rename', { config, schema: { params: Params, querystring: PathQuery, body: Type.Object({ newName: Path }, Closed), response: written } }, renameEntry(deps));
  api.get('/agents/:agentId/workspace/download', { config, schema: { params: Params, querystring: PathQuery } }, downloadFile(deps));
}
