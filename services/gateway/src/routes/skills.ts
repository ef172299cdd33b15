import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Errors, isAppError } from '@agentry/errors';
import {
  AgentParams,
  AgentSkillCreateBody,
  AgentSkillParams,
  AgentSkillUpdateBody,
  AgentSkillUploadForm,
  MAX_SKILL_BYTES,
  PageQuery,
  Skill,
  SkillCopyBody,
  SkillCreateBody,
  SkillListQuery,
  SkillPage,
  SkillParams,
  SkillSelectorQuery,
  SkillUpdateBody,
  SkillUploadForm,
  SkillUploadResult,
  SuccessBody,
  announceChange,
} from '@agentry/contracts';
import { SkillFormatError, parseSkillMarkdown, readSkillArchive } from '@agentry/definitions';
import {
  countSkills,
  deleteSkill,
  getSkill,
  inTransaction,
  insertSkill,
  isUniqueViolation,
  listSkills,
  updateSkill,
  type SkillFilter,
  type SkillKey,
  type SkillRow,
  type SkillStatus,
} from '@agentry/db';
import type { GatewayDeps } from '../deps.js';
import { assertOwner, isAdmin } from '../auth/ownership.js';
import { documentBody } from '../openapi.js';
import { iso, pageOf, requireAgent, typed, type TypedReply, type TypedRequest } from './common.js';

/** Largest skill archive accepted, before anything is read from it. */
export const MAX_ARCHIVE_BYTES = 50 * 1024 * 1024;

// Multipart bodies are read as a stream by the handler (readUpload): described, not validated.
const AgentUploadDoc = documentBody(AgentSkillUploadForm, ['multipart/form-data']);
const UploadDoc = documentBody(SkillUploadForm, ['multipart/form-data']);

type Db = GatewayDeps['db']['db'];
type Upload<P = unknown> = Pick<FastifyRequest, 'isMultipart' | 'parts'> & { params: P };

function view(row: SkillRow, withContent = true): Skill {
  return {
    name: row.name,
    description: row.description,
    ...(withContent ? { content: row.content } : {}),
    scope: row.scope,
    ...(row.agentId ? { agentId: row.agentId } : {}),
    status: row.status,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
  };
}

function describeKey(key: SkillKey): string {
  return key.scope === 'global' ? `global skill "${key.name}"` : `skill "${key.name}" of agent "${key.agentId}"`;
}

/**
 * Content may arrive as a whole SKILL.md: its front matter is taken off (the body is what is
 * stored) and supplies the description when the request gives none. Bad front matter is a 400.
 */
function splitContent(content: string | undefined, description: string | undefined): { content?: string; description?: string } {
  if (content === undefined) return { description };
  if (Buffer.byteLength(content, 'utf8') > MAX_SKILL_BYTES) throw new Errors.PAYLOAD_TOO_LARGE(`skill content is larger than ${MAX_SKILL_BYTES} bytes`);
  try {
    const parsed = parseSkillMarkdown(content);
    return { content: parsed.body, description: description ?? parsed.description };
  } catch (err) {
    if (err instanceof SkillFormatError) throw new Errors.VALIDATION(`content: ${err.message}`);
    throw err;
  }
}

/** Which skill a global route means: `scope` (default global) and, for local, `agentId`. */
function selectKey(name: string, scope: 'global' | 'local' | undefined, agentId: string | undefined): SkillKey {
  if ((scope ?? 'global') === 'global') return { scope: 'global', name };
  if (!agentId) throw new Errors.VALIDATION('agentId is required when scope is local');
  return { scope: 'local', agentId, name };
}

async function page(db: Db, filter: SkillFilter, query: { page?: number; size?: number }): Promise<SkillPage> {
  const { page, size, limit, offset } = pageOf(query);
  const [rows, total] = await Promise.all([listSkills(db, filter, { limit, offset }), countSkills(db, filter)]);
  return { data: rows.map((r) => view(r, false)), total, page, size };
}

/** The workers' skill caches drop the agent's skills (a global skill: every agent's). */
function announce(deps: GatewayDeps, key: SkillKey): Promise<void> {
  return announceChange(deps.bus.pubsub, deps.logger, 'skills', key.scope === 'local' ? [key.agentId] : undefined);
}

