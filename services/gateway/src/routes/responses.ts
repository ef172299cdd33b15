import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Value } from 'typebox/value';
import { Errors } from '@agentry/errors';
import {
  ResponseCreateBody,
  ResponseDeleted,
  ResponseInputItemsQuery,
  ResponseItemList,
  ResponseObject,
  ResponseParams,
  ResponseRetrieveQuery,
  ResponseTextFormat,
  type ResponseFormat,
  type ResponseInputItem,
  type RunMessage,
  type RunRequest,
  type RunToolCall,
} from '@agentry/contracts';
import { branchSessionAt, deleteRun, getRun, getSession, inTransaction, isFinalRunStatus, loadHistory, type RunRecord } from '@agentry/db';
import { cancelRun } from '@agentry/runs';
import { agentLookup, type RequireAgent } from '../chat/agent-lookup.js';
import { assertAgentTakesClientTools, responsesClientTools } from '../chat/client-tools.js';
import { serviceMetrics, tracedRoute } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import type { Principal } from '../auth/credentials.js';
import { sessionOwner } from '../auth/ownership.js';
import { enforceBudget } from '../auth/budget.js';
import { ChatRun } from '../chat/chat-run.js';
import { awaitResponse, streamResponse } from '../chat/responses-answer.js';
import { responseIdOf, responseObject, runIdOfResponse, type ResponseMeta } from '../chat/responses-events.js';
import { resumeRequested, resumeStream, resumptionRequested } from '../chat/resume.js';
import type { DoneEvent } from '../chat/openai-chunks.js';
import { answersItself, typed, type TypedReply, type TypedRequest } from './common.js';

type ResponsesBody = ResponseCreateBody;

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

/** A `function_call_output`'s output: a string, or its text parts joined. */
function outputText(output: unknown, where: string): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return itemText(output, where);
  throw new Errors.VALIDATION(`${where}.output must be a string or an array of input_text parts`);
}

/**
 * `input` as run messages: a string is one user message; an array holds message items and the
 * client's tool exchange: `function_call` items (the calls of a response, resent) become one
 * assistant message's calls, `function_call_output` items the tool results the model reads.
 */
function inputMessages(input: unknown): RunMessage[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input) || input.length === 0) throw new Errors.VALIDATION('input must be a string or a non-empty array of items');
  const messages: RunMessage[] = [];
  input.forEach((raw: unknown, i) => {
    const item = raw as { type?: unknown; role?: unknown; content?: unknown; call_id?: unknown; name?: unknown; arguments?: unknown; output?: unknown } | null;
    const where = `input[${i}]`;
    if (!item || typeof item !== 'object') throw new Errors.VALIDATION(`${where} must be an item`);
    if (item.type === 'function_call') {
      if (typeof item.call_id !== 'string' || item.call_id === '' || typeof item.name !== 'string' || typeof item.arguments !== 'string') {
        throw new Errors.VALIDATION(`${where}: a function_call item needs call_id, name and arguments (a JSON string)`);
      }
      const call = { id: item.call_id, type: 'function' as const, function: { name: item.name, arguments: item.arguments } };
      const last = messages.at(-1);
      // A model turn's text and calls follow one another: one assistant message holds them all.
      if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
      else messages.push({ role: 'assistant', content: '', tool_calls: [call] });
      return;
    }
    if (item.type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || item.call_id === '') throw new Errors.VALIDATION(`${where}.call_id must name the function call this output answers`);
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: outputText(item.output, where) });
      return;
    }
    if (item.type !== undefined && item.type !== 'message') {
      throw new Errors.VALIDATION(`${where}: items of type ${JSON.stringify(item.type)} are not supported, only messages, function_call and function_call_output`);
    }
    const role = typeof item.role === 'string' ? ROLES[item.role] : undefined;
    if (!role) throw new Errors.VALIDATION(`${where}.role must be user, assistant, system or developer`);
    messages.push({ role, content: itemText(item.content, where) });
  });
  return messages;
}

