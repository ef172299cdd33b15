import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Type, { type Static } from 'typebox';
import { AppError, Errors } from '@agentry/errors';
import { PubSubChannels, type RunEvent, type RunRequest } from '@agentry/contracts';
import { getRuleChain, getRunOutcome, listRuleChains, type RunOutcome } from '@agentry/db';
import { AgentCache, cancelRun, newRunId, submitRun } from '@agentry/engine';
import { serviceMetrics } from '@agentry/runtime';
import type { GatewayDeps } from '../deps.js';
import { EventGapError, RunEventQueue } from '../chat/run-events.js';
import { RunRelay, storedEnding } from '../chat/run-relay.js';
import { sessionOwner } from '../auth/ownership.js';

const Role = Type.Union([Type.Literal('system'), Type.Literal('developer'), Type.Literal('user'), Type.Literal('assistant'), Type.Literal('tool')]);
// `content` and `stop` are checked by hand: fastify's ajv coerces types, and inside a union it
// would turn 42 into "42" or ["END"] into "END" instead of refusing or keeping them.
const Message = Type.Object({ role: Role, content: Type.Unknown() }, { additionalProperties: true });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));
const ChatBody = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    messages: Type.Array(Message, { minItems: 1 }),
    stream: Nullable(Type.Boolean()),
    stream_options: Nullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, { additionalProperties: true })),
    sessionId: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    temperature: Nullable(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Nullable(Type.Number({ minimum: 0, maximum: 1 })),
    max_tokens: Nullable(Type.Integer({ minimum: 1 })),
    max_completion_tokens: Nullable(Type.Integer({ minimum: 1 })),
    stop: Type.Optional(Type.Unknown()),
  },
  // OpenAI clients send many more fields (n, user, tools, ...): accepted and ignored.
  { additionalProperties: true },
);
type ChatBody = Static<typeof ChatBody>;
type DoneEvent = Extract<RunEvent, { type: 'done' }>;

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

function toRunRequest(body: ChatBody): RunRequest {
  const messages = body.messages.map((m, i) => ({
    role: m.role === 'developer' ? ('system' as const) : m.role,
    content: textOf(m.content, `messages[${i}]`),
  }));
  const params: NonNullable<RunRequest['params']> = {};
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (typeof maxTokens === 'number') params.max_tokens = maxTokens;
  const stop = body.stop;
  if (typeof stop === 'string' || (Array.isArray(stop) && stop.length <= 4 && stop.every((x) => typeof x === 'string'))) params.stop = stop as string | string[];
  else if (stop !== undefined && stop !== null) throw new Errors.VALIDATION('stop must be a string or an array of up to 4 strings');
  return Object.keys(params).length > 0 ? { messages, params } : { messages };
}

function usageOf(event: Pick<DoneEvent, 'usage'>) {
  const u = event.usage;
  return { prompt_tokens: u?.promptTokens ?? 0, completion_tokens: u?.completionTokens ?? 0, total_tokens: u?.totalTokens ?? 0 };
}

/**
 * `POST /chat/completions` (OpenAI-compatible; `model` is the agent id) and `GET /models`.
 * The run row is committed before its job is enqueued, and the gateway listens on `run:<id>`
 * before enqueueing, so no event can be missed; it relays them as one body or as SSE chunks.
 */
