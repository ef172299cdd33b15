import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Value } from 'typebox/value';
import { Errors } from '@agentry/errors';
import { ChatCompletionBody, ModelInfo, ModelList, ModelParams, ResponseFormat, type RunMessage, type RunRequest } from '@agentry/contracts';
import { getRuleChain, listRuleChains, type RuleChainRow } from '@agentry/db';
import { isAgentDisabled } from '@agentry/runs';
import { serviceMetrics, tracedRoute } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { ChatRun } from '../chat/chat-run.js';
import { agentLookup, type RequireAgent } from '../chat/agent-lookup.js';
import { awaitCompletion, streamCompletion } from '../chat/openai-answer.js';
import { assertAgentTakesClientTools, chatClientTools, toolCallsOf } from '../chat/client-tools.js';
import { sessionOwner } from '../auth/ownership.js';
import { mayChatWith } from '../auth/audience.js';
import { enforceBudget } from '../auth/budget.js';
import { resumeChatStream, resumeRequested, resumptionRequested } from '../chat/resume.js';
import { typed, type TypedReply, type TypedRequest } from './common.js';

type ChatBody = ChatCompletionBody;

/** Text of a message: a string, or its text content parts joined; other parts are refused. */
function textOf(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new Errors.VALIDATION(`${where}.content must be a string or an array of content parts`);
  return (content as Array<{ type?: unknown; text?: unknown } | null>)
    .map((part, i) => {
      if (!part || typeof part !== 'object' || part.type !== 'text' || typeof part.text !== 'string') {
        throw new Errors.VALIDATION(`${where}.content[${i}]: only text content parts are supported (got ${JSON.stringify((part as { type?: unknown } | null)?.type)})`);
      }
      return part.text;
    })
    .join('\n');
}

/**
 * Fields a client relies on that an agent cannot honour are refused rather than dropped: the
 * answer would look right and be wrong (one choice instead of n).
 */
function refuseUnsupported(body: ChatBody): void {
  if (typeof body.n === 'number' && body.n > 1) throw new Errors.VALIDATION(`n must be 1: an agent gives one answer per request (got n = ${body.n})`);
}

/** One message of the client's history: its text, and a client tool exchange's calls and call id. */
function runMessage(m: ChatBody['messages'][number], i: number): RunMessage {
  const where = `messages[${i}]`;
  const message: RunMessage = { role: m.role === 'developer' ? 'system' : m.role, content: textOf(m.content, where) };
  const calls = m.role === 'assistant' ? toolCallsOf((m as { tool_calls?: unknown }).tool_calls, where) : undefined;
  if (calls?.length) message.tool_calls = calls;
  if (m.role === 'tool') {
    const id = (m as { tool_call_id?: unknown }).tool_call_id;
    if (typeof id !== 'string' || id === '') throw new Errors.VALIDATION(`${where}.tool_call_id must name the tool call this message answers`);
    message.tool_call_id = id;
  }
  return message;
}

/** `response_format` for the model call; `text` is the default and not sent. */
function responseFormatOf(value: unknown): ResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'object' && (value as { type?: unknown }).type === 'text' && Object.keys(value).length === 1) return undefined;
  if (!Value.Check(ResponseFormat, value)) {
    throw new Errors.VALIDATION('response_format must be {type: "text"}, {type: "json_object"} or {type: "json_schema", json_schema: {name, schema?, description?, strict?}}');
  }
  return value;
}

function toRunRequest(body: ChatBody): RunRequest {
  refuseUnsupported(body);
  const messages = body.messages.map(runMessage);
  const params: NonNullable<RunRequest['params']> = {};
  const responseFormat = responseFormatOf(body.response_format);
  if (responseFormat) params.response_format = responseFormat;
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (typeof maxTokens === 'number') params.max_tokens = maxTokens;
  const stop = body.stop;
  if (typeof stop === 'string' || (Array.isArray(stop) && stop.length <= 4 && stop.every((x) => typeof x === 'string'))) params.stop = stop as string | string[];
  else if (stop !== undefined && stop !== null) throw new Errors.VALIDATION('stop must be a string or an array of up to 4 strings');
  const request: RunRequest = { messages, ...(body.stream === true ? { stream: true } : {}), ...chatClientTools(body) };
  return Object.keys(params).length > 0 ? { ...request, params } : request;
}

const ListModels = { response: { 200: ModelList } };
const GetModel = { params: ModelParams, response: { 200: ModelInfo } };
const CreateCompletion = { body: ChatCompletionBody };

/** Whether the caller may see (and chat with) an agent: shared with it, and an API account bound to agents sees those only. */
function visibleTo(req: Pick<FastifyRequest, 'principal'>): (agent: RuleChainRow) => boolean {
  const principal = req.principal;
  const bound = principal.kind === 'account' ? principal.agents : undefined;
  return (agent) => (!bound || bound.includes(agent.id)) && mayChatWith(principal, agent);
}

