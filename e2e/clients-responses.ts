import { createOpenAI } from '@ai-sdk/openai';
import { tool } from '@langchain/core/tools';
import { APICallError, generateText, type LanguageModel } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import type { ChatTarget } from './chat-conformance.js';
import { CASE_TIMEOUT_MS, SDK_CALL, SDK_USAGE, USAGE, describeError, aiSdkChatModels, failProvider, langchainModel, scriptFresh, streamWithAiSdk, streamWithLangchain } from './clients-conformance.js';

/**
 * The third-party clients' cases that need what chat completions alone did not give them (the
 * dependencies are explained in clients-conformance.ts):
 * - the AI SDK's default OpenAI model (`createOpenAI(...)(id)`) speaks the Responses API,
 *   `POST /responses`;
 * - a stream that fails before its first token answers HTTP 502, since its headers wait for
 *   the first event (until then the 200 stream carries an error event and the status is lost);
 * - a request with the client's own tools gets the model's calls of them back (the loop over
 *   several turns is in client-tools.ts).
 */
export function responsesClientsConformance(target: () => ChatTarget): void {
  const responsesModel = (): LanguageModel => createOpenAI({ baseURL: target().baseURL, apiKey: target().apiKey })(target().agentId);

  it('AI SDK openai (Responses API): generateText gets the text, usage and finish reason', { timeout: CASE_TIMEOUT_MS }, async () => {
    scriptFresh(target().fake, { text: 'Hello from Agentry', usage: USAGE });
    const res = await generateText({ model: responsesModel(), prompt: 'hi', ...SDK_CALL });
    expect(res.text).toBe('Hello from Agentry');
    expect(res.finishReason).toBe('stop');
    expect(res.usage).toMatchObject(SDK_USAGE);
  });

  it('AI SDK openai (Responses API): streamText streams the text, then usage and finish reason', { timeout: CASE_TIMEOUT_MS }, async () => {
    scriptFresh(target().fake, { text: ['Once ', 'upon ', 'a time'], usage: USAGE });
    const { result, text, errors } = await streamWithAiSdk(responsesModel(), 'story');
    expect(errors).toEqual([]);
    expect(text).toBe('Once upon a time');
    expect(await result.finishReason).toBe('stop');
    expect(await result.usage).toMatchObject(SDK_USAGE);
  });

  it('AI SDK openai (Responses API): a failing provider is an APICallError with status 502', { timeout: CASE_TIMEOUT_MS }, async () => {
    failProvider(target().fake);
    const err = await generateText({ model: responsesModel(), prompt: 'x', ...SDK_CALL }).catch((e: unknown) => e);
    expect(APICallError.isInstance(err), describeError(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(502);
  });

  const models = (): Record<string, LanguageModel> => ({ ...aiSdkChatModels(target()), 'openai (Responses API)': responsesModel() });
  // (`openai .chat()` is in clients-conformance.ts: it reads the status from the error event.)
  for (const name of ['openai-compatible', 'openai (Responses API)']) {
    it(`AI SDK ${name}: a failing provider fails streamText with an APICallError with status 502`, { timeout: CASE_TIMEOUT_MS }, async () => {
      failProvider(target().fake);
      const { text, errors } = await streamWithAiSdk(models()[name]!, 'x');
      expect(text).toBe('');
      expect(errors).toHaveLength(1);
      expect(APICallError.isInstance(errors[0]), describeError(errors[0])).toBe(true);
      expect((errors[0] as APICallError).statusCode).toBe(502);
    });
  }

  it('LangChain ChatOpenAI: a failing provider makes stream throw with status 502', { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    failProvider(t.fake);
    const { merged, error } = await streamWithLangchain(langchainModel(t), 'x');
    expect(error).toBeInstanceOf(Error);
    expect((error as { status?: number }).status).toBe(502);
    expect(merged?.content ?? '').toBe('');
  });

  it("LangChain ChatOpenAI: bindTools offers the tool to the model and gets its call back as tool_calls", { timeout: CASE_TIMEOUT_MS }, async () => {
    const t = target();
    scriptFresh(t.fake, { toolCalls: [{ id: 'call_lc', name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const weather = tool(({ city }) => `sunny in ${city}`, {
      name: 'get_weather',
      description: 'The weather in a city.',
      schema: z.object({ city: z.string() }),
    });
    const answer = await langchainModel(t).bindTools([weather]).invoke('weather in Paris?');
    expect(answer.tool_calls).toEqual([{ id: 'call_lc', name: 'get_weather', args: { city: 'Paris' }, type: 'tool_call' }]);
    expect(answer.response_metadata.finish_reason).toBe('tool_calls');
    expect((t.fake.requests[0]!.body.tools as Array<{ function: { name: string } }>).map((d) => d.function.name)).toEqual(['get_weather']);
  });
}