async function required(db: Db, key: SkillKey): Promise<SkillRow> {
  const row = await getSkill(db, key);
  if (!row) throw new Errors.NOT_FOUND(describeKey(key));
  return row;
}

async function create(deps: GatewayDeps, key: SkillKey, body: { description?: string; content: string; status?: SkillStatus }): Promise<Skill> {
  const db = deps.db.db;
  if (key.scope === 'local') await requireAgent(db, key.agentId);
  const split = splitContent(body.content, body.description);
  if (await getSkill(db, key)) throw new Errors.CONFLICT(describeKey(key));
  try {
    const row = await insertSkill(db, key, { description: split.description ?? '', content: split.content ?? '', status: body.status ?? 'active' });
    await announce(deps, key);
    return view(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw new Errors.CONFLICT(describeKey(key));
    throw err;
  }
}

async function update(deps: GatewayDeps, key: SkillKey, body: { description?: string; content?: string; status?: SkillStatus }): Promise<Skill> {
  const db = deps.db.db;
  if (key.scope === 'local') await requireAgent(db, key.agentId);
  const split = splitContent(body.content, body.description);
  const change = {
    ...(split.description !== undefined ? { description: split.description } : {}),
    ...(split.content !== undefined ? { content: split.content } : {}),
    ...(body.status !== undefined ? { status: body.status } : {}),
  };
  const row = await updateSkill(db, key, change);
  if (!row) throw new Errors.NOT_FOUND(describeKey(key));
  await announce(deps, key);
  return view(row);
}

async function remove(deps: GatewayDeps, key: SkillKey): Promise<{ success: true }> {
  if (key.scope === 'local') await requireAgent(deps.db.db, key.agentId);
  if (!(await deleteSkill(deps.db.db, key))) throw new Errors.NOT_FOUND(describeKey(key));
  await announce(deps, key);
  return { success: true };
}

/** Reads a zip of skills and writes them all in one transaction, or nothing. */
async function upload(deps: GatewayDeps, req: Upload, target: (fields: Record<string, string>) => Promise<(name: string) => SkillKey>): Promise<SkillUploadResult> {
  const { file, fields } = await readUpload(req);
  const keyOf = await target(fields);
  const archive = await readSkillArchive(file);
  const created: string[] = [];
  const updated: string[] = [];
  await inTransaction(deps.db.db, async (trx) => {
    for (const skill of archive.skills) {
      const key = keyOf(skill.name);
      const values = { description: skill.description, content: skill.content, status: skill.status };
      if (await updateSkill(trx, key, values)) updated.push(skill.name);
      else {
        await insertSkill(trx, key, values);
        created.push(skill.name);
      }
    }
  });
  // Every skill of one archive has the same scope (and agent): one announcement covers them.
  const first = archive.skills[0];
  if (first) await announce(deps, keyOf(first.name));
  return { created, updated, skipped: archive.skipped };
}

const one = { 200: Skill };
const created = { 201: Skill };
const deleted = { 200: SuccessBody };
const uploaded = { 200: SkillUploadResult };
const ListAgentSkills = { params: AgentParams, querystring: PageQuery, response: { 200: SkillPage } };
const GetAgentSkill = { params: AgentSkillParams, response: one };
const CreateAgentSkill = { params: AgentParams, body: AgentSkillCreateBody, response: created };
const UpdateAgentSkill = { params: AgentSkillParams, body: AgentSkillUpdateBody, response: one };
const DeleteAgentSkill = { params: AgentSkillParams, response: deleted };
const UploadAgentSkills = { params: AgentParams, response: uploaded };
const ListSkills = { querystring: SkillListQuery, response: { 200: SkillPage } };
const GetSkill = { params: SkillParams, querystring: SkillSelectorQuery, response: one };
const CreateSkill = { body: SkillCreateBody, response: created };
const UpdateSkill = { params: SkillParams, body: SkillUpdateBody, response: one };
const DeleteSkill = { params: SkillParams, querystring: SkillSelectorQuery, response: deleted };
const UploadSkills = { response: uploaded };
const CopySkill = { body: SkillCopyBody, response: created };

// Agent-private skills.

function listAgentSkills(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListAgentSkills>): Promise<SkillPage> => {
    await requireAgent(deps.db.db, req.params.agentId);
    return page(deps.db.db, { scope: 'local', agentId: req.params.agentId }, req.query);
  };
}

function getAgentSkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetAgentSkill>): Promise<Skill> => {
    await requireAgent(deps.db.db, req.params.agentId);
    return view(await required(deps.db.db, { scope: 'local', agentId: req.params.agentId, name: req.params.name }));
  };
}

function createAgentSkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateAgentSkill>, reply: TypedReply<typeof CreateAgentSkill>): Promise<Skill> => {
    reply.code(201);
    return create(deps, { scope: 'local', agentId: req.params.agentId, name: req.body.name }, req.body);
  };
}

function updateAgentSkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof UpdateAgentSkill>): Promise<Skill> =>
    update(deps, { scope: 'local', agentId: req.params.agentId, name: req.params.name }, req.body);
}

function deleteAgentSkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteAgentSkill>): Promise<SuccessBody> => remove(deps, { scope: 'local', agentId: req.params.agentId, name: req.params.name });
}

function uploadAgentSkills(deps: GatewayDeps) {
  return async (req: Upload<AgentParams>): Promise<SkillUploadResult> => {
    const { agentId } = req.params;
    return upload(deps, req, async () => {
      await requireAgent(deps.db.db, agentId);
      return (name) => ({ scope: 'local', agentId, name });
    });
  };
}

// Global skill routes: both scopes.

function listAllSkills(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof ListSkills>): Promise<SkillPage> => {
    const { agentId, scope } = req.query;
    if (agentId !== undefined && scope !== 'global') await assertOwner(deps.db.db, req.principal, 'agent', { agentId });
    // Without an agent named, a plain user sees global skills and the local skills of the agents
    // whose workspace they may read (their own); admins see every agent's. An api account owns none.
    const localOwner = isAdmin(req.principal) ? undefined : req.principal.kind === 'user' ? req.principal.username : '';
    return page(deps.db.db, { scope: scope ?? 'all', agentId, ...(localOwner === undefined ? {} : { localOwner }) }, req.query);
  };
}

function getSkillByName(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof GetSkill>): Promise<Skill> => {
    const { name } = req.params;
    const { scope, agentId } = req.query;
    // An agent's local skills follow its workspace rule: only its owner and admins read them.
    if (agentId !== undefined && scope !== 'global') await assertOwner(deps.db.db, req.principal, 'agent', { agentId });
    // Without a scope, an agent's own skill wins over a global one of the same name.
    if (scope === undefined && agentId) {
      const local = await getSkill(deps.db.db, { scope: 'local', agentId, name });
      if (local) return view(local);
    }
    return view(await required(deps.db.db, selectKey(name, scope, agentId)));
  };
}

function createSkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CreateSkill>, reply: TypedReply<typeof CreateSkill>): Promise<Skill> => {
    const skill = await create(deps, selectKey(req.body.name, req.body.scope, req.body.agentId), req.body);
    reply.code(201);
    return skill;
  };
}

function updateSkillByName(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof UpdateSkill>): Promise<Skill> =>
    update(deps, selectKey(req.params.name, req.body.scope, req.body.agentId), req.body);
}

function deleteSkillByName(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof DeleteSkill>): Promise<SuccessBody> => remove(deps, selectKey(req.params.name, req.query.scope, req.query.agentId));
}

function uploadSkills(deps: GatewayDeps) {
  return async (req: Upload): Promise<SkillUploadResult> =>
    upload(deps, req, async (fields) => {
      const scope = fields.scope ?? 'global';
      if (scope !== 'global' && scope !== 'local') throw new Errors.VALIDATION('scope must be global or local');
      const agentId = fields.agentId;
      if (scope === 'local') {
        if (!agentId) throw new Errors.VALIDATION('agentId is required when scope is local');
        await requireAgent(deps.db.db, agentId);
        return (name) => ({ scope: 'local', agentId, name });
      }
      return (name) => ({ scope: 'global', name });
    });
}

/**
 * Where a copy reads and writes. The spec's body names no source scope: without `agentId` it is
 * global -> global (under `newName`); with it, the other side of the copy is that agent's local
 * skills (global -> local for targetScope local, local -> global for global).
 */
