import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Type, { type Static } from 'typebox';
import { Value } from 'typebox/value';
import { Errors } from '@agentry/errors';
import { ResponseObject, ResponseTextFormat, type ResponseFormat, type RunMessage, type RunRequest } from '@agentry/contracts';
import { branchSessionAt, getRun, getSession, inTransaction, loadHistory } from '@agentry/db';
import { agentLookup, type RequireAgent } from '../chat/agent-lookup.js';
import { serviceMetrics, tracedRoute } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from '../auth/credentials.js';
import { sessionOwner } from '../auth/ownership.js';
import { enforceBudget } from '../auth/budget.js';
import { ChatRun } from '../chat/chat-run.js';
import { awaitResponse, streamResponse } from '../chat/responses-answer.js';
import { responseIdOf, runIdOfResponse, type ResponseMeta } from '../chat/responses-events.js';
import { resumeRequested, resumeStream, resumptionRequested } from '../chat/resume.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));
const ResponsesBody = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    // `input` is checked by hand (see inputMessages): fastify's ajv would coerce inside a union.
    input: Type.Unknown(),
    instructions: Nullable(Type.String()),
    stream: Nullable(Type.Boolean()),
    store: Nullable(Type.Boolean()),
    previous_response_id: Nullable(Type.String({ minLength: 1, maxLength: 256 })),
    temperature: Nullable(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Nullable(Type.Number({ minimum: 0, maximum: 1 })),
    max_output_tokens: Nullable(Type.Integer({ minimum: 1 })),
    metadata: Nullable(Type.Record(Type.String(), Type.String({ maxLength: 512 }), { maxProperties: 16 })),
    tools: Type.Optional(Type.Unknown()),
    tool_choice: Type.Optional(Type.Unknown()),
    text: Type.Optional(Type.Unknown()),
    background: Type.Optional(Type.Unknown()),
    conversation: Type.Optional(Type.Unknown()),
  },
  // OpenAI clients send more (user, parallel_tool_calls, truncation, ...): accepted and ignored.
  { additionalProperties: true },
);
type ResponsesBody = Static<typeof ResponsesBody>;

const ROLES: Record<string, RunMessage['role']> = { user: 'user', assistant: 'assistant', system: 'system', developer: 'system' };

/** The text of one input message: a string, or its `input_text` / `output_text` parts joined. */
function itemText(content: unknown, where: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new Errors.VALIDATION(`${where}.content must be a string or an array of content parts`);
  return content
    .map((part: unknown, j) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (!p || typeof p !== 'object' || (p.type !== 'input_text' && p.type !== 'output_text') || typeof p.text !== 'string') {
        throw new Errors.VALIDATION(`${where}.content[${j}]: only input_text and output_text parts are supported (got ${JSON.stringify(p?.type ?? null)})`);
      }
      return p.text;
    })
    .join('\n');
}

/** `input` as run messages: a string is one user message; an array holds message items only. */
function inputMessages(input: unknown): RunMessage[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input) || input.length === 0) throw new Errors.VALIDATION('input must be a string or a non-empty array of message items');
  return input.map((raw: unknown, i) => {
    const item = raw as { type?: unknown; role?: unknown; content?: unknown } | null;
    const where = `input[${i}]`;
    if (!item || typeof item !== 'object') throw new Errors.VALIDATION(`${where} must be a message item`);
    if (item.type !== undefined && item.type !== 'message') throw new Errors.VALIDATION(`${where}: items of type ${JSON.stringify(item.type)} are not supported, only messages`);
    const role = typeof item.role === 'string' ? ROLES[item.role] : undefined;
    if (!role) throw new Errors.VALIDATION(`${where}.role must be user, assistant, system or developer`);
    return { role, content: itemText(item.content, where) };
  });
}

