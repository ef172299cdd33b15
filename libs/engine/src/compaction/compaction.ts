import type { Logger } from 'pino';
import { Errors, hasCode } from '@agentry/errors';
import { getProvider, loadContext, saveCompaction, type Db, type ProviderRecord, type StoredSessionMessage } from '@agentry/db';
import { type AiAgentConfig, resolveModel } from '@agentry/definitions';
import type { ChatMessage, ModelCallRequest, ModelEvent } from '../models/types.js';
import { estimateTokens } from './tokens.js';

/** `agents.defaults.session.compaction` (the configuration's shape). */
export interface CompactionSettings {
  mode: 'off' | 'auto';
  strategy: 'summary' | 'sliding_window';
  keep_recent_count: number;
  target_tokens_percent: number;
  min_messages_to_compact: number;
}

/** The model a call resolves to, and its `context_window` when the provider lists one. */
export interface ModelInfo {
  provider: string;
  model: string;
  contextWindow?: number;
}

/** What compacting needs: the worker and the gateway each wire these. */
export interface CompactionDeps {
  db: Db;
  stream(req: ModelCallRequest): AsyncIterable<ModelEvent>;
}

/** The agent's `compaction` fields over the defaults. */
export function compactionSettings(defaults: CompactionSettings, agent: AiAgentConfig['compaction']): CompactionSettings {
  return {
    mode: agent?.mode ?? defaults.mode,
    strategy: agent?.strategy ?? defaults.strategy,
    keep_recent_count: agent?.keepRecentCount ?? defaults.keep_recent_count,
    target_tokens_percent: agent?.targetTokensPercent ?? defaults.target_tokens_percent,
    min_messages_to_compact: agent?.minMessagesToCompact ?? defaults.min_messages_to_compact,
  };
}

/** The token budget of a model's context, or undefined when its window is unknown. */
export function tokenBudget(info: ModelInfo | undefined, settings: CompactionSettings): number | undefined {
  if (!info?.contextWindow) return undefined;
  return Math.floor((info.contextWindow * settings.target_tokens_percent) / 100);
}

/**
 * Splits a history into what a summary replaces and the newest `keepRecent` messages kept as
 * they are. The cut never leaves a tool result without the assistant message that called it.
 */
export function splitForSummary(history: StoredSessionMessage[], keepRecent: number): { older: StoredSessionMessage[]; recent: StoredSessionMessage[] } {
  let cut = Math.max(0, history.length - keepRecent);
  while (cut > 0 && history[cut]?.role === 'tool') cut--;
  return { older: history.slice(0, cut), recent: history.slice(cut) };
}

const SUMMARY_INSTRUCTIONS = [
  'You compact a conversation so it can continue within a limited context.',
  'Write a concise summary of the conversation below: facts the user gave, decisions, open questions, results of tool calls that matter, and anything the assistant promised.',
  'Write only the summary, in the language of the conversation, with no preamble.',
].join(' ');
/** One message's text is cut to this many characters in the transcript (long tool outputs). */
const MAX_MESSAGE_CHARS = 4000;

/**
 * The transcript the summary call reads: the earlier summary, then the messages; cut from the
 * oldest end so it stays within `maxTokens` (estimated) and the summary call itself fits.
 */
export function summaryTranscript(previous: string | null, older: StoredSessionMessage[], maxTokens: number): string {
  const lines = older.map((m) => {
    const text = m.content.length > MAX_MESSAGE_CHARS ? `${m.content.slice(0, MAX_MESSAGE_CHARS)} …` : m.content;
    const calls = m.toolCalls ? ` [tool calls: ${JSON.stringify(m.toolCalls).slice(0, 500)}]` : '';
    return `${m.role}: ${text}${calls}`;
  });
  const head = previous ? [`Summary of what came before:\n${previous}`] : [];
  let used = estimateTokens(head.join('\n\n'));
  const kept: string[] = [];
  for (let i = lines.length - 1; i >= 0; i--) {
    used += estimateTokens(lines[i]!) + 1;
    if (used > maxTokens && kept.length > 0) break;
    kept.unshift(lines[i]!);
  }
  return [...head, ...kept].join('\n\n');
}