/**
 * `item_reference` items (what the AI SDK sends for output items of stored responses) replaced
 * by the items they name: `msg_<runId>` is that response's answer, `fc_<runId>_<callId>` one of
 * its calls of the client's tools (read from its session). Another caller's items, and items of
 * responses not stored, are not found, as a response is.
 */
async function resolveReferences(deps: GatewayDeps, principal: Principal, input: unknown): Promise<unknown> {
  if (!Array.isArray(input) || !input.some((i) => (i as { type?: unknown } | null)?.type === 'item_reference')) return input;
  const owner = sessionOwner(principal);
  const limit = deps.config.current.agents.defaults.session.max_messages;
  return Promise.all(
    input.map(async (raw: unknown, i) => {
      const item = raw as { type?: unknown; id?: unknown } | null;
      if (item?.type !== 'item_reference') return raw;
      const id = typeof item.id === 'string' ? item.id : '';
      const notFound = () => new Errors.NOT_FOUND(`input[${i}]: item "${id}"`);
      const [, runId, callId] = /^(?:msg|fc)_([0-9a-f]{32})(?:_(.+))?$/.exec(id) ?? [];
      const run = runId ? await getRun(deps.db.db, runId) : undefined;
      if (!run || run.principal !== owner || !run.sessionId || run.status !== 'succeeded') throw notFound();
      if (id.startsWith('msg_')) return { type: 'message', role: 'assistant', content: run.output ?? '' };
      const history = await loadHistory(deps.db.db, run.sessionId, limit, { throughRunId: runId });
      const call = history.flatMap((m) => (m.toolCalls ?? []) as RunToolCall[]).find((c) => c.id === callId);
      if (!call) throw notFound();
      return { type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments };
    }),
  );
}

