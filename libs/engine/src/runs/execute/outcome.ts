import type { RunRequest } from '@agentry/contracts';
import { isAppError, type AppError } from '@agentry/errors';
import { appendMessages, appendUnfinishedTurn, finishRun, isDatabaseUnavailable, type JsonValue, type SessionMessage } from '@agentry/db';
import { ScriptError } from '../../sandbox/sandbox.js';
import { isHeartbeatOk } from '@agentry/runs';
import type { ChainTraceEntry } from '../../chain/runner.js';
import type { Answer } from './chain-run.js';
import { retryWhileDbDown } from './db-retry.js';
import type { AgentRun } from './deps.js';
import type { RunProgress } from './progress.js';
import { boundSteps } from './run-steps.js';

type Usage = { promptTokens: number; completionTokens: number; totalTokens: number };

/**
 * Commits the answer (the run's output, the turn appended to the session, the reply to a chat)
 * and then sends `done`. False when the run had already ended elsewhere (the gateway cancelled
 * it). A completed turn is appended in the transaction that marks the run succeeded, and `done`
 * goes out only after that commit, so the next turn of the session sees it.
 */
export async function deliverAnswer(
  { deps, run }: AgentRun,
  progress: RunProgress,
  asked: { request: RunRequest; newTurns: SessionMessage[] },
  answer: Answer,
  answering?: ChainTraceEntry,
): Promise<boolean> {
  const { log } = progress;
  const output = (progress.output = answer.output);
  const usage: JsonValue | null = answer.usage;
  const turn = [...asked.newTurns, ...answer.added.map(sessionMessage)];
  // A heartbeat answered with the no-op token is neither sent nor kept: the session would fill
  // with check-ins that say nothing, and each would cost context on the next beat.
  const quiet = run.source === 'heartbeat' && isHeartbeatOk(output);
  const keep = Boolean(run.sessionId) && !quiet;
  const reply = quiet ? undefined : asked.request.reply;
  let replyId: string | undefined;
  // The answering ai/agent node is still running (its entry comes when it returns): it is added here.
  // Whole seconds: the done event tells this time and GET /responses/{id} reads it back, equal.
  const finishedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
  const finish = { status: 'succeeded' as const, output, usage, streamed: progress.streamed, finishedAt, ...stepsOf(progress, answering) };
  // All or nothing, retried while the database is away: a repeat after a lost commit finds
  // the run ended and writes nothing (the relay then reads the stored answer). One UPDATE is
  // atomic on its own: the transaction (two more round trips) only when rows go with it.
  const alone = !keep && !reply;
  const committed = await retryWhileDbDown(log, 'commit the answer', () =>
    alone
      ? finishRun(deps.db, run.id, finish)
      : deps.db.transaction().execute(async (tx) => {
          replyId = undefined;
          const ok = await finishRun(tx, run.id, finish);
          if (ok && keep) await appendMessages(tx, run.sessionId!, run.id, turn);
          if (ok && reply) replyId = await deps.replies.queue(tx, run.id, reply, output);
          return ok;
        }),
  );
  await deps.replies.enqueue(replyId, log);
  if (!committed) {
    log.info('run ended elsewhere (cancelled) before it could complete');
    return false;
  }
  const toolCalls = answer.clientCalls?.length ? { toolCalls: answer.clientCalls } : {};
  await progress.emit({ type: 'done', finishReason: answer.finishReason, finishedAt: finishedAt.getTime() / 1000, ...toolCalls, ...(usage ? { usage: usage as Usage } : {}) });
  deps.delivered();
  const tokens = usage as Partial<Usage> | null;
  progress.count('succeeded');
  log.info({ chars: output.length, ...progress.timing(), ...(tokens ? { promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens } : {}) }, 'run succeeded');
  return true;
}

/** The run's steps for its finish: the chain's trace, or what a lone agent noted (refused tools); none without either. */
function stepsOf(progress: RunProgress, pending?: ChainTraceEntry): { steps?: JsonValue[] } {
  // A chain that failed to load ran no node, and a lone agent notes only refusals: nothing else to replay.
  const trace = progress.chainTrace ?? progress.notes;
  if (trace.length === 0 && !pending) return {};
  return { steps: boundSteps(trace, pending ? [pending] : []) };
}

function sessionMessage(m: Answer['added'][number]): SessionMessage {
  return {
    role: m.role,
    content: m.content,
    ...(m.tool_calls ? { toolCalls: m.tool_calls as JsonValue } : {}),
    ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}),
  };
}

