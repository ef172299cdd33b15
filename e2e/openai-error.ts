import { expect } from 'vitest';

/**
 * The message of an error answered by an OpenAI-compatible route (`/chat/completions`,
 * `/responses`, `/models`), after checking the body is OpenAI's error object and nothing else.
 */
export function openaiErrorMessage(body: unknown): string {
  expect(Object.keys(body as object)).toEqual(['error']);
  const error = (body as { error: Record<string, unknown> }).error;
  expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof error.message).toBe('string');
  expect(typeof error.type).toBe('string');
  return error.message as string;
}

/** An OpenAI-compatible route, by the path a request was sent to (not `/api/v1/config/models/...`). */
export const OPENAI_ROUTE = /^(?:\/api)?\/v1\/(?:chat\/completions|responses|models)(?:[/?]|$)/;