/** Refuses what this endpoint does not do, naming the field, rather than silently ignoring it. */
function refuseUnsupported(body: ResponsesBody): void {
  if (body.background !== undefined && body.background !== null && typeof body.background !== 'boolean') throw new Errors.VALIDATION('background must be a boolean');
  // OpenAI's rule: a background response is fetched later, so it must be kept.
  if (body.background === true && body.store === false) throw new Errors.VALIDATION('background: a background response must be stored; leave store out or set it to true');
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

/**
 * What `GET /responses/{id}` echoes of the request, kept in the run's request (`response`): the
 * settings every `Response` repeats, and the input items' roles as given (`developer` is sent to
 * the model as `system`).
 */
interface StoredResponse {
  model: string;
  instructions: string | null;
  previousResponseId: string | null;
  temperature: number | null;
  topP: number | null;
  maxOutputTokens: number | null;
  toolChoice: ResponseMeta['toolChoice'];
  tools?: ResponseMeta['tools'];
  parallelToolCalls?: boolean;
  metadata: Record<string, string>;
  textFormat: ResponseTextFormat;
  background: boolean;
  /** The roles of the input items, in order: the run's last messages (responses stored before inputItems). */
  inputRoles: string[];
  /** The input items as given (item references resolved), for `input_items`. */
  inputItems?: StoredInputItem[];
}

type StoredInputItem =
  | { type: 'message'; role: string; text: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string };

/** The input items, already checked by inputMessages, reduced to what `input_items` lists. */
function storedInputItems(input: unknown): StoredInputItem[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', text: input }];
  return (input as Array<Record<string, unknown>>).map((item, i): StoredInputItem => {
    if (item.type === 'function_call') return { type: 'function_call', call_id: String(item.call_id), name: String(item.name), arguments: String(item.arguments) };
    if (item.type === 'function_call_output') return { type: 'function_call_output', call_id: String(item.call_id), output: outputText(item.output, `input[${i}]`) };
    return { type: 'message', role: String(item.role), text: itemText(item.content, `input[${i}]`) };
  });
}

function storedResponseOf(meta: ResponseMeta, input: unknown): StoredResponse {
  const inputItems = storedInputItems(input);
  const inputRoles = inputItems.map((item) => (item.type === 'message' ? item.role : item.type));
  const { model, instructions, previousResponseId, temperature, topP, maxOutputTokens, toolChoice, tools, parallelToolCalls, metadata, textFormat, background } = meta;
  return { model, instructions, previousResponseId, temperature, topP, maxOutputTokens, toolChoice, tools, parallelToolCalls, metadata, textFormat, background, inputRoles, inputItems };
}

/**
 * Every input item is new to the session (the Responses API never resends earlier turns). A
 * background run keeps its events as a stream does (a client may read them later, from any
 * gateway); a stored one keeps what `GET /responses/{id}` echoes.
 */
function toRunRequest(body: ResponsesBody, messages: RunMessage[], tools: ReturnType<typeof responsesClientTools>, stored: StoredResponse | undefined): RunRequest {
  const params: NonNullable<RunRequest['params']> = {};
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  if (typeof body.max_output_tokens === 'number') params.max_tokens = body.max_output_tokens;
  const responseFormat = responseFormatOf(textFormatOf(body.text));
  if (responseFormat) params.response_format = responseFormat;
  const background = body.background === true;
  return {
    messages,
    sessionTurns: 'all',
    ...(body.stream === true || background ? { stream: true } : {}),
    ...(background ? { background: true } : {}),
    ...tools,
    ...(stored ? { response: stored as unknown as Record<string, unknown> } : {}),
    ...(Object.keys(params).length > 0 ? { params } : {}),
  };
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

/**
 * The conversation up to the previous response: its text messages, and the exchanges with the
 * client's tools (its `function_call_output` items answer them). The agent's own tool steps are
 * left out, so only the calls the client was given are kept of an assistant message.
 */
async function historyMessages(deps: GatewayDeps, previous: Previous, clientCallIds: Set<string>): Promise<RunMessage[]> {
  const limit = deps.config.current.agents.defaults.session.max_messages;
  const history = await loadHistory(deps.db.db, previous.session.id, limit, { throughRunId: previous.runId });
  const out: RunMessage[] = [];
  for (const m of history) {
    const calls = ((m.toolCalls ?? []) as RunToolCall[]).filter((c) => clientCallIds.has(c.id));
    if (m.role === 'assistant' && calls.length > 0) out.push({ role: 'assistant', content: m.content, tool_calls: calls });
    else if (m.role === 'tool' && m.toolCallId && clientCallIds.has(m.toolCallId)) out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    else if ((m.role === 'user' || m.role === 'assistant') && !m.toolCalls && m.content !== '') out.push({ role: m.role, content: m.content });
  }
  return out;
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
  if (!turn.store) {
    if (!previous) return { session: null, messages: turn.messages };
    // The calls this turn answers were the client's: the ones the history must keep.
    const answered = new Set(turn.messages.filter((m) => m.role === 'tool' && m.tool_call_id).map((m) => m.tool_call_id!));
    return { session: null, messages: [...(await historyMessages(deps, previous, answered)), ...turn.messages] };
  }
  const owner = sessionOwner(principal);
  const own = { sessionKey: responseIdOf(turn.runId) };
  // Going on from an earlier answer than the last branches the conversation there, as OpenAI does.
  const sessionKey = previous ? (await inTransaction(deps.db.db, (tx) => branchSessionAt(tx, previous.session, previous.runId, own))).sessionKey : own.sessionKey;
  return { session: { key: sessionKey, channel: CHANNEL, owner }, messages: turn.messages };
}

/** The `tool_choice` a response echoes: the Responses API names a function at the top level. */
function toolChoiceEcho(choice: RunRequest['toolChoice']): ResponseMeta['toolChoice'] {
  if (choice === undefined) return 'auto';
  return typeof choice === 'string' ? choice : { type: 'function', name: choice.function.name };
}

function metaOf(body: ResponsesBody, runId: string, store: boolean, createdAt = new Date()): ResponseMeta {
  const tools = responsesClientTools(body);
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
    toolChoice: toolChoiceEcho(tools.toolChoice),
    tools: (tools.clientTools ?? []).map((t) => ({ type: 'function' as const, name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null })),
    parallelToolCalls: tools.parallelToolCalls ?? false,
    metadata: body.metadata ?? {},
    textFormat: textFormatOf(body.text),
    background: body.background === true,
  };
}


const CreateResponse = answersItself({ body: ResponseCreateBody, response: { 200: ResponseObject } });
const RetrieveResponse = answersItself({ params: ResponseParams, querystring: ResponseRetrieveQuery, response: { 200: ResponseObject } });
const DeleteResponse = { params: ResponseParams, response: { 200: ResponseDeleted } };
const CancelResponse = { params: ResponseParams, response: { 200: ResponseObject } };
const ListInputItems = { params: ResponseParams, querystring: ResponseInputItemsQuery, response: { 200: ResponseItemList } };

/** `POST /responses`: checks as chat completions do, places the turn, then answers as JSON or SSE. */
function createResponse(deps: GatewayDeps, requireAgent: RequireAgent, heartbeatMs: number) {
  return async function createResponse(req: TypedRequest<typeof CreateResponse>, reply: TypedReply<typeof CreateResponse>): Promise<unknown> {
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
    const tools = responsesClientTools(body);
    const resolvedInput = await resolveReferences(deps, req.principal, body.input);
    const input = inputMessages(resolvedInput);
    const messages: RunMessage[] = body.instructions ? [{ role: 'system', content: body.instructions }, ...input] : input;
    const principal = req.principal;
    const agent = await requireAgent(body.model, principal);
    assertAgentTakesClientTools(agent, tools);
    const store = body.store !== false;
    const previous = body.previous_response_id ? await previousSession(deps, principal, body.previous_response_id, agent.id) : undefined;

    const background = body.background === true;
    const run = new ChatRun(deps, req, reply);
    try {
      const turn = await placeTurn(deps, principal, { agentId: agent.id, runId: run.runId, store, previous, messages });
      const meta = metaOf(body, run.runId, store);
      const request = toRunRequest(body, turn.messages, tools, store ? storedResponseOf(meta, resolvedInput) : undefined);
      const { session, started } = await run.start(
        { agentId: agent.id, session: turn.session, source: 'api', principal: sessionOwner(principal), request },
        { resumable: body.stream === true && resumptionRequested(req), detached: background },
      );
      if (!started) {
        req.log.info({ runId: run.runId }, 'run cancelled before it was enqueued: the client went away');
        reply.hijack();
        return reply;
      }
      req.log.info({ runId: run.runId, agentId: agent.id, stream: body.stream === true, background, sessionId: session?.id }, 'response run enqueued');
      // A background response is answered at once; its client reads it later (GET /responses/{id}).
      if (background && body.stream !== true) return responseObject(meta, { status: 'queued' });
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

/** A caller's stored response: its run, and what the request asked for. */
interface Stored {
  run: RunRecord;
  stored: StoredResponse;
  meta: ResponseMeta;
}

/**
 * The caller's own stored response. Another caller's, a chat completion's run, a `store: false`
 * response, a deleted one and an unknown id are the same 404: ids cannot be probed.
 */
async function storedResponse(deps: GatewayDeps, req: Pick<FastifyRequest, 'principal'>, id: string): Promise<Stored> {
  const notFound = () => new Errors.NOT_FOUND(`response "${id}"`);
  const runId = runIdOfResponse(id);
  if (!runId) throw notFound();
  const run = await getRun(deps.db.db, runId);
  const stored = (run?.request as { response?: StoredResponse } | null | undefined)?.response;
  if (!run || !stored || run.source !== 'api' || run.principal !== sessionOwner(req.principal)) throw notFound();
  const meta: ResponseMeta = {
    id: responseIdOf(run.id),
    itemId: `msg_${run.id}`,
    createdAt: Math.floor(run.createdAt.getTime() / 1000),
    store: true,
    model: stored.model,
    instructions: stored.instructions,
    previousResponseId: stored.previousResponseId,
    temperature: stored.temperature,
    topP: stored.topP,
    maxOutputTokens: stored.maxOutputTokens,
    toolChoice: stored.toolChoice,
    tools: stored.tools ?? [],
    parallelToolCalls: stored.parallelToolCalls ?? false,
    metadata: stored.metadata,
    textFormat: stored.textFormat,
    background: stored.background === true,
  };
  return { run, stored, meta };
}

/** The `Response` as the run stands: its stored answer, usage and error. */
function responseOfRun({ run, meta }: Stored): ResponseObject {
  const text = run.output === null || run.output === '' ? null : run.output;
  switch (run.status) {
    case 'queued':
      return responseObject(meta, { status: 'queued' });
    case 'running':
      return responseObject(meta, { status: 'in_progress' });
    case 'succeeded':
      return responseObject(meta, {
        status: 'completed',
        text: run.output ?? '',
        usage: run.usage as DoneEvent['usage'] | null,
        ...(run.finishedAt ? { completedAt: Math.floor(run.finishedAt.getTime() / 1000) } : {}),
      });
    case 'failed':
      return responseObject(meta, { status: 'failed', text, message: run.error ?? 'the run failed' });
    case 'cancelled':
      return responseObject(meta, { status: 'cancelled', text });
  }
}

/**
 * `GET /responses/{id}`: the response as it stands; with `stream=true`, its events from the start
 * (or after `starting_after`, a `sequence_number`), then live until it ends, as the original
 * stream had them (reuses the resume of chat/resume.ts, so any gateway can serve it).
 */
function retrieveResponse(deps: GatewayDeps, heartbeatMs: number) {
  return async function retrieveResponse(req: TypedRequest<typeof RetrieveResponse>, reply: TypedReply<typeof RetrieveResponse>): Promise<unknown> {
    const found = await storedResponse(deps, req, req.params.id);
    if (req.query.stream !== true) {
      if (req.query.starting_after !== undefined) throw new Errors.VALIDATION('starting_after needs stream=true');
      return responseOfRun(found);
    }
    const startingAfter = req.query.starting_after ?? -1;
    return resumeStream(deps, req, reply, found.run, -1, (control, relay) => streamResponse(control, req, reply, relay, found.meta, { heartbeatMs, startingAfter }), {
      // Past response.created and response.in_progress (0 and 1, which every stream begins with),
      // the client has some of the run's output.
      clientHasEvents: startingAfter > 1,
      reader: true,
    });
  };
}

/** `DELETE /responses/{id}`: a running response is cancelled first; later GETs find nothing. */
function deleteResponse(deps: GatewayDeps) {
  return async function deleteResponse(req: TypedRequest<typeof DeleteResponse>): Promise<ResponseDeleted> {
    const { run, meta } = await storedResponse(deps, req, req.params.id);
    if (!isFinalRunStatus(run.status)) await cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, run.id, 'the response was deleted');
    await deleteRun(deps.db.db, run.id);
    req.log.info({ runId: run.id }, 'response deleted');
    return { id: meta.id, object: 'response', deleted: true };
  };
}

/**
 * `POST /responses/{id}/cancel`: a background response's run is cancelled (its provider call
 * aborted); a finished one is answered as it stands. Only background responses can be
 * cancelled, as with OpenAI: a plain one ends when its client goes.
 */
function cancelResponse(deps: GatewayDeps) {
  return async function cancelResponse(req: TypedRequest<typeof CancelResponse>): Promise<ResponseObject> {
    const found = await storedResponse(deps, req, req.params.id);
    if (!found.meta.background) throw new Errors.VALIDATION(`response "${found.meta.id}" is not a background response: only those can be cancelled (a plain one ends when its client goes)`);
    if (!isFinalRunStatus(found.run.status)) {
      await cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, found.run.id, 'cancelled by its client (POST /responses/{id}/cancel)');
      req.log.info({ runId: found.run.id }, 'background response cancelled');
    }
    const run = (await getRun(deps.db.db, found.run.id)) ?? found.run;
    return responseOfRun({ ...found, run });
  };
}

/** The input items of a stored response: its last messages (the instructions are not an item). */
function inputItemsOf({ run, stored }: Stored): ResponseInputItem[] {
  if (stored.inputItems) {
    return stored.inputItems.map((item, i): ResponseInputItem => {
      const id = `${item.type === 'message' ? 'msg' : item.type === 'function_call' ? 'fcin' : 'fco'}_${run.id}_${i}`;
      if (item.type === 'function_call') return { type: 'function_call', id, call_id: item.call_id, name: item.name, arguments: item.arguments, status: 'completed' };
      if (item.type === 'function_call_output') return { type: 'function_call_output', id, call_id: item.call_id, output: item.output, status: 'completed' };
      if (item.role === 'assistant') return { type: 'message', id, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: item.text, annotations: [], logprobs: [] }] };
      return { type: 'message', id, role: item.role === 'developer' || item.role === 'system' ? item.role : 'user', status: 'completed', content: [{ type: 'input_text', text: item.text }] };
    });
  }
  const messages = (run.request as { messages?: RunMessage[] } | null)?.messages ?? [];
  const items = messages.slice(Math.max(0, messages.length - stored.inputRoles.length));
  return items.map((m, i): ResponseInputItem => {
    const id = `msg_${run.id}_${i}`;
    const role = stored.inputRoles[i];
    if (role === 'assistant') return { type: 'message', id, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: m.content, annotations: [], logprobs: [] }] };
    return { type: 'message', id, role: role === 'developer' || role === 'system' ? role : 'user', status: 'completed', content: [{ type: 'input_text', text: m.content }] };
  });
}