export function chatRoutes(app: FastifyInstance, deps: GatewayDeps, opts: { heartbeatMs: number }): void {
  // Agent rows for the chat path, kept until `invalidate {area:'agents', id}` (or 5 s). Until the
  // subscription is in place the cache is not used, so no invalidation can be missed.
  const agents = new AgentCache(deps.db.db, { load: (id) => getRuleChain(deps.db.db, id) });
  let following = false;
  const follow = agents.follow(deps.bus.pubsub).then(
    (unsubscribe) => {
      following = true;
      return unsubscribe;
    },
    (err: unknown) => {
      deps.logger.warn({ err }, 'chat: no agent invalidations; agents are read on every request');
      return undefined;
    },
  );
  app.addHook('onClose', async () => {
    following = false;
    await (await follow)?.().catch(() => undefined);
  });
  const requireAgent = async (agentId: string) => {
    const row = following ? await agents.get(agentId) : await getRuleChain(deps.db.db, agentId);
    if (!row || row.kind !== 'agent') throw new Errors.NOT_FOUND(`agent "${agentId}"`);
    return row;
  };

  app.get('/models', { config: { access: 'chat' } }, async (req) => {
    const principal = req.principal;
    const bound = principal.kind === 'account' ? principal.agents : undefined;
    const agents = (await listRuleChains(deps.db.db, { kind: 'agent' })).filter((a) => !bound || bound.includes(a.id));
    return {
      object: 'list',
      data: agents.map((a) => ({ id: a.id, object: 'model', created: Math.floor(a.createdAt.getTime() / 1000), owned_by: 'agentry' })),
    };
  });

  app.post<{ Body: ChatBody }>('/chat/completions', { config: { access: 'chat', rateLimit: 'chat' }, schema: { body: ChatBody } }, async (req, reply) => {
    const body = req.body;
    const request = toRunRequest(body);
    const agent = await requireAgent(body.model);
    const principal = req.principal;
    if (principal.kind === 'account' && principal.agents && !principal.agents.includes(agent.id)) {
      throw new Errors.FORBIDDEN(`api account "${principal.accountId}" is bound to ${principal.agents.map((a) => `"${a}"`).join(', ')}, not to agent "${agent.id}"`);
    }

    const runId = newRunId();
    const queue = new RunEventQueue();
    // Listening on run:<id> must be in place before the job is enqueued; it runs alongside the insert.
    const subscribed = deps.bus.pubsub.subscribe(PubSubChannels.run(runId), (m) => queue.push(m));
    subscribed.catch(() => undefined);
    const unsubscribe = async () => (await subscribed.catch(() => undefined as undefined | (() => Promise<void>)))?.();
    let settled = false;
    const cancel = async (why: string) => {
      if (settled) return;
      settled = true;
      req.log.info({ runId, why }, 'run cancelled by the gateway');
      await cancelRun({ db: deps.db.db, pubsub: deps.bus.pubsub }, runId, why);
    };
    // Listened for from the start: a client that leaves while the run is being created must not
    // have it enqueued (its close would otherwise go unheard, and the run be answered for nobody).
    const clientGone = new AbortController();
    reply.raw.once('close', () => clientGone.abort());
    try {
      const { session, cancelled } = await submitRun(
        { db: deps.db.db, queue: deps.bus.queue },
        {
          agentId: agent.id,
          // The caller's own conversation: another principal's same sessionId names another session.
          session: body.sessionId ? { key: body.sessionId, channel: 'api', owner: sessionOwner(principal) } : null,
          source: 'api',
          request,
          runId,
          beforeEnqueue: subscribed,
          signal: clientGone.signal,
        },
      );
      if (cancelled) {
        settled = true;
        req.log.info({ runId }, 'run cancelled before it was enqueued: the client went away');
        reply.hijack();
        return reply;
      }
      req.log.info({ runId, agentId: agent.id, stream: body.stream === true, sessionId: session?.id }, 'run enqueued');

      // Streaming or not, a client that goes away cancels its run.
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) void cancel('the client went away');
      });
      if (clientGone.signal.aborted) void cancel('the client went away');

      const meta = { id: `chatcmpl-${runId}`, created: Math.floor(Date.now() / 1000), model: body.model };
      const relay = new RunRelay(queue, {
        readRun: () => getRunOutcome(deps.db.db, runId),
        checkMs: () => deps.config.current.reliability.relay_check_ms,
        closed: clientGone.signal,
      });
      if (body.stream === true) {
        const streams = serviceMetrics.activeStreams(deps.metrics);
        streams.inc();
        reply.raw.once('close', () => streams.dec());
        await relayStream(req, reply, relay, meta, {
          agui: String(req.headers['x-stream-protocol'] ?? '').toLowerCase() === 'agui',
          includeUsage: body.stream_options?.include_usage === true,
          heartbeatMs: opts.heartbeatMs,
          onGap: () => cancel('event stream gap'),
          onEnd: () => {
            settled = true;
          },
        });
        return reply;
      }

      let content = '';
      for (;;) {
        let next: Awaited<ReturnType<RunRelay['next']>>;
        try {
          next = await relay.next();
        } catch (err) {
          if (err instanceof EventGapError) {
            await cancel('event stream gap');
            throw new Errors.INTERNAL(err.message);
          }
          throw err;
        }
        // Nobody reads the answer any more (the close handler has cancelled the run): send nothing.
        if (next.type === 'closed') {
          reply.hijack();
          return reply;
        }
        if (next.type === 'ended') {
          settled = true;
          return storedCompletion(next.run, meta);
        }
        const event = next.event;
        if (event.type === 'text') content += event.text;
        else if (event.type === 'error') {
          settled = true;
          throw new AppError('RUN_FAILED', event.status && event.status >= 400 ? event.status : 502, event.message);
        } else if (event.type === 'done') {
          settled = true;
          return {
            ...meta,
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: event.finishReason }],
            usage: usageOf(event),
          };
        }
      }
    } finally {
      await unsubscribe().catch((err: unknown) => req.log.warn({ err }, 'unsubscribe failed'));
    }
  });
}

