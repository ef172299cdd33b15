/**
 * Conformance with clients nobody here wrote (issue 22). Agentry's own suite speaks through the
 * `openai` SDK it was built against; users point other libraries at it, each with its own idea
 * of the protocol, so each is a dependency of this workspace:
 * - `ai` (the Vercel AI SDK) is what most TypeScript apps call models through;
 * - `@ai-sdk/openai-compatible` is its provider for "any OpenAI-compatible server", the one its
 *   docs send self-hosted gateways to (it parses chunks and errors more loosely than OpenAI's);
 * - `@ai-sdk/openai` is its provider for OpenAI itself, used with a changed base URL: its
 *   `.chat()` model speaks chat completions, its default model the Responses API
 *   (`clients-responses.ts`);
 * - `@langchain/openai` (with its peer `@langchain/core`) is LangChain JS's OpenAI chat model,
 *   which wraps the `openai` SDK but reads usage, finish reasons and errors its own way.
 * Each is the newest release that still runs on Node 20 (ai 7, its providers' next majors and
 * @langchain/openai from 1.5.9 want Node 22).
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import type { AIMessageChunk } from '@langchain/core/messages';
import { APICallError, generateText, streamText, type LanguageModel } from 'ai';
import { expect, it } from 'vitest';
import type { FakeModel } from '@agentry/testing';
import type { ChatTarget } from './chat-conformance.js';

/** Far longer than a failing call takes (3 provider attempts, 1.5 s of backoff): the CI machine is shared. */
export const CASE_TIMEOUT_MS = 120_000;

export const USAGE = { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 };
/** USAGE as the AI SDK reports it. */
export const SDK_USAGE = { inputTokens: 11, outputTokens: 3, totalTokens: 14 };
/** USAGE as LangChain reports it. */
export const LANGCHAIN_USAGE = { input_tokens: 11, output_tokens: 3, total_tokens: 14 };

/** An empty queue and history, then the reply this case expects (a leftover never leaks in). */
export function scriptFresh(fake: FakeModel, ...entries: Parameters<FakeModel['script']>): void {
  fake.reset();
  fake.script(...entries);
}

/**
 * Every attempt of the gateway (the call and its retries) meets a provider 500, so the run fails
 * before its first token. More entries than attempts: the next case resets the rest.
 */
export function failProvider(fake: FakeModel): void {
  const fail = { status: 500, body: { error: { message: 'upstream exploded', type: 'server_error' } } };
  scriptFresh(fake, fail, fail, fail, fail, fail, fail);
}

/** An error as a failed assertion should show it: the AI SDK also reports plain objects. */
export function describeError(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : JSON.stringify(e);
}

/** The AI SDK's own retries are off: a 502 must reach the test as the APICallError, not a RetryError. */
export const SDK_CALL = { maxRetries: 0, timeout: 60_000 } as const;

/** The chat-completions models of the AI SDK that clients point at Agentry. */
export function aiSdkChatModels(t: ChatTarget): Record<string, LanguageModel> {
  return {
    // Without includeUsage this provider asks for no usage on streams, and reports none.
    'openai-compatible': createOpenAICompatible({ baseURL: t.baseURL, apiKey: t.apiKey, name: 'agentry', includeUsage: true })(t.agentId),
    'openai .chat()': createOpenAI({ baseURL: t.baseURL, apiKey: t.apiKey }).chat(t.agentId),
  };
}

export function langchainModel(t: ChatTarget): ChatOpenAI {
  return new ChatOpenAI({ model: t.agentId, apiKey: t.apiKey, configuration: { baseURL: t.baseURL }, maxRetries: 0, timeout: 60_000 });
}

/** Streams with the AI SDK, keeping the errors it reports instead of letting it log them. */
export async function streamWithAiSdk(model: LanguageModel, prompt: string) {
  const errors: unknown[] = [];
  const result = streamText({ model, prompt, ...SDK_CALL, onError: ({ error }) => void errors.push(error) });
  let text = '';
  for await (const delta of result.textStream) text += delta;
  return { result, text, errors };
}

/** Streams with LangChain: the chunks merged, as its docs show, or the error the stream threw. */
export async function streamWithLangchain(model: ChatOpenAI, prompt: string): Promise<{ merged?: AIMessageChunk; error?: unknown }> {
  let merged: AIMessageChunk | undefined;
  try {
    for await (const chunk of await model.stream(prompt)) merged = merged ? merged.concat(chunk) : chunk;
    return merged ? { merged } : {};
  } catch (error) {
    return merged ? { merged, error } : { error };
  }
}