/** `GET /responses/{id}/input_items`: OpenAI's list, newest first unless `order=asc`, paged by `after`. */
function listInputItems(deps: GatewayDeps) {
  return async function listInputItems(req: TypedRequest<typeof ListInputItems>): Promise<ResponseItemList> {
    const found = await storedResponse(deps, req, req.params.id);
    const { limit = 20, order = 'desc', after } = req.query;
    const all = inputItemsOf(found);
    const ordered = order === 'asc' ? all : [...all].reverse();
    let start = 0;
    if (after !== undefined) {
      const at = ordered.findIndex((item) => item.id === after);
      if (at < 0) throw new Errors.VALIDATION(`after: "${after}" is not an input item of response "${found.meta.id}"`);
      start = at + 1;
    }
    const data = ordered.slice(start, start + limit);
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: start + limit < ordered.length };
  };
}

/**
 * `POST /responses`: OpenAI's Responses API for text, `model` being the agent id. Runs go through
 * `ChatRun` like chat completions; the response id is `resp_<runId>`, so a `previous_response_id`
 * leads to the run row and its session.
 */
export function responsesRoutes(app: FastifyInstance, deps: GatewayDeps, opts: { heartbeatMs: number }): void {
  const requireAgent = agentLookup(app, deps, 'responses');
  const api = typed(app);
  api.post('/responses', { config: { access: 'chat', rateLimit: 'chat', errors: 'openai' }, schema: CreateResponse }, tracedRoute('/api/v1/responses', createResponse(deps, requireAgent, opts.heartbeatMs)));
  const config = { access: 'chat', errors: 'openai' } as const;
  api.get('/responses/:id', { config, schema: RetrieveResponse }, tracedRoute('/api/v1/responses/:id', retrieveResponse(deps, opts.heartbeatMs)));
  api.delete('/responses/:id', { config, schema: DeleteResponse }, tracedRoute('/api/v1/responses/:id', deleteResponse(deps)));
  api.post('/responses/:id/cancel', { config: { ...config, bodyless: true }, schema: CancelResponse }, tracedRoute('/api/v1/responses/:id/cancel', cancelResponse(deps)));
  api.get('/responses/:id/input_items', { config, schema: ListInputItems }, tracedRoute('/api/v1/responses/:id/input_items', listInputItems(deps)));
}