/**
 * The non-stream answer of a run whose events were lost but whose outcome is stored: its output,
 * or its stored error with the status the event would have carried.
 */
function storedCompletion(run: RunOutcome | undefined, meta: { id: string; created: number; model: string }) {
  const ending = storedEnding(run, '');
  if ('error' in ending) throw new AppError('RUN_FAILED', ending.status, ending.error);
  const usage = run?.usage as DoneEvent['usage'] | null | undefined;
  return {
    ...meta,
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: ending.rest }, finish_reason: 'stop' }],
    usage: usageOf({ usage: usage ?? undefined }),
  };
}

/** Writes the run's events as OpenAI `chat.completion.chunk` SSE lines. */
async function relayStream(
  req: FastifyRequest,
  reply: FastifyReply,
  relay: RunRelay,
  meta: { id: string; created: number; model: string },
  opts: { agui: boolean; includeUsage: boolean; heartbeatMs: number; onGap: () => Promise<void>; onEnd: () => void },
): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-request-id': String(req.id),
  });
  // Every chunk written in one turn of the event loop leaves in one write: events that arrive
  // together (a burst from the model, a busy Redis connection) cost one syscall, not one each.
  let corked = false;
  const send = (data: unknown) => {
    if (raw.destroyed) return;
    if (!corked) {
      corked = true;
      raw.cork();
      process.nextTick(() => {
        corked = false;
        raw.uncork();
      });
    }
    raw.write(`data: ${JSON.stringify(data)}\n\n`);
  };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    send({ ...meta, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] });
  // Comment lines keep idle streams alive through proxies while the agent thinks.
  const heartbeat = setInterval(() => {
    if (!raw.destroyed) raw.write(': ping\n\n');
  }, opts.heartbeatMs);
  // The text since the last tool event: what a stored answer must start with to be completed.
  let sinceTool = '';
  const finish = (finishReason: string, usage: DoneEvent['usage'] | null) => {
    opts.onEnd();
    chunk({ content: '' }, finishReason);
    if (opts.includeUsage) send({ ...meta, object: 'chat.completion.chunk', choices: [], usage: usageOf({ usage: usage ?? undefined }) });
    if (!raw.destroyed) raw.write('data: [DONE]\n\n');
  };
  try {
    chunk({ role: 'assistant', content: '' });
    for (;;) {
      let event: RunEvent;
      try {
        const next = await relay.next();
        if (next.type === 'closed') return;
        if (next.type === 'ended') {
          // Its last events were lost (see RunRelay): end from what is stored.
          const ending = storedEnding(next.run, sinceTool);
          if ('error' in ending) {
            opts.onEnd();
            send({ error: { message: ending.error, type: ending.status < 500 ? 'invalid_request_error' : 'server_error', code: ending.status } });
            return;
          }
          if (ending.rest) chunk({ content: ending.rest });
          finish('stop', (next.run?.usage ?? null) as DoneEvent['usage'] | null);
          return;
        }
        event = next.event;
      } catch (err) {
        if (!(err instanceof EventGapError)) throw err;
        await opts.onGap();
        send({ error: { message: err.message, type: 'server_error', code: 500 } });
        return;
      }
      if (event.type === 'tool_start' || event.type === 'tool_result') sinceTool = '';
      switch (event.type) {
        case 'text':
          sinceTool += event.text;
          chunk({ content: event.text });
          break;
        case 'tool_start':
          if (opts.agui) {
            chunk({
              tool_calls: [
                { type: 'TOOL_CALL_START', toolCallId: event.toolCallId, toolCallName: event.toolName, arguments: event.arguments, toolType: event.toolType },
              ],
            });
          }
          break;
        case 'tool_result':
          if (opts.agui) {
            chunk({
              tool_calls: [
                {
                  type: 'TOOL_CALL_RESULT',
                  toolCallId: event.toolCallId,
                  toolCallName: event.toolName,
                  content: event.content,
                  toolType: event.toolType,
                  ...(event.isError ? { isError: true } : {}),
                },
              ],
            });
          }
          break;
        case 'error':
          opts.onEnd();
          // A failure after the stream started: one error event, then the stream closes without [DONE].
          send({ error: { message: event.message, type: event.status && event.status < 500 ? 'invalid_request_error' : 'server_error', code: event.status ?? 502 } });
          return;
        case 'done':
          finish(event.finishReason, event.usage ?? null);
          return;
        default: {
          const never: never = event;
          req.log.warn({ event: never }, 'unknown run event');
        }
      }
    }
  } finally {
    clearInterval(heartbeat);
    if (!raw.destroyed) raw.end();
  }
}
