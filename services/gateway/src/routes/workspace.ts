import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import { Errors } from '@agentry/errors';
import { Id, baseName, normaliseWorkspacePath, parentPath } from '@agentry/engine';
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
import type { GatewayDeps } from '../deps.js';
import { iso, requireAgent, typed } from './common.js';

const Params = Type.Object({ agentId: Id });
const PathQuery = Type.Object({ path: Type.Optional(Type.String({ maxLength: 4096 })) });
/** `utf8` (default) or `base64`, for binary files sent as JSON. */
const Encoding = Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')]));
const FileBody = { content: Type.String(), encoding: Encoding };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The spec's entry: `name`, `isDir`, and for files `size` and `modTime` (ISO 8601 UTC). */
function listed(e: WorkspaceEntry) {
  return e.isDir ? { name: e.name, isDir: true } : { name: e.name, isDir: false, size: e.size, modTime: iso(e.modTime) };
}

/** A single entry in a write's answer: the listed fields plus its normalised `path`. */
function single(e: WorkspaceEntry) {
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

/**
 * The agent's workspace: a virtual file tree in Postgres. Paths are normalised and confined to
 * the workspace (400 otherwise); writes create the directories above them; files are limited
 * to `workspace.max_file_bytes` (413 above) and kept byte-exact.
 */
export function workspaceRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const db = () => deps.db.db;

  function checkSize(bytes: Buffer): void {
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

  api.get('/agents/:agentId/workspace/entries', { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery } }, async (req) => {
    const { agentId } = req.params;
    const dir = normaliseWorkspacePath(req.query.path);
    await requireAgent(db(), agentId);
    if (dir !== '') {
      const entry = await getWorkspaceEntry(db(), agentId, dir);
      if (!entry) throw new Errors.NOT_FOUND(`workspace path "${dir}"`);
      if (!entry.isDir) throw new Errors.VALIDATION(`"${dir}" is a file, not a directory`);
    }
    return (await listWorkspaceDir(db(), agentId, dir)).map(listed);
  });

  api.get('/agents/:agentId/workspace/file', { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery } }, async (req) => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'reading a file');
    await requireAgent(db(), agentId);
    const file = await readWorkspaceFile(db(), agentId, path);
    if (!file) throw new Errors.NOT_FOUND(`workspace file "${path}"`);
    if (!file.content) throw new Errors.VALIDATION(`"${path}" is a directory`);
    // Text as it is; bytes that are not UTF-8 as base64, flagged, so nothing is mangled.
    return isUtf8(file.content) ? { content: file.content.toString('utf8') } : { content: file.content.toString('base64'), encoding: 'base64' };
  });

  api.put(
    '/agents/:agentId/workspace/file',
    { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery, body: Type.Object(FileBody) } },
    async (req) => {
      const { agentId } = req.params;
      const path = entryPath(req.query.path, 'writing a file');
      const bytes = decode(req.body.content, req.body.encoding);
      checkSize(bytes);
      await requireAgent(db(), agentId);
      return single((await writeWorkspaceFile(db(), agentId, path, bytes, 'overwrite')).entry);
    },
  );

  api.post(
    '/agents/:agentId/workspace/files',
    { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, body: Type.Object({ path: Type.String({ minLength: 1, maxLength: 4096 }), ...FileBody }) } },
    async (req, reply) => {
      const { agentId } = req.params;
      const path = entryPath(req.body.path, 'creating a file');
      const bytes = decode(req.body.content, req.body.encoding);
      checkSize(bytes);
      await requireAgent(db(), agentId);
      const { entry } = await writeWorkspaceFile(db(), agentId, path, bytes, 'create');
      return reply.status(201).send(single(entry));
    },
  );

  api.post(
    '/agents/:agentId/workspace/dirs',
    { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, body: Type.Object({ path: Type.String({ minLength: 1, maxLength: 4096 }) }) } },
    async (req, reply) => {
      const { agentId } = req.params;
      const path = entryPath(req.body.path, 'creating a directory');
      await requireAgent(db(), agentId);
      return reply.status(201).send(single(await makeWorkspaceDir(db(), agentId, path)));
    },
  );

  api.delete('/agents/:agentId/workspace/entry', { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery } }, async (req) => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'deleting');
    await requireAgent(db(), agentId);
    if ((await deleteWorkspaceTree(db(), agentId, path)) === 0) throw new Errors.NOT_FOUND(`workspace path "${path}"`);
    return { success: true };
  });

  api.patch(
    '/agents/:agentId/workspace/rename',
    { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery, body: Type.Object({ newName: Type.String({ minLength: 1, maxLength: 4096 }) }) } },
    async (req) => {
      const { agentId } = req.params;
      const from = entryPath(req.query.path, 'renaming');
      const { newName } = req.body;
      // A plain name renames in place; a name with a slash is a path from the root (a move).
      if (newName === '.' || newName === '..') throw new Errors.VALIDATION('newName must be a file or directory name');
      const to = entryPath(newName.includes('/') ? newName : `${parentPath(from)}/${newName}`, 'renaming');
      await requireAgent(db(), agentId);
      return single(await moveWorkspaceEntry(db(), agentId, from, to));
    },
  );

  api.get('/agents/:agentId/workspace/download', { config: { access: 'owner', owns: 'agent' }, schema: { params: Params, querystring: PathQuery } }, async (req, reply) => {
    const { agentId } = req.params;
    const path = entryPath(req.query.path, 'downloading');
    await requireAgent(db(), agentId);
    const file = await readWorkspaceFile(db(), agentId, path);
    if (!file) throw new Errors.NOT_FOUND(`workspace file "${path}"`);
    if (!file.content) throw new Errors.VALIDATION(`"${path}" is a directory`);
    const name = baseName(path);
    return reply
      .header('content-type', guessContentType(name))
      .header('content-disposition', contentDisposition(name))
      .header('content-length', file.content.byteLength)
      .send(file.content);
  });
}
