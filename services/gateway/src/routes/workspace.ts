import { isUtf8 } from 'node:buffer';
/*
 * GET .../workspace/download has no response schema: it answers the file's raw bytes, not JSON.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Errors } from '@agentry/errors';
import { baseName, normaliseWorkspacePath, parentPath } from '@agentry/definitions';
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
import {
  AgentParams,
  SuccessBody,
  WorkspaceDirCreateBody,
  WorkspaceEntryList,
  WorkspaceFile,
  WorkspaceFileBody,
  WorkspaceFileCreateBody,
  WorkspacePathQuery,
  WorkspaceRenameBody,
  WorkspaceWritten,
  type WorkspaceEntry as WorkspaceListed,
} from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import { iso, requireAgent, typed, type TypedReply, type TypedRequest } from './common.js';
import type { Principal } from '../auth/credentials.js';
import { workspaceByteLimit } from '../auth/quotas.js';

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
const written = { 200: WorkspaceWritten };
const created = { 201: WorkspaceWritten };
const ListEntries = { params: AgentParams, querystring: WorkspacePathQuery, response: { 200: WorkspaceEntryList } };
const ReadFile = { params: AgentParams, querystring: WorkspacePathQuery, response: { 200: WorkspaceFile } };
const OverwriteFile = { params: AgentParams, querystring: WorkspacePathQuery, body: WorkspaceFileBody, response: written };
const CreateFile = { params: AgentParams, body: WorkspaceFileCreateBody, response: created };
const CreateDir = { params: AgentParams, body: WorkspaceDirCreateBody, response: created };
const DeleteEntry = { params: AgentParams, querystring: WorkspacePathQuery, response: { 200: SuccessBody } };
const RenameEntry = { params: AgentParams, querystring: WorkspacePathQuery, body: WorkspaceRenameBody, response: written };
const DownloadFile = { params: AgentParams, querystring: WorkspacePathQuery };

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
  return async (req: TypedRequest<typeof ListEntries>): Promise<WorkspaceEntryList> => {
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
  return async (req: TypedRequest<typeof ReadFile>): Promise<WorkspaceFile> => {
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
  return async (req: TypedRequest<typeof OverwriteFile>): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'writing a file');
    const bytes = decode(req.body.content, req.body.encoding);
    checkSize(deps, bytes);
    await requireAgent(deps.db.db, agentId);
    return single((await writeWorkspaceFile(deps.db.db, agentId, path, bytes, 'overwrite', quotaOf(deps, req))).entry);
  };
}

function createFile(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateFile>, reply: TypedReply<typeof CreateFile>): Promise<WorkspaceWritten> => {
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
  return async (req: TypedRequest<typeof CreateDir>, reply: TypedReply<typeof CreateDir>): Promise<WorkspaceWritten> => {
    const { agentId } = req.params;
    const path = entryPath(req.body.path, 'creating a directory');
    await requireAgent(deps.db.db, agentId);
    const entry = await makeWorkspaceDir(deps.db.db, agentId, path);
    reply.code(201);
    return single(entry);
  };
}

function deleteEntry(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteEntry>): Promise<SuccessBody> => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'deleting');
    await requireAgent(deps.db.db, agentId);
    if ((await deleteWorkspaceTree(deps.db.db, agentId, path)) === 0) throw new Errors.NOT_FOUND(`workspace path "${path}"`);
    return { success: true };
  };
}

function renameEntry(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof RenameEntry>): Promise<WorkspaceWritten> => {
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
  return async (req: TypedRequest<typeof DownloadFile>, reply: FastifyReply): Promise<FastifyReply> => {
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

  api.get('/agents/:agentId/workspace/entries', { config, schema: ListEntries }, listEntries(deps));
  api.get('/agents/:agentId/workspace/file', { config, schema: ReadFile }, readFile(deps));
  api.put('/agents/:agentId/workspace/file', { config, schema: OverwriteFile }, overwriteFile(deps));
  api.post('/agents/:agentId/workspace/files', { config, schema: CreateFile }, createFile(deps));
  api.post('/agents/:agentId/workspace/dirs', { config, schema: CreateDir }, createDir(deps));
  api.delete('/agents/:agentId/workspace/entry', { config, schema: DeleteEntry }, deleteEntry(deps));
  api.patch('/agents/:agentId/workspace/rename', { config, schema: RenameEntry }, renameEntry(deps));
  api.get('/agents/:agentId/workspace/download', { config, schema: DownloadFile }, downloadFile(deps));
}