/**
 * The question and what was streamed of a turn that ended without an answer, for its session
 * (marked, so the model never gets it as context: docs/web-ui.md). Nothing without a session or
 * a user message (a malformed stored request has none to show).
 */
function unfinishedTurn(run: AgentRun['run'], output: string): SessionMessage[] {
  const messages = (run.request as Partial<RunRequest> | null)?.messages;
  if (!run.sessionId || !Array.isArray(messages)) return [];
  // What the turn asked: the user messages after the request's last assistant message.
  const lastAssistant = messages.map((m) => m?.role).lastIndexOf('assistant');
  const asked: SessionMessage[] = messages
    .slice(lastAssistant + 1)
    .filter((m) => m?.role === 'user' && typeof m.content === 'string')
    .map((m) => ({ role: 'user', content: m.content }));
  return asked.length === 0 ? [] : [...asked, { role: 'assistant', content: output }];
}

/**
 * A cancelled run keeps what it had streamed, and its session keeps the turn marked `stopped`
 * (usually the gateway marked the run first, when its client stopped; the turn is still this
 * worker's to write, once).
 */
export async function endCancelled({ deps, run, signal }: AgentRun, progress: RunProgress): Promise<void> {
  const { log } = progress;
  const turn = unfinishedTurn(run, progress.output);
  await retryWhileDbDown(log, 'cancel run', () =>
    deps.db.transaction().execute(async (tx) => {
      await finishRun(tx, run.id, { status: 'cancelled', output: progress.output || null, error: 'cancelled', streamed: progress.streamed, ...stepsOf(progress) });
      if (run.sessionId) await appendUnfinishedTurn(tx, run.sessionId, run.id, { status: 'stopped', error: 'stopped before the answer was complete', messages: turn });
    }),
  );
  progress.count('cancelled');
  log.info({ reason: String((signal.reason as Error | undefined)?.message ?? signal.reason), ...progress.timing() }, 'run cancelled');
}

/**
 * A failed run: its status and message come from the registered error it is or wraps, the
 * database's absence is a 503, anything else a 500 without details. A chat it came from is told
 * (cron and heartbeat deliveries stay silent); the session keeps the turn marked `failed` with the message.
 */
export async function endFailed({ deps, run }: AgentRun, progress: RunProgress, err: unknown): Promise<void> {
  const { log } = progress;
  const { message, status, known } = failureOf(err);
  progress.count('failed');
  // A script's failure is its author's to read in the answer: no stack for the operator.
  if (status >= 500 && !(known instanceof ScriptError)) log.error({ err, ...progress.timing() }, 'run failed');
  else log.info({ err: message, ...(known ? { code: known.code } : {}), ...progress.timing() }, 'run failed');
  let noticeId: string | undefined;
  const reply = (run.request as Partial<RunRequest> | null)?.reply;
  await retryWhileDbDown(log, 'fail run', () =>
    deps.db.transaction().execute(async (tx) => {
      noticeId = undefined;
      const ok = await finishRun(tx, run.id, { status: 'failed', output: progress.output || null, error: message, streamed: progress.streamed, ...stepsOf(progress) });
      if (ok && run.sessionId) await appendUnfinishedTurn(tx, run.sessionId, run.id, { status: 'failed', error: message, messages: unfinishedTurn(run, progress.output) });
      // A chat user would otherwise wait for an answer that never comes.
      if (ok && reply && run.source !== 'cron' && run.source !== 'heartbeat') noticeId = await deps.replies.queue(tx, run.id, reply, failureNotice(message));
    }),
  );
  await deps.replies.enqueue(noticeId, log);
  await progress.emit({ type: 'error', message, status });
}

/** A failed run tells the chat so, briefly: silence would look like a lost message. */
function failureNotice(error: string): string {
  return `Sorry, I could not answer that: ${error}`;
}

/**
 * A rule chain wraps a node's failure (ChainError, cause = the provider's AppError): the
 * registered error inside decides the status, the wrapper's message says where it happened.
 */
function failureOf(err: unknown): { message: string; status: number; known: AppError | undefined } {
  const known = registeredCause(err);
  if (known) return { message: (err as Error).message, status: known.status, known };
  if (isDatabaseUnavailable(err)) return { message: 'the database was unavailable; please retry', status: 503, known };
  return { message: 'the agent failed unexpectedly', status: 500, known };
}

/** The registered error a failure is or wraps (through `cause`, a few levels at most), if any. */
function registeredCause(err: unknown): AppError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e instanceof Error; depth++, e = e.cause) if (isAppError(e)) return e;
  return undefined;
}
