import { createHash } from 'node:crypto';
import { Tiktoken, getEncodingNameForModel, type TiktokenBPE, type TiktokenEncoding, type TiktokenModel } from 'js-tiktoken/lite';
import type { ChatMessage, ModelCallRequest } from '../models/types.js';

/**
 * Token counts for the compaction budget. js-tiktoken is OpenAI's BPE in pure JS with its rank
 * tables bundled in the package (no download at run time, no native build); a table is imported
 * only when a model that uses it is first counted, and kept. Models it does not know (most local
 * and non-OpenAI ones) are estimated at 4 characters a token, the usual rule for English text.
 */

/** Tokens a chat message costs beyond its text (role and separators), as OpenAI documents for its chat models. */
const PER_MESSAGE_TOKENS = 4;
const CHARS_PER_TOKEN = 4;

const RANKS: Partial<Record<TiktokenEncoding, () => Promise<{ default: TiktokenBPE }>>> = {
  o200k_base: () => import('js-tiktoken/ranks/o200k_base'),
  cl100k_base: () => import('js-tiktoken/ranks/cl100k_base'),
  p50k_base: () => import('js-tiktoken/ranks/p50k_base'),
  r50k_base: () => import('js-tiktoken/ranks/r50k_base'),
};

const encoders = new Map<TiktokenEncoding, Promise<Tiktoken>>();

/** Counts the tokens of a text for one model; `exact` says whether a tokenizer or the estimate counts. */
export interface TokenCounter {
  exact: boolean;
  count(text: string): number;
}

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/**
 * What a model call may cost at most, roughly, for a budget's reservation before it: its prompt
 * (messages and tool definitions, at 4 characters a token) and the answer it may write
 * (`max_tokens`, else `answerTokens`, the configured `security.budgetReserveTokens`).
 */
export function estimateCallTokens(req: Pick<ModelCallRequest, 'messages' | 'tools' | 'params'>, answerTokens: number): number {
  let prompt = 0;
  for (const m of req.messages) prompt += PER_MESSAGE_TOKENS + estimateTokens(m.content ?? '') + (m.tool_calls ? estimateTokens(JSON.stringify(m.tool_calls)) : 0);
  if (req.tools && req.tools.length > 0) prompt += estimateTokens(JSON.stringify(req.tools));
  const answer = req.params?.max_tokens ?? answerTokens;
  return prompt + Math.max(0, answer);
}

/** The encoding js-tiktoken knows for a model name (with or without a `provider/` prefix), or undefined. */
function encodingOf(model: string | undefined): TiktokenEncoding | undefined {
  if (!model) return undefined;
  const name = model.includes('/') ? model.slice(model.lastIndexOf('/') + 1) : model;
  try {
    return getEncodingNameForModel(name as TiktokenModel);
  } catch {
    return undefined;
  }
}

export async function tokenCounter(model: string | undefined): Promise<TokenCounter> {
  const encoding = encodingOf(model);
  const load = encoding ? RANKS[encoding] : undefined;
  if (!encoding || !load) return { exact: false, count: estimateTokens };
  let encoder = encoders.get(encoding);
  if (!encoder) {
    encoder = load().then((ranks) => new Tiktoken(ranks.default));
    encoders.set(encoding, encoder);
  }
  const tiktoken = await encoder;
  // Special-token text in a user message is counted as plain text, as a provider would receive it.
  const encode = (text: string) => tiktoken.encode(text, [], []).length;
  return { exact: true, count: (text) => (text.length < CACHED_FROM_CHARS ? encode(text) : cachedCount(encoding, text, encode)) };
}

/**
 * Stored messages are counted again at every turn of their session; encoding 100 kB takes about
 * 150 ms, hashing it well under 1 ms, so long texts are counted once per encoding (a bounded
 * map, oldest entries out first).
 */
const CACHED_FROM_CHARS = 512;
const MAX_CACHED = 50_000;
const counted = new Map<string, number>();

function cachedCount(encoding: TiktokenEncoding, text: string, encode: (text: string) => number): number {
  const key = `${encoding}:${createHash('sha1').update(text).digest('base64')}`;
  const hit = counted.get(key);
  if (hit !== undefined) return hit;
  const n = encode(text);
  if (counted.size >= MAX_CACHED) counted.delete(counted.keys().next().value!);
  counted.set(key, n);
  return n;
}

/** Tokens one message costs: its text, its tool calls, and the per-message overhead. */
export function messageTokens(counter: TokenCounter, m: Pick<ChatMessage, 'content' | 'tool_calls'>): number {
  return PER_MESSAGE_TOKENS + counter.count(m.content) + (m.tool_calls !== undefined && m.tool_calls !== null ? counter.count(JSON.stringify(m.tool_calls)) : 0);
}

/** Tokens of a conversation as a chat model is sent it (plus the 3 that prime the answer). */
export function conversationTokens(counter: TokenCounter, messages: readonly ChatMessage[]): number {
  return messages.reduce((total, m) => total + messageTokens(counter, m), 3);
}

/**
 * A bound above a conversation's tokens: a byte-level BPE token is at least one UTF-8 byte (and
 * the estimate is a quarter of the characters), so a conversation whose bytes fit the budget
 * fits it, and most turns skip counting (and loading a rank table) altogether.
 */
export function conversationTokensAtMost(messages: readonly ChatMessage[]): number {
  const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
  return messages.reduce((total, m) => total + PER_MESSAGE_TOKENS + bytes(m.content) + (m.tool_calls ? bytes(JSON.stringify(m.tool_calls)) : 0), 3);
}