/** Refuses what this endpoint does not do, naming the field, rather than silently ignoring it. */
function refuseUnsupported(body: ResponsesBody): void {
  if (Array.isArray(body.tools) ? body.tools.length > 0 : body.tools !== undefined && body.tools !== null) {
    throw new Errors.VALIDATION('tools: client tools are not supported; the agent brings its own');
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none') throw new Errors.VALIDATION('tool_choice must be "auto" or "none"');
  if (body.background === true) throw new Errors.VALIDATION('background: background responses are not supported');
  if (body.conversation !== undefined && body.conversation !== null) throw new Errors.VALIDATION('conversation: not supported; continue with previous_response_id');
}

/** `text.format`, checked: the default plain text when not given. */
function textFormatOf(text: unknown): ResponseTextFormat {
  const format = (text as { format?: unknown } | null | undefined)?.format;
  if (format === undefined || format === null) return { type: 'text' };
  if (!Value.Check(ResponseTextFormat, format)) {
    throw new Errors.VALIDATION('text.format must be {type: "text"}, {type: "json_object"} or {type: "json_schema", name, schema?, description?, strict?}');
  }
  return format;
}

/** Chat's `response_format` for the model call (the same thing, the schema nested); plain text is not sent. */
function responseFormatOf(format: ResponseTextFormat): ResponseFormat | undefined {
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  const { type, ...jsonSchema } = format;
  return { type, json_schema: jsonSchema };
}

/** Every input item is new to the session (the Responses API never resends earlier turns). */
function toRunRequest(body: ResponsesBody, messages: RunMessage[]): RunRequest {
  const params: NonNullable<RunRequest['params']> = {};
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  if (typeof body.max_output_tokens === 'number') params.max_tokens = body.max_output_tokens;
  const responseFormat = responseFormatOf(textFormatOf(body.text));
  if (responseFormat) params.response_format = responseFormat;
  return { messages, sessionTurns: 'all', ...(body.stream === true ? { stream: true } : {}), ...(Object.keys(params).length > 0 ? { params } : {}) };
}

/** Sessions of this endpoint, apart from chat's: a response id continues only a Responses conversation. */
const CHANNEL = 'responses';

/**
 * The session a `previous_response_id` continues. Another caller's response, a chat completion's
 * run and a response made with `store: false` are all "not found": a caller learns nothing of
 * conversations that are not its own.
 */
async function previousSession(deps: GatewayDeps, principal: Principal, id: string, agentId: string) {
  const notFound = () => new Errors.NOT_FOUND(`response "${id}"`);
  const runId = runIdOfResponse(id);
  if (!runId) throw notFound();
  const prev = await getRun(deps.db.db, runId);
  const session = prev?.sessionId ? await getSession(deps.db.db, prev.sessionId) : undefined;
  if (!session || session.channel !== CHANNEL || session.owner !== sessionOwner(principal)) throw notFound();
  if (session.agentId !== agentId) {
    throw new Errors.VALIDATION(`previous_response_id: response "${id}" was answered by agent "${session.agentId}", not by "${agentId}"`);
  }
  return { session, runId };
}

type Previous = NonNullable<Awaited<ReturnType<typeof previousSession>>>;

/** The conversation up to the previous response as plain text messages (tool exchanges left out). */
async function historyMessages(deps: GatewayDeps, previous: Previous): Promise<RunMessage[]> {
  const limit = deps.config.current.agents.defaults.session.max_messages;
  const history = await loadHistory(deps.db.db, previous.session.id, limit, { throughRunId: previous.runId });
  return history
    .filter((m) => (m.role === 'user' || m.role === 'assistant') && !m.toolCalls && m.content !== '')
    .map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content }));
}

/**
 * Where the turn lives. Stored (the default): in a session of its own, or the previous
 * response's (a branch of it when later turns followed that response), so the worker keeps every input item with the answer in one commit (a failed turn
 * keeps none). `store: false`: no session at all; the previous response's history, if any, is
 * sent with the request, so the model sees the conversation and nothing of this turn is kept.
 */
async function placeTurn(
  deps: GatewayDeps,
  principal: Principal,
  turn: { agentId: string; runId: string; store: boolean; previous: Previous | undefined; messages: RunMessage[] },
): Promise<{ session: { key: string; channel: string; owner: string } | null; messages: RunMessage[] }> {
  const { previous } = turn;
  if (!turn.store) return { session: null, messages: previous ? [...(await historyMessages(deps, previous)), ...turn.messages] : turn.messages };
  const owner = sessionOwner(principal);
  const own = { sessionKey: responseIdOf(turn.runId) };
  // Going on from an earlier answer than the last branches the conversation there, as OpenAI does.
  const sessionKey = previous ? (await inTransaction(deps.db.db, (tx) => branchSessionAt(tx, previous.session, previous.runId, own))).sessionKey : own.sessionKey;
  return { session: { key: sessionKey, channel: CHANNEL, owner }, messages: turn.messages };
}

