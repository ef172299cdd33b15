import type { RunRequest } from '@agentry/contracts';
import { loadContext, type StoredSessionMessage } from '@agentry/db';
import type { AiAgentConfig } from '@agentry/definitions';
import { compactOlder, compactionSettings, tokenBudget, type CompactionSettings } from '../../compaction/compaction.js';
import { conversationTokens, conversationTokensAtMost, messageTokens, tokenCounter, type TokenCounter } from '../../compaction/tokens.js';
import type { ChatMessage } from '../../models/types.js';
import { buildConversation } from './conversation.js';
import type { AgentRun } from './deps.js';

type Conversation = ReturnType<typeof buildConversation>;

/**
 * A session turn's conversation, within the budget of the agent's model
 * (`target_tokens_percent` of its `context_window`). Over it, with `mode: auto`: `summary` has
 * the model summarise all but the newest `keep_recent_count` stored messages into a stored
 * summary sent in their place (once `min_messages_to_compact` are in the context); what still
 * does not fit, or a failed summary call, or `sliding_window`, leaves the oldest messages out of
 * this turn (logged). A model without a `context_window` is never compacted.
 */
export async function sessionConversation(
  ctx: AgentRun,
  config: AiAgentConfig,
  pendingInstructions: Promise<string>,
  request: RunRequest,
  sessionId: string,
): Promise<Conversation> {
  const { deps } = ctx;
  const [instructions, { summary, messages: history }, info] = await Promise.all([
    pendingInstructions,
    loadContext(deps.db, sessionId, deps.maxMessages),
    deps.modelInfo({ provider: config.provider, model: config.model }),
  ]);
  const conversation = buildConversation(instructions, request, history, summary);
  const settings = compactionSettings(deps.compaction(), config.compaction);
  const budget = tokenBudget(info, settings);
  if (settings.mode === 'off' || budget === undefined || conversationTokensAtMost(conversation.messages) <= budget) return conversation;
  const counter = await tokenCounter(info?.model);
  if (conversationTokens(counter, conversation.messages) <= budget) return conversation;
  const compacted = await compactIfDue(ctx, { config, settings, sessionId, summary, history, budget });
  const rebuilt = compacted ? buildConversation(instructions, request, compacted.recent, compacted.summary) : conversation;
  const kept = compacted ? compacted.recent : history;
  return slideToFit(ctx, { counter, budget, rebuilt, kept, build: (h) => buildConversation(instructions, request, h, compacted?.summary ?? summary) });
}

/** The summary strategy, when due; undefined when it is not or its call failed (logged: the window slides instead). */
async function compactIfDue(
  ctx: AgentRun,
  turn: { config: AiAgentConfig; settings: CompactionSettings; sessionId: string; summary: string | null; history: StoredSessionMessage[]; budget: number },
): Promise<{ summary: string; recent: StoredSessionMessage[] } | undefined> {
  if (turn.settings.strategy !== 'summary' || turn.history.length < turn.settings.min_messages_to_compact) return undefined;
  try {
    const done = await compactOlder({ db: ctx.deps.db, stream: ctx.deps.stream }, { ...turn, signal: ctx.signal });
    if (done) ctx.log.info({ compacted: done.compacted, kept: done.recent.length, budget: turn.budget }, 'session compacted');
    return done;
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    ctx.log.warn({ error: (err as Error).message }, 'compaction summary failed: falling back to a sliding window');
    return undefined;
  }
}

/**
 * Leaves out the oldest history messages (never the new turn) until the conversation fits;
 * a leading tool result left without its call goes too (`buildConversation` skips it).
 */
function slideToFit(
  ctx: AgentRun,
  w: { counter: TokenCounter; budget: number; rebuilt: Conversation; kept: StoredSessionMessage[]; build: (history: StoredSessionMessage[]) => Conversation },
): Conversation {
  const total = conversationTokens(w.counter, w.rebuilt.messages);
  if (total <= w.budget) return w.rebuilt;
  const cost = (m: StoredSessionMessage) => messageTokens(w.counter, { content: m.content, tool_calls: m.toolCalls ?? undefined } as Pick<ChatMessage, 'content' | 'tool_calls'>);
  let over = total - w.budget;
  let start = 0;
  while (start < w.kept.length && (over > 0 || w.kept[start]!.role === 'tool')) {
    over -= cost(w.kept[start]!);
    start++;
  }
  ctx.log.warn({ dropped: start, kept: w.kept.length - start, budget: w.budget, fits: over <= 0 }, 'session context over budget: oldest messages left out of this turn');
  return w.build(w.kept.slice(start));
}