/** Asks the agent's model for the summary; throws when the call fails or answers nothing. */
export async function summarise(
  deps: CompactionDeps,
  turn: { config: AiAgentConfig; previous: string | null; older: StoredSessionMessage[]; budget: number; signal: AbortSignal },
): Promise<string> {
  const { config } = turn;
  const failover = (config.failover ?? []).filter((f): f is typeof f & { provider: string } => typeof f.provider === 'string');
  const messages: ChatMessage[] = [
    { role: 'system', content: SUMMARY_INSTRUCTIONS },
    // Half the budget for what is read leaves room for the answer.
    { role: 'user', content: summaryTranscript(turn.previous, turn.older, Math.max(256, Math.floor(turn.budget / 2))) },
  ];
  let text = '';
  for await (const ev of deps.stream({ provider: config.provider, model: config.model, failover, messages, signal: turn.signal, purpose: 'compaction' })) {
    if (ev.type === 'text') text += ev.text;
  }
  if (text.trim() === '') throw new Error('the model answered the summary request with no text');
  return text.trim();
}

/**
 * Summarises the older part of a session's context and stores it in their place (the originals
 * are marked compacted). Returns what is left to send, or undefined when nothing was old enough.
 */
export async function compactOlder(
  deps: CompactionDeps,
  turn: { sessionId: string; config: AiAgentConfig; settings: CompactionSettings; summary: string | null; history: StoredSessionMessage[]; budget: number; signal: AbortSignal },
): Promise<{ summary: string; recent: StoredSessionMessage[]; compacted: number } | undefined> {
  const { older, recent } = splitForSummary(turn.history, turn.settings.keep_recent_count);
  if (older.length === 0) return undefined;
  const summary = await summarise(deps, { config: turn.config, previous: turn.summary, older, budget: turn.budget, signal: turn.signal });
  const compacted = await saveCompaction(deps.db, turn.sessionId, summary, older.at(-1)!.id);
  return { summary, recent, compacted };
}

/**
 * `POST /sessions/{id}/compact`: compacts now, whatever the budget (all but the newest
 * `keep_recent_count` messages). A failed summary call is the caller's 502: nothing is stored.
 */
export async function compactSessionNow(
  deps: CompactionDeps & { logger: Logger },
  req: { sessionId: string; config: AiAgentConfig; settings: CompactionSettings; info: ModelInfo | undefined; limit: number; signal: AbortSignal },
): Promise<{ compacted: number; summary: string | null }> {
  const { summary, messages } = await loadContext(deps.db, req.sessionId, req.limit);
  // Without a known window the summary call still gets a bounded transcript.
  const budget = tokenBudget(req.info, req.settings) ?? 8192;
  let done;
  try {
    done = await compactOlder(deps, { ...req, summary, history: messages, budget });
  } catch (err) {
    // A spent budget is the caller's 429, not the model's failure.
    if (hasCode(err, Errors.RATE_LIMITED)) throw err;
    deps.logger.warn({ sessionId: req.sessionId, error: (err as Error).message }, 'forced compaction: the summary call failed');
    throw new Errors.UPSTREAM(`the model could not summarise the session: ${(err as Error).message}`);
  }
  if (!done) return { compacted: 0, summary };
  deps.logger.info({ sessionId: req.sessionId, compacted: done.compacted }, 'session compacted on request');
  return { compacted: done.compacted, summary: done.summary };
}

/** The model a request names, read from the provider's row (callers without a `ModelProviders` cache). */
export async function modelInfoFromDb(db: Db, defaultProvider: string, req: { provider?: string; model?: string }): Promise<ModelInfo | undefined> {
  const provider = req.provider || defaultProvider;
  const record = provider ? await getProvider(db, provider) : undefined;
  return record ? modelInfoOf(provider, record, req.model) : undefined;
}

/** The resolved model of a provider row, with its `context_window`. */
export function modelInfoOf(provider: string, record: ProviderRecord, requested: string | undefined): ModelInfo | undefined {
  const model = resolveModel(record, requested);
  if (!model) return undefined;
  const window = record.models.find((m) => m.name === model)?.context_window;
  return { provider, model, ...(window !== undefined ? { contextWindow: window } : {}) };
}