function metaOf(body: ResponsesBody, runId: string, store: boolean, createdAt = new Date()): ResponseMeta {
  return {
    id: responseIdOf(runId),
    itemId: `msg_${runId}`,
    createdAt: Math.floor(createdAt.getTime() / 1000),
    model: body.model,
    instructions: body.instructions ?? null,
    previousResponseId: body.previous_response_id ?? null,
    store,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    maxOutputTokens: body.max_output_tokens ?? null,
    toolChoice: body.tool_choice === 'none' ? 'none' : 'auto',
    metadata: body.metadata ?? {},
    textFormat: textFormatOf(body.text),
  };
}


/** `POST /responses`: checks as chat completions do, places the turn, then answers as JSON or SSE. */
function createResponse(deps: GatewayDeps, requireAgent: RequireAgent, heartbeatMs: number) {
  return async function createResponse(req: FastifyRequest<{ Body: ResponsesBody }>, reply: FastifyReply): Promise<unknown> {
    const body = req.body;
    // A client that lost its stream sends the same request again with the last event id it got:
    // the response's events after it (the body gives back what the response object repeats).
    const resume = await resumeRequested(deps, req, body);
    if (resume) {
      const { run, after } = resume;
      const meta = metaOf(body, run.id, body.store !== false, run.createdAt);
      return resumeStream(deps, req, reply, run, after, (control, relay) => streamResponse(control, req, reply, relay, meta, { heartbeatMs, after }));
    }
    await enforceBudget(deps.bus, deps.logger, req, reply);
    refuseUnsupported(body);
    const input = inputMessages(body.input);
    const messages: RunMessage[] = body.instructions ? [{ role: 'system', content: body.instructions }, ...input] : input;
    const principal = req.principal;
    const agent = await requireAgent(body.model, principal);
    const store = body.store !== false;
    const previous = body.previous_response_id ? await previousSession(deps, principal, body.previous_response_id, agent.id) : undefined;

    const run = new ChatRun(deps, req, reply);
    try {
      const turn = await placeTurn(deps, principal, { agentId: agent.id, runId: run.runId, store, previous, messages });
      const { session, started } = await run.start(
        { agentId: agent.id, session: turn.session, source: 'api', principal: sessionOwner(principal), request: toRunRequest(body, turn.messages) },
        { resumable: body.stream === true && resumptionRequested(req) },
      );
      if (!started) {
        req.log.info({ runId: run.runId }, 'run cancelled before it was enqueued: the client went away');
        reply.hijack();
        return reply;
      }
      req.log.info({ runId: run.runId, agentId: agent.id, stream: body.stream === true, sessionId: session?.id }, 'response run enqueued');
      const meta = metaOf(body, run.runId, store);
      if (body.stream !== true) return await awaitResponse(run, reply, run.relay(), meta);
      const streams = serviceMetrics.activeStreams(deps.metrics);
      streams.inc();
      reply.raw.once('close', () => streams.dec());
      return await streamResponse(run, req, reply, run.relay(), meta, { heartbeatMs });
    } finally {
      await run.close().catch((err: unknown) => req.log.warn({ err }, 'unsubscribe failed'));
    }
  };
}


/**
 * `POST /responses`: OpenAI's Responses API for text, `model` being the agent id. Runs go through
 * `ChatRun` like chat completions; the response id is `resp_<runId>`, so a `previous_response_id`
 * leads to the run row and its session.
 */
export function responsesRoutes(app: FastifyInstance, deps: GatewayDeps, opts: { heartbeatMs: number }): void {
  const requireAgent = agentLookup(app, deps, 'responses');
  app.post<{ Body: ResponsesBody }>(
    '/responses',
    { config: { access: 'chat', rateLimit: 'chat', errors: 'openai' }, schema: { body: ResponsesBody, response: { 200: ResponseObject } } },
    tracedRoute('/api/v1/responses', createResponse(deps, requireAgent, opts.heartbeatMs)),
  );
}
