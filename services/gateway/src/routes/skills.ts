import type { FastifyInstance, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { Errors, isAppError } from '@agentry/errors';
import { announceChange } from '@agentry/contracts';
import { Id, MAX_SKILL_BYTES, SKILL_NAME_PATTERN, SkillFormatError, parseSkillMarkdown, readSkillArchive } from '@agentry/engine';
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
import { documentBody } from '../openapi.js';
import { PageQuery, iso, pageOf, requireAgent, typed, type Paged } from './common.js';

/** Largest skill archive accepted, before anything is read from it. */
export const MAX_ARCHIVE_BYTES = 50 * 1024 * 1024;

const SkillName = Type.String({ pattern: SKILL_NAME_PATTERN, description: 'letters, digits, _ and -, 1 to 64 characters' });
const Status = Type.Union([Type.Literal('active'), Type.Literal('draft')]);
const Scope = Type.Union([Type.Literal('global'), Type.Literal('local')]);
const Content = Type.String({ maxLength: MAX_SKILL_BYTES });
const Description = Type.String({ maxLength: 4096 });

const SkillFields = {
  description: Type.Optional(Description),
  content: Type.Optional(Content),
  status: Type.Optional(Status),
};
const NewSkill = { name: SkillName, description: Type.Optional(Description), content: Content, status: Type.Optional(Status) };
const Selector = { scope: Type.Optional(Scope), agentId: Type.Optional(Id) };

/** The `file` part of an upload: a zip of skill folders (each with a SKILL.md), at most 50 MB. */
const ArchivePart = Type.String({ format: 'binary', description: 'a zip archive of skills (folders with a SKILL.md), at most 50 MB' });
// Multipart bodies are read as a stream by the handler (readUpload): described, not validated.
const AgentUploadDoc = documentBody(Type.Object({ file: ArchivePart }), ['multipart/form-data']);
const UploadDoc = documentBody(
  Type.Object({
    file: ArchivePart,
    scope: Type.Optional(Scope),
    agentId: Type.Optional(Type.String({ description: 'the agent whose local skills receive the archive (scope local)' })),
  }),
  ['multipart/form-data'],
);

/** A skill as the API shows it; lists leave `content` out. */
export interface SkillView {
  name: string;
  description: string;
  content?: string;
  scope: 'global' | 'local';
  agentId?: string;
  status: SkillStatus;
  createdAt: string;
  updatedAt: string;
}

function view(row: SkillRow, withContent = true): SkillView {
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

export function skillRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const api = typed(app);
  const db = () => deps.db.db;

  async function page(filter: SkillFilter, query: { page?: number; size?: number }): Promise<Paged<SkillView>> {
    const { page, size, limit, offset } = pageOf(query);
    const [rows, total] = await Promise.all([listSkills(db(), filter, { limit, offset }), countSkills(db(), filter)]);
    return { data: rows.map((r) => view(r, false)), total, page, size };
  }

  /** The workers' skill caches drop the agent's skills (a global skill: every agent's). */
  const announce = (key: SkillKey) => announceChange(deps.bus.pubsub, deps.logger, 'skills', key.scope === 'local' ? [key.agentId] : undefined);

  async function required(key: SkillKey): Promise<SkillRow> {
    const row = await getSkill(db(), key);
    if (!row) throw new Errors.NOT_FOUND(describeKey(key));
    return row;
  }

  async function create(key: SkillKey, body: { description?: string; content: string; status?: SkillStatus }): Promise<SkillView> {
    if (key.scope === 'local') await requireAgent(db(), key.agentId);
    const split = splitContent(body.content, body.description);
    if (await getSkill(db(), key)) throw new Errors.CONFLICT(describeKey(key));
    try {
      const row = await insertSkill(db(), key, { description: split.description ?? '', content: split.content ?? '', status: body.status ?? 'active' });
      await announce(key);
      return view(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw new Errors.CONFLICT(describeKey(key));
      throw err;
    }
  }

  async function update(key: SkillKey, body: { description?: string; content?: string; status?: SkillStatus }): Promise<SkillView> {
    if (key.scope === 'local') await requireAgent(db(), key.agentId);
    const split = splitContent(body.content, body.description);
    const change = {
      ...(split.description !== undefined ? { description: split.description } : {}),
      ...(split.content !== undefined ? { content: split.content } : {}),
      ...(body.status !== undefined ? { status: body.status } : {}),
    };
    const row = await updateSkill(db(), key, change);
    if (!row) throw new Errors.NOT_FOUND(describeKey(key));
    await announce(key);
    return view(row);
  }

  async function remove(key: SkillKey): Promise<{ success: true }> {
    if (key.scope === 'local') await requireAgent(db(), key.agentId);
    if (!(await deleteSkill(db(), key))) throw new Errors.NOT_FOUND(describeKey(key));
    await announce(key);
    return { success: true };
  }

  /** Reads a zip of skills and writes them all in one transaction, or nothing. */
  async function upload(req: FastifyRequest, target: (fields: Record<string, string>) => Promise<(name: string) => SkillKey>) {
    const { file, fields } = await readUpload(req);
    const keyOf = await target(fields);
    const archive = await readSkillArchive(file);
    const created: string[] = [];
    const updated: string[] = [];
    await inTransaction(db(), async (trx) => {
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
    if (first) await announce(keyOf(first.name));
    return { created, updated, skipped: archive.skipped };
  }

  // Agent-private skills.
  const AgentParams = Type.Object({ agentId: Id });
  const AgentSkillParams = Type.Object({ agentId: Id, name: SkillName });

  api.get('/agents/:agentId/skills', { config: { access: 'user' }, schema: { params: AgentParams, querystring: Type.Object(PageQuery) } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return page({ scope: 'local', agentId: req.params.agentId }, req.query);
  });

  api.get('/agents/:agentId/skills/:name', { config: { access: 'user' }, schema: { params: AgentSkillParams } }, async (req) => {
    await requireAgent(db(), req.params.agentId);
    return view(await required({ scope: 'local', agentId: req.params.agentId, name: req.params.name }));
  });

  api.post('/agents/:agentId/skills', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentParams, body: Type.Object(NewSkill) } }, async (req, reply) => {
    const skill = await create({ scope: 'local', agentId: req.params.agentId, name: req.body.name }, req.body);
    return reply.status(201).send(skill);
  });

  api.put('/agents/:agentId/skills/:name', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentSkillParams, body: Type.Object(SkillFields) } }, async (req) => {
    return update({ scope: 'local', agentId: req.params.agentId, name: req.params.name }, req.body);
  });

  api.delete('/agents/:agentId/skills/:name', { config: { access: 'owner', owns: 'agent' }, schema: { params: AgentSkillParams } }, async (req) => {
    return remove({ scope: 'local', agentId: req.params.agentId, name: req.params.name });
  });

  api.post('/agents/:agentId/skills/upload', { config: { access: 'owner', owns: 'agent', swaggerTransform: AgentUploadDoc }, schema: { params: AgentParams } }, async (req) => {
    const { agentId } = req.params;
    return upload(req, async () => {
      await requireAgent(db(), agentId);
      return (name) => ({ scope: 'local', agentId, name });
    });
  });

  // Global skill routes: both scopes.
  api.get(
    '/skills',
    {
      config: { access: 'user' }, schema: {
        querystring: Type.Object({
          ...PageQuery,
          scope: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('global'), Type.Literal('local')])),
          agentId: Type.Optional(Id),
        }),
      },
    },
    async (req) => page({ scope: req.query.scope ?? 'all', agentId: req.query.agentId }, req.query),
  );

  api.get(
    '/skills/:name',
    { config: { access: 'user' }, schema: { params: Type.Object({ name: SkillName }), querystring: Type.Object(Selector) } },
    async (req) => {
      const { name } = req.params;
      const { scope, agentId } = req.query;
      // Without a scope, an agent's own skill wins over a global one of the same name.
      if (scope === undefined && agentId) {
        const local = await getSkill(db(), { scope: 'local', agentId, name });
        if (local) return view(local);
      }
      return view(await required(selectKey(name, scope, agentId)));
    },
  );

  api.post('/skills', { config: { access: 'admin' }, schema: { body: Type.Object({ ...NewSkill, ...Selector }) } }, async (req, reply) => {
    const skill = await create(selectKey(req.body.name, req.body.scope, req.body.agentId), req.body);
    return reply.status(201).send(skill);
  });

  api.put(
    '/skills/:name',
    { config: { access: 'admin' }, schema: { params: Type.Object({ name: SkillName }), body: Type.Object({ ...SkillFields, ...Selector }) } },
    async (req) => update(selectKey(req.params.name, req.body.scope, req.body.agentId), req.body),
  );

  api.delete(
    '/skills/:name',
    { config: { access: 'admin' }, schema: { params: Type.Object({ name: SkillName }), querystring: Type.Object(Selector) } },
    async (req) => remove(selectKey(req.params.name, req.query.scope, req.query.agentId)),
  );

  api.post('/skills/upload', { config: { access: 'admin', swaggerTransform: UploadDoc } }, async (req) => {
    return upload(req, async (fields) => {
      const scope = fields.scope ?? 'global';
      if (scope !== 'global' && scope !== 'local') throw new Errors.VALIDATION('scope must be global or local');
      const agentId = fields.agentId;
      if (scope === 'local') {
        if (!agentId) throw new Errors.VALIDATION('agentId is required when scope is local');
        await requireAgent(db(), agentId);
        return (name) => ({ scope: 'local', agentId, name });
      }
      return (name) => ({ scope: 'global', name });
    });
  });

  api.post(
    '/skills/copy',
    {
      config: { access: 'admin' }, schema: {
        body: Type.Object({
          name: SkillName,
          targetScope: Scope,
          newName: Type.Optional(SkillName),
          /** The agent on the local side: the target for targetScope local, the source for global. */
          agentId: Type.Optional(Id),
        }),
      },
    },
    async (req, reply) => {
      const { name, targetScope, agentId } = req.body;
      const newName = req.body.newName ?? name;
      if (!agentId) throw new Errors.VALIDATION(`agentId is required: it names the agent whose local skills are ${targetScope === 'local' ? 'the target' : 'the source'}`);
      const source: SkillKey = targetScope === 'local' ? { scope: 'global', name } : { scope: 'local', agentId, name };
      const target: SkillKey = targetScope === 'local' ? { scope: 'local', agentId, name: newName } : { scope: 'global', name: newName };
      await requireAgent(db(), agentId);
      const from = await required(source);
      const skill = await create(target, { description: from.description, content: from.content, status: from.status });
      return reply.status(201).send(skill);
    },
  );
}

/** The `file` part (a zip, at most 50 MB) and the text fields of a multipart upload. */
async function readUpload(req: FastifyRequest): Promise<{ file: Buffer; fields: Record<string, string> }> {
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