/**
 * The Vercel AI SDK and LangChain JS against a deployment over chat completions, each case
 * scripting the fake itself. Registered inside the caller's describe.
 */
export function clientsConformance(target: () => ChatTarget): void {
  for (const name of ['openai-compatible', 'openai .chat()']) {
    const model = () => aiSdkChatModels(target())[name]!;

    it(`AI SDK ${name}: generateText gets the text, usage and finish reason`, { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: 'Hello from Agentry', usage: USAGE });
      const res = await generateText({ model: model(), prompt: 'hi', ...SDK_CALL });
      expect(res.text).toBe('Hello from Agentry');
      expect(res.finishReason).toBe('stop');
      expect(res.usage).toMatchObject(SDK_USAGE);
    });

    it(`AI SDK ${name}: streamText streams the text, then usage and finish reason`, { timeout: CASE_TIMEOUT_MS }, async () => {
      scriptFresh(target().fake, { text: ['Once ', 'upon ', 'a time'], usage: USAGE });
      const { result, text, errors } = await streamWithAiSdk(model(), 'story');
      expect(errors).toEqual([]);
      expect(text).toBe('Once upon a time');
      expect(await result.finishReason).toBe('stop');
      expect(await result.usage).toMatchObject(SDK_USAGE);
    });

    it(`AI SDK ${name}: a failing provider is an APICallError with status 502`, { timeout: CASE_TIMEOUT_MS }, async () => {
      failProvider(target().fake);
      const err = await generateText({ model: model(), prompt: 'x', ...SDK_CALL }).catch((e: unknown) => e);
      expect(APICallError.isInstance(err), describeError(err)).toBe(true);
      expect((err as APICallError).statusCode).toBe(502);
    });

    // The status of a streamed failure (502, the headers waiting for the first event) is
    // checked in clients-responses.ts.
    it(`AI SDK ${name}: a failing provider fails streamText with an error, not an empty answer`, { timeout: CASE_TIMEOUT_MS }, async () => {
      failProvider(target().fake);
      const { text, errors } = await streamWithAiSdk(model(), 'x');
      expect(text).toBe('');
      expect(errors.length, 'errors reported to onError').toBeGreaterThan(0);
    });
  }

  // This provider reads an error event that comes before any output as the failed call, its
  // `code` as the status: 502 whether the gateway sends it as the event or as the HTTP status.
  it('AI SDK openai .chat(): a failing provider fails streamText with an APICallError with status 502', { timeout: CASE_TIMEOUT_MS }, async () => {
    failProvider(target().fake);
    const { text, errors } = await streamWithAiSdk(aiSdkChatModels(target())['openai .chat()']!, 'x');
    expect(text).toBe('');
    expect(errors).toHaveLength(1);
    expect(APICallError.isInstance(errors[0]), describeError(errors[0])).toBe(true);
    expect((errors[0] as APICallError).statusCode).toBe(502);
  });

  it('LangChain ChatOpenAI: invoke gets the text, usage_metadata and finish_reason', { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    scriptFresh(t.fake, { text: 'Hello from Agentry', usage: USAGE });
    const answer = await langchainModel(t).invoke('hi');
    expect(answer.content).toBe('Hello from Agentry');
    expect(answer.usage_metadata).toMatchObject(LANGCHAIN_USAGE);
    expect(answer.response_metadata.finish_reason).toBe('stop');
  });

  it('LangChain ChatOpenAI: stream chunks concatenate to the text, usage and finish_reason', { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    scriptFresh(t.fake, { text: ['Once ', 'upon ', 'a time'], usage: USAGE });
    const { merged, error } = await streamWithLangchain(langchainModel(t), 'story');
    expect(error).toBeUndefined();
    expect(merged!.content).toBe('Once upon a time');
    expect(merged!.usage_metadata).toMatchObject(LANGCHAIN_USAGE);
    expect(merged!.response_metadata.finish_reason).toBe('stop');
  });

  it('LangChain ChatOpenAI: a failing provider rejects invoke with status 502', { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    failProvider(t.fake);
    const err = await langchainModel(t)
      .invoke('x')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as { status?: number }).status).toBe(502);
  });

  it('LangChain ChatOpenAI: a failing provider makes stream throw', { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    failProvider(t.fake);
    const { merged, error } = await streamWithLangchain(langchainModel(t), 'x');
    expect(error).toBeInstanceOf(Error);
    expect(merged?.content ?? '').toBe('');
  });
}
