/**
 * A conversation as the chat page shows it: user turns, and assistant turns made of text parts
 * and tool cards in the order they happened. Built from the live agui stream (`applyToolStart`,
 * `applyToolResult`, `applyText`) or from a session's stored messages (`turnsFromHistory`).
 * Pure (only the client's types): unit-tested under Node.
 */
import type { SessionMessage, StoredToolCall } from '@agentry/client';

export interface TextPart {
  kind: 'text';
  text: string;
}

export interface ToolPart {
  kind: 'tool';
  id: string;
  name: string;
  toolType?: string;
  arguments: string;
  result?: string;
  error: boolean;
  startedAt?: number;
  durationMs?: number;
}

export type Part = TextPart | ToolPart;

export interface UserTurn {
  role: 'user';
  key: string;
  text: string;
}

export interface AssistantTurn {
  role: 'assistant';
  key: string;
  parts: Part[];
  status: 'streaming' | 'done' | 'stopped' | 'error';
  error?: string;
  /** Live turns only: how many times the stream's connection dropped and went on (the answer is whole). */
  resumed?: number;
  /** Live turns only: the provider call is being tried again ("attempt 2 of 3: provider unreachable"), until the answer goes on. */
  retrying?: string;
}

export type Turn = UserTurn | AssistantTurn;

/** A tool result that reports a failure: the agent loop's results start with `Error:`. */
export function isToolError(content: string, flagged?: boolean): boolean {
  return flagged === true || /^Error\b/.test(content);
}

export function applyText(parts: Part[], text: string): Part[] {
  if (!text) return parts;
  const last = parts[parts.length - 1];
  if (last?.kind === 'text') return [...parts.slice(0, -1), { kind: 'text', text: last.text + text }];
  return [...parts, { kind: 'text', text }];
}

export function applyToolStart(parts: Part[], e: { toolCallId: string; toolCallName: string; arguments?: string; toolType?: string }, now: number): Part[] {
  return [
    ...parts,
    { kind: 'tool', id: e.toolCallId, name: e.toolCallName, arguments: e.arguments ?? '', error: false, startedAt: now, ...(e.toolType ? { toolType: e.toolType } : {}) },
  ];
}

export function applyToolResult(
  parts: Part[],
  e: { toolCallId: string; toolCallName: string; content?: string; toolType?: string; isError?: boolean },
  now: number,
): Part[] {
  const content = e.content ?? '';
  const i = parts.findIndex((p) => p.kind === 'tool' && p.id === e.toolCallId);
  if (i < 0) {
    return [...parts, { kind: 'tool', id: e.toolCallId, name: e.toolCallName, arguments: '', result: content, error: isToolError(content, e.isError) }];
  }
  const p = parts[i] as ToolPart;
  const done: ToolPart = { ...p, result: content, error: isToolError(content, e.isError), ...(p.startedAt !== undefined ? { durationMs: now - p.startedAt } : {}) };
  return [...parts.slice(0, i), done, ...parts.slice(i + 1)];
}

type StoredMessage = Pick<SessionMessage, 'role' | 'content' | 'toolCallId' | 'toolCalls'> & Partial<Pick<SessionMessage, 'status' | 'error'>>;

/** A stored tool call, read defensively: an older row may lack the function's fields. */
type LooseToolCall = Pick<StoredToolCall, 'id'> & { function?: Partial<StoredToolCall['function']> };

/** The client leaves `toolCalls` open (`unknown`); what an assistant message stores there. */
function toolCallsOf(m: StoredMessage): LooseToolCall[] {
  return Array.isArray(m.toolCalls) ? (m.toolCalls as LooseToolCall[]) : [];
}

/** How a stored turn ended, as the chat shows it: a failed or stopped turn keeps its error. */
function endOf(m: StoredMessage): Pick<AssistantTurn, 'status' | 'error'> {
  if (m.status === 'failed') return { status: 'error', error: m.error ?? '' };
  if (m.status === 'stopped') return { status: 'stopped' };
  return { status: 'done' };
}

/**
 * Turns of a stored session: everything between two user messages is one assistant turn. A
 * turn that failed or was stopped (its messages carry `status`) ends as it did live.
 */
export function turnsFromHistory(messages: StoredMessage[]): Turn[] {
  const turns: Turn[] = [];
  let assistant: AssistantTurn | null = null;
  for (const [i, m] of messages.entries()) {
    const content = m.content ?? '';
    if (m.role === 'user') {
      assistant = null;
      turns.push({ role: 'user', key: `h${i}`, text: content });
      continue;
    }
    if (m.role !== 'assistant' && m.role !== 'tool') continue;
    if (!assistant) {
      assistant = { role: 'assistant', key: `h${i}`, parts: [], ...endOf(m) };
      turns.push(assistant);
    }
    if (m.role === 'assistant') {
      const last = assistant.parts[assistant.parts.length - 1];
      assistant.parts = applyText(assistant.parts, last?.kind === 'text' && content ? `\n\n${content}` : content);
      for (const call of toolCallsOf(m)) {
        assistant.parts = [...assistant.parts, { kind: 'tool', id: call.id, name: call.function?.name ?? '?', arguments: call.function?.arguments ?? '', error: false }];
      }
    } else if (m.toolCallId) {
      assistant.parts = applyToolResult(assistant.parts, { toolCallId: m.toolCallId, toolCallName: '?', content }, 0);
    }
  }
  return turns;
}

/** The JSON arguments pretty-printed, or as sent when they are not JSON. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