function modelOf(agent: { id: string; createdAt: Date }): ModelInfo {
  return { id: agent.id, object: 'model', created: Math.floor(agent.createdAt.getTime() / 1000), owned_by: 'agentry' };
}

/** OpenAI's model list: every enabled agent the caller may chat with. */
function listModels(deps: GatewayDeps) {
  return async function listModels(req: TypedRequest<typeof ListModels>): Promise<ModelList> {
    const visible = visibleTo(req);
    const agents = (await listRuleChains(deps.db.db, { kind: 'agent' })).filter((a) => visible(a) && !isAgentDisabled(a.dsl));
    return { object: 'list', data: agents.map(modelOf) };
  };
}

/**
 * OpenAI's model retrieve (`models.retrieve`): one agent of the list. An agent the caller may
 * not see is not found, as it is missing from the list, rather than forbidden.
 */
function getModel(deps: GatewayDeps) {
  return async function getModel(req: TypedRequest<typeof GetModel>): Promise<ModelInfo> {
    const row = await getRuleChain(deps.db.db, req.params.id);
    if (!row || row.kind !== 'agent' || !visibleTo(req)(row) || isAgentDisabled(row.dsl)) throw new Errors.NOT_FOUND(`model "${req.params.id}"`);
    return modelOf(row);
  };
}

/**
 * `POST /chat/completions` (OpenAI-compatible; `model` is the agent id), `GET /models` and `GET /models/{id}`.
 * The run row is committed before its job is enqueued, and the gateway listens on `run:<id>`
 * before enqueueing, so no event can be missed; it relays them as one body or as SSE chunks.
 */
export function chatRoutes(app: FastifyInstance, deps: GatewayDeps, opts: { heartbeatMs: number }): void {
  const requireAgent = agentLookup(app, deps, 'chat');

  const api = typed(app);
  api.get('/models', { config: { access: 'chat', errors: 'openai' }, schema: ListModels }, listModels(deps));
  api.get('/models/:id', { config: { access: 'chat', errors: 'openai' }, schema: GetModel }, getModel(deps));

  api.post(
    '/chat/completions',
    { config: { access: 'chat', rateLimit: 'chat', errors: 'openai' }, schema: CreateCompletion },
    tracedRoute('/api/v1/chat/completions', createCompletion(deps, requireAgent, opts.heartbeatMs)),
  );
}

/** `POST /chat/completions`: places the run, then answers as one body or as SSE chunks (AG-UI events on request). */
function createCompletion(deps: GatewayDeps, requireAgent: RequireAgent, heartbeatMs: number) {
  return async function createCompletion(req: TypedRequest<typeof CreateCompletion>, reply: TypedReply<typeof CreateCompletion>): Promise<unknown> {
    const body = req.body;
    const agui = String(req.headers['x-stream-protocol'] ?? '').toLowerCase() === 'agui';
    const includeUsage = body.stream_options?.include_usage === true;
    // A client that lost its stream sends the same request again with the last event id it got: it resumes that run.
    const resume = await resumeRequested(deps, req, body);
    if (resume) return resumeChatStream(deps, req, reply, resume.run, resume.after, { agui, includeUsage, heartbeatMs });
    await enforceBudget(deps.bus, deps.logger, req, reply);
    const request = toRunRequest(body);
    const principal = req.principal;
    const agent = await requireAgent(body.model, principal);
    assertAgentTakesClientTools(agent, request);

    const run = new ChatRun(deps, req, reply);
    try {
      const { session, started } = await run.start({
        agentId: agent.id,
        // The caller's own conversation: another principal's same sessionId names another session.
        session: body.sessionId ? { key: body.sessionId, channel: 'api', owner: sessionOwner(principal) } : null,
        source: 'api',
        principal: sessionOwner(principal),
        request,
      }, { resumable: body.stream === true && resumptionRequested(req) });
      if (!started) {
        req.log.info({ runId: run.runId }, 'run cancelled before it was enqueued: the client went away');
        reply.hijack();
        return reply;
      }
      // The client's `user` (OpenAI's end-user id, for abuse tracing) is kept here only: in the run's log line.
      const user = typeof body.user === 'string' ? { user: body.user } : {};
      req.log.info({ runId: run.runId, agentId: agent.id, stream: body.stream === true, sessionId: session?.id, ...user }, 'run enqueued');
      const meta = { id: `chatcmpl-${run.runId}`, created: Math.floor(Date.now() / 1000), model: body.model };
      if (body.stream !== true) return await awaitCompletion(run, reply, run.relay(), meta);
      const streams = serviceMetrics.activeStreams(deps.metrics);
      streams.inc();
      reply.raw.once('close', () => streams.dec());
      await streamCompletion(run, req, reply, run.relay(), meta, {
        agui,
        includeUsage,
        heartbeatMs,
        headersAfterMs: deps.config.current.server.stream_headers_after_ms,
        openOnRetry: resumptionRequested(req),
      });
      return reply;
    } finally {
      await run.close().catch((err: unknown) => req.log.warn({ err }, 'unsubscribe failed'));
    }
  };
}