function copyKeys(body: SkillCopyBody): { source: SkillKey; target: SkillKey; agentId?: string } {
  const { name, targetScope, agentId } = body;
  const newName = body.newName ?? name;
  if (targetScope === 'local') {
    if (!agentId) throw new Errors.VALIDATION('agentId is required when targetScope is local: it names the agent that receives the copy');
    return { source: { scope: 'global', name }, target: { scope: 'local', agentId, name: newName }, agentId };
  }
  if (agentId) return { source: { scope: 'local', agentId, name }, target: { scope: 'global', name: newName }, agentId };
  if (newName === name) {
    throw new Errors.VALIDATION(`newName is required to copy global skill "${name}" to global: give the copy another name (or agentId to copy an agent's local skill)`);
  }
  return { source: { scope: 'global', name }, target: { scope: 'global', name: newName } };
}

function copySkill(deps: GatewayDeps) {
  return async (req: TypedRequest<typeof CopySkill>, reply: TypedReply<typeof CopySkill>): Promise<Skill> => {
    const { source, target, agentId } = copyKeys(req.body);
    if (agentId) await requireAgent(deps.db.db, agentId);
    const from = await required(deps.db.db, source);
    const skill = await create(deps, target, { description: from.description, content: from.content, status: from.status });
    reply.code(201);
    return skill;
  };
}

export function skillRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const user = { access: 'user' } as const;
  const agentOwner = { access: 'owner', owns: 'agent' } as const;
  const admin = { access: 'admin' } as const;

  api.get('/agents/:agentId/skills', { config: agentOwner, schema: ListAgentSkills }, listAgentSkills(deps));
  api.get('/agents/:agentId/skills/:name', { config: agentOwner, schema: GetAgentSkill }, getAgentSkill(deps));
  api.post('/agents/:agentId/skills', { config: agentOwner, schema: CreateAgentSkill }, createAgentSkill(deps));
  api.put('/agents/:agentId/skills/:name', { config: agentOwner, schema: UpdateAgentSkill }, updateAgentSkill(deps));
  api.delete('/agents/:agentId/skills/:name', { config: agentOwner, schema: DeleteAgentSkill }, deleteAgentSkill(deps));
  api.post('/agents/:agentId/skills/upload', { config: { ...agentOwner, swaggerTransform: AgentUploadDoc }, schema: UploadAgentSkills }, uploadAgentSkills(deps));

  api.get('/skills', { config: user, schema: ListSkills }, listAllSkills(deps));
  api.get('/skills/:name', { config: user, schema: GetSkill }, getSkillByName(deps));
  api.post('/skills', { config: admin, schema: CreateSkill }, createSkill(deps));
  api.put('/skills/:name', { config: admin, schema: UpdateSkill }, updateSkillByName(deps));
  api.delete('/skills/:name', { config: admin, schema: DeleteSkill }, deleteSkillByName(deps));
  api.post('/skills/upload', { config: { ...admin, swaggerTransform: UploadDoc }, schema: UploadSkills }, uploadSkills(deps));
  api.post('/skills/copy', { config: admin, schema: CopySkill }, copySkill(deps));
}

/** The `file` part (a zip, at most 50 MB) and the text fields of a multipart upload. */
async function readUpload(req: Upload): Promise<{ file: Buffer; fields: Record<string, string> }> {
  if (!req.isMultipart()) throw new Errors.UNSUPPORTED_MEDIA_TYPE('expected multipart/form-data with a "file" part');
  let file: Buffer | undefined;
  const fields: Record<string, string> = {};
  try {
    for await (const part of req.parts({ limits: { fileSize: MAX_ARCHIVE_BYTES, files: 1 } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file') throw new Errors.VALIDATION(`unexpected file part "${part.fieldname}" (send the archive as "file")`);
        file = await part.toBuffer();
      } else {
        fields[part.fieldname] = String(part.value);
      }
    }
  } catch (err) {
    if (isAppError(err)) throw err;
    const code = (err as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') throw new Errors.PAYLOAD_TOO_LARGE(`the archive is larger than ${MAX_ARCHIVE_BYTES} bytes`);
    if (code === 'FST_FILES_LIMIT') throw new Errors.VALIDATION('send one file only');
    if (typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err;
    // The parser's own errors ("Unexpected end of multipart data", "Boundary not found", ...):
    // the body the client sent is not well-formed multipart.
    throw new Errors.BAD_REQUEST(`the multipart body could not be read (${(err as Error).message})`, { cause: err });
  }
  if (!file) throw new Errors.VALIDATION('the "file" part (a zip archive) is missing');
  return { file, fields };
}
