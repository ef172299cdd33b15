/**
 * The client's own function tools beside the agent's (issue 38), through the clients that send
 * them: the `openai` SDK (chat, streamed and not; Responses), the AI SDK's `generateText` with
 * `tools` over several steps, LangChain's `bindTools` loop, and `@openai/agents` (0.20, a function
 * tool and a handoff, over both APIs). The agent `ctools` has a server-side tool
 * (`helper`, a sub-agent: its model call is one more scripted reply of the fake); the client's
 * tool is `get_weather`. Bodies are checked against OpenAI's OpenAPI document.
 */
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, ToolMessage, type AIMessage, type BaseMessage } from '@langchain/core/messages';
import { generateText, jsonSchema, stepCountIs, tool, type LanguageModel } from 'ai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { z } from 'zod';
import { beforeAll, expect, it } from 'vitest';
import type { FakeChatMessage, FakeModel } from '@agentry/testing';
import type { ChatTarget } from './chat-conformance.js';
import { CASE_TIMEOUT_MS, SDK_CALL, scriptFresh } from './clients-conformance.js';
import { assertValid } from './openai-schema.js';

export const TOOLS_AGENT = 'ctools';
const REFUSING_AGENT = 'ctools_refusing';

const WEATHER_PARAMS: { type: 'object'; properties: Record<string, { type: 'string' }>; required: string[]; additionalProperties: false } = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const WEATHER: OpenAI.Chat.ChatCompletionTool = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: WEATHER_PARAMS } };

function toolsAgent(id: string, extra: Record<string, unknown> = {}) {
  return {
    ruleChain: { id, name: `Agent ${id}` },
    metadata: {
      nodes: [
        {
          id: 'agent',
          type: 'ai/agent',
          name: 'agent',
          configuration: { provider: 'fake', model: 'fake-model', systemPrompt: 'You use tools.', tools: [{ type: 'agent', name: 'helper', targetId: 'conformance' }], ...extra },
        },
      ],
      connections: [],
    },
  };
}

async function createAgent(t: ChatTarget, dsl: object): Promise<void> {
  const res = await fetch(`${t.baseURL}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${t.apiKey}` }, body: JSON.stringify(dsl) });
  if (res.status !== 201) throw new Error(`agent create failed: ${res.status} ${await res.text()}`);
}

/** The names of the tools a model request offered. */
function offered(fake: FakeModel, index: number): string[] {
  return ((fake.requests[index]?.body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name).sort();
}

/** The model's first request runs the server tool, the sub-agent answers, the second calls the client's tool. */
function scriptServerThenClient(fake: FakeModel, city = 'Paris'): void {
  scriptFresh(
    fake,
    { toolCalls: [{ id: 'call_helper', name: 'helper', arguments: '{"message":"which city?"}' }] },
    { text: `Ask about ${city}` },
    { text: 'Let me check.', toolCalls: [{ id: 'call_weather', name: 'get_weather', arguments: JSON.stringify({ city }) }] },
  );
}

const lastOf = (fake: FakeModel): FakeChatMessage[] => fake.requests.at(-1)!.body.messages;

export function clientToolsConformance(target: () => ChatTarget): void {
  const client = () => new OpenAI({ baseURL: target().baseURL, apiKey: target().apiKey, maxRetries: 0 });

  beforeAll(async () => {
    await createAgent(target(), toolsAgent(TOOLS_AGENT));
    await createAgent(target(), toolsAgent(REFUSING_AGENT, { clientTools: false }));
  });

  it('openai SDK chat: a client tool call ends the answer with message.tool_calls; the follow-up with the result continues without repeating the server step', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptServerThenClient(fake);
    const user: OpenAI.Chat.ChatCompletionMessageParam = { role: 'user', content: 'Weather in the city the helper names?' };
    const first = await client().chat.completions.create({ model: TOOLS_AGENT, messages: [user], tools: [WEATHER], tool_choice: 'auto', parallel_tool_calls: false });
    assertValid('CreateChatCompletionResponse', first);
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Let me check.');
    expect(choice.message.tool_calls).toEqual([{ id: 'call_weather', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    // Both kinds of tools were offered; the client's parameters as given; parallel_tool_calls passed on.
    expect(offered(fake, 0)).toEqual(['get_weather', 'helper']);
    const weatherDef = (fake.requests[0]!.body.tools as Array<{ function: { name: string; parameters?: unknown } }>).find((d) => d.function.name === 'get_weather');
    expect(weatherDef!.function.parameters).toEqual(WEATHER_PARAMS);
    expect(fake.requests[0]!.body.parallel_tool_calls).toBe(false);
    expect(fake.requests).toHaveLength(3);

    scriptFresh(fake, { text: 'Sunny in Paris.' });
    const second = await client().chat.completions.create({
      model: TOOLS_AGENT,
      messages: [user, choice.message as OpenAI.Chat.ChatCompletionAssistantMessageParam, { role: 'tool', tool_call_id: 'call_weather', content: '{"sky":"sunny"}' }],
      tools: [WEATHER],
    });
    assertValid('CreateChatCompletionResponse', second);
    expect(second.choices[0]!.message.content).toBe('Sunny in Paris.');
    expect(second.choices[0]!.finish_reason).toBe('stop');
    // One model call: the helper did not run again; the model saw the call and its result.
    expect(fake.requests).toHaveLength(1);
    const seen = lastOf(fake);
    expect(seen.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_weather', function: { name: 'get_weather' } }] });
    expect(seen.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_weather', content: '{"sky":"sunny"}' });
  });

  it('openai SDK chat stream: the client tool call comes as tool-call deltas, then finish_reason tool_calls', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptServerThenClient(fake, 'Oslo');
    const stream = await client().chat.completions.create({ model: TOOLS_AGENT, messages: [{ role: 'user', content: 'weather?' }], tools: [WEATHER], stream: true });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    for (const c of chunks) assertValid('CreateChatCompletionStreamResponse', c);
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls).toEqual([{ index: 0, id: 'call_weather', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Let me check.');

    // The SDK's stream helper assembles the same call.
    scriptServerThenClient(fake, 'Oslo');
    const final = await client().chat.completions.stream({ model: TOOLS_AGENT, messages: [{ role: 'user', content: 'weather?' }], tools: [WEATHER] }).finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(final.choices[0]!.message.tool_calls?.[0]).toMatchObject({ id: 'call_weather', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } });
  });

  it('a session keeps the whole exchange: the next turn sees the server step, the client call and its result', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    const sessionId = `ctools-${Date.now()}`;
    type Body = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming & { sessionId: string };
    scriptServerThenClient(fake, 'Rome');
    const user: OpenAI.Chat.ChatCompletionMessageParam = { role: 'user', content: 'weather?' };
    const first = await client().chat.completions.create({ model: TOOLS_AGENT, messages: [user], tools: [WEATHER], sessionId } as Body);
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');

    scriptFresh(fake, { text: 'Rainy in Rome.' });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      user,
      first.choices[0]!.message as OpenAI.Chat.ChatCompletionAssistantMessageParam,
      { role: 'tool', tool_call_id: 'call_weather', content: 'rain' },
    ];
    const second = await client().chat.completions.create({ model: TOOLS_AGENT, messages, tools: [WEATHER], sessionId } as Body);
    expect(second.choices[0]!.message.content).toBe('Rainy in Rome.');
    const seen = lastOf(fake).filter((m) => m.role !== 'system');
    expect(seen.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool']);
    expect(seen[2]).toMatchObject({ tool_call_id: 'call_helper', content: 'Ask about Rome' });
    expect(seen[4]).toMatchObject({ tool_call_id: 'call_weather', content: 'rain' });

    // The third turn still has it all, with the answer.
    scriptFresh(fake, { text: 'Bye.' });
    await client().chat.completions.create({ model: TOOLS_AGENT, messages: [...messages, second.choices[0]!.message, { role: 'user', content: 'thanks' }], sessionId } as Body);
    expect(lastOf(fake).filter((m) => m.role !== 'system').map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'user']);
  });

  it("a client tool named like one of the agent's is a 400 naming it; an agent with clientTools: false refuses them", { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptFresh(fake);
    const clash = await client()
      .chat.completions.create({ model: TOOLS_AGENT, messages: [{ role: 'user', content: 'x' }], tools: [WEATHER, { type: 'function', function: { name: 'helper', parameters: { type: 'object' } } }] })
      .catch((e: unknown) => e);
    expect(clash).toBeInstanceOf(OpenAI.BadRequestError);
    expect((clash as Error).message).toContain('"helper"');
    const refused = await client()
      .chat.completions.create({ model: REFUSING_AGENT, messages: [{ role: 'user', content: 'x' }], tools: [WEATHER] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as Error).message).toContain('clientTools: false');
    const badChoice = await client()
      .chat.completions.create({ model: TOOLS_AGENT, messages: [{ role: 'user', content: 'x' }], tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } })
      .catch((e: unknown) => e);
    expect(badChoice).toBeInstanceOf(OpenAI.BadRequestError);
    expect((badChoice as Error).message).toContain('"nope" is not one of the request\'s tools');
    // A session's tool result must answer a call of that session.
    const orphan = await client()
      .chat.completions.create({
        model: TOOLS_AGENT,
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_elsewhere', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_elsewhere', content: 'r' },
        ],
        tools: [WEATHER],
        sessionId: `ctools-orphan-${Date.now()}`,
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(orphan).toBeInstanceOf(OpenAI.BadRequestError);
    expect((orphan as Error).message).toContain('the tool result for call "call_elsewhere" answers no tool call of this session');
    // None of them reached the model.
    expect(fake.requests).toHaveLength(0);
  });

  const aiSdkModels = (): Record<string, LanguageModel> => ({
    'openai-compatible': createOpenAICompatible({ baseURL: target().baseURL, apiKey: target().apiKey, name: 'agentry' })(TOOLS_AGENT),
    'openai .chat()': createOpenAI({ baseURL: target().baseURL, apiKey: target().apiKey }).chat(TOOLS_AGENT),
  });
  for (const name of ['openai-compatible', 'openai .chat()']) {
    it(`AI SDK ${name}: generateText with tools runs the client tool and finishes over several steps`, { timeout: CASE_TIMEOUT_MS }, async () => {
      const { fake } = target();
      scriptServerThenClient(fake, 'Lima');
      fake.script({ text: 'Warm in Lima.' });
      const ran: unknown[] = [];
      const res = await generateText({
        model: aiSdkModels()[name]!,
        prompt: 'weather?',
        tools: {
          get_weather: tool({
            description: 'The weather in a city',
            inputSchema: jsonSchema<{ city: string }>(WEATHER_PARAMS),
            execute: async (input) => (ran.push(input), { sky: 'warm' }),
          }),
        },
        stopWhen: stepCountIs(5),
        ...SDK_CALL,
      });
      expect(ran).toEqual([{ city: 'Lima' }]);
      expect(res.steps).toHaveLength(2);
      expect(res.steps[0]!.finishReason).toBe('tool-calls');
      expect(res.text).toBe('Warm in Lima.');
      expect(res.finishReason).toBe('stop');
      // Four model calls in all: the helper's two and the client call in the first request, one in the second.
      expect(fake.requests).toHaveLength(4);
      expect(lastOf(fake).at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_weather' });
      expect(String(lastOf(fake).at(-1)!.content)).toContain('warm');
    });
  }

  it('LangChain ChatOpenAI.bindTools: the tool-calling loop ends with the answer', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptServerThenClient(fake, 'Cairo');
    fake.script({ text: 'Hot in Cairo.' });
    const model = new ChatOpenAI({ model: TOOLS_AGENT, apiKey: target().apiKey, configuration: { baseURL: target().baseURL }, maxRetries: 0, timeout: 60_000 }).bindTools([WEATHER]);
    const messages: BaseMessage[] = [new HumanMessage('weather?')];
    let answer: AIMessage | undefined;
    for (let round = 0; round < 4; round++) {
      answer = await model.invoke(messages);
      messages.push(answer);
      if (!answer.tool_calls?.length) break;
      for (const call of answer.tool_calls) messages.push(new ToolMessage({ tool_call_id: call.id!, content: `hot in ${(call.args as { city: string }).city}` }));
    }
    expect(messages.filter((m) => m instanceof ToolMessage)).toHaveLength(1);
    expect((messages[1] as AIMessage).tool_calls).toEqual([{ id: 'call_weather', name: 'get_weather', args: { city: 'Cairo' }, type: 'tool_call' }]);
    expect(answer!.content).toBe('Hot in Cairo.');
    expect(lastOf(fake).at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_weather', content: 'hot in Cairo' });
  });

  const RESPONSES_WEATHER: OpenAI.Responses.FunctionTool = { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: WEATHER_PARAMS, strict: true };

  it('openai SDK Responses: a client tool call ends the response with a function_call item; function_call_output with previous_response_id continues', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptServerThenClient(fake, 'Bern');
    const first = await client().responses.create({ model: TOOLS_AGENT, input: 'weather?', tools: [RESPONSES_WEATHER], tool_choice: 'auto' });
    assertValid('Response', first);
    expect(first.status).toBe('completed');
    expect(first.output.map((o) => o.type)).toEqual(['message', 'function_call']);
    const call = first.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ call_id: 'call_weather', name: 'get_weather', arguments: '{"city":"Bern"}', status: 'completed' });
    expect(first.output_text).toBe('Let me check.');
    expect(first.tools).toEqual([{ type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: WEATHER_PARAMS, strict: true }]);
    expect(offered(fake, 0)).toEqual(['get_weather', 'helper']);

    scriptFresh(fake, { text: 'Snow in Bern.' });
    const second = await client().responses.create({
      model: TOOLS_AGENT,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'snow' }],
      tools: [RESPONSES_WEATHER],
    });
    assertValid('Response', second);
    expect(second.output_text).toBe('Snow in Bern.');
    expect(fake.requests).toHaveLength(1);
    const seen = lastOf(fake).filter((m) => m.role !== 'system');
    expect(seen.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool']);
    expect(seen[4]).toMatchObject({ tool_call_id: 'call_weather', content: 'snow' });
    // The follow-up's input, as given: the output item, not a user message.
    const items = await client().responses.inputItems.list(second.id);
    const raw = await fetch(`${target().baseURL}/responses/${second.id}/input_items`, { headers: { authorization: `Bearer ${target().apiKey}` } });
    assertValid('ResponseItemList', await raw.json());
    expect(items.data).toEqual([expect.objectContaining({ type: 'function_call_output', call_id: 'call_weather', output: 'snow' })]);
  });

  it('openai SDK Responses stream: the call comes as output_item and function_call_arguments events; store: false continues from the resent items', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptFresh(fake, { toolCalls: [{ id: 'call_only', name: 'get_weather', arguments: '{"city":"Kyiv"}' }] });
    const stream = await client().responses.create({ model: TOOLS_AGENT, input: 'weather?', tools: [RESPONSES_WEATHER], stream: true, store: false });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    for (const e of events) assertValid('ResponseStreamEvent', e);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    // Only the call: no empty message before it.
    expect(completed.response.output).toEqual([{ type: 'function_call', id: expect.any(String), call_id: 'call_only', name: 'get_weather', arguments: '{"city":"Kyiv"}', status: 'completed' }]);

    scriptFresh(fake, { text: 'Clear in Kyiv.' });
    const second = await client().responses.create({
      model: TOOLS_AGENT,
      store: false,
      input: [{ role: 'user', content: 'weather?' }, completed.response.output[0] as OpenAI.Responses.ResponseFunctionToolCall, { type: 'function_call_output', call_id: 'call_only', output: 'clear' }],
      tools: [RESPONSES_WEATHER],
    });
    expect(second.output_text).toBe('Clear in Kyiv.');
    const seen = lastOf(fake).filter((m) => m.role !== 'system');
    expect(seen.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(seen[1]).toMatchObject({ tool_calls: [{ id: 'call_only', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Kyiv"}' } }] });
  });

  it('AI SDK openai (Responses API): generateText with tools runs the client tool over several steps', { timeout: CASE_TIMEOUT_MS }, async () => {
    const { fake } = target();
    scriptServerThenClient(fake, 'Quito');
    fake.script({ text: 'Mild in Quito.' });
    const ran: unknown[] = [];
    const res = await generateText({
      model: createOpenAI({ baseURL: target().baseURL, apiKey: target().apiKey })(TOOLS_AGENT),
      prompt: 'weather?',
      tools: {
        get_weather: tool({ description: 'The weather in a city', inputSchema: jsonSchema<{ city: string }>(WEATHER_PARAMS), execute: async (input) => (ran.push(input), 'mild') }),
      },
      stopWhen: stepCountIs(5),
      ...SDK_CALL,
    });
    expect(ran).toEqual([{ city: 'Quito' }]);
    expect(res.steps).toHaveLength(2);
    expect(res.text).toBe('Mild in Quito.');
    expect(fake.requests).toHaveLength(4);
    expect(lastOf(fake).at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_weather' });
  });

  // The Agents SDK: a triage agent with a function tool and a handoff, both served by the Agentry
  // agent `ctools` (its server tool offered too), run to completion over either API.
  for (const useResponses of [true, false]) {
    it(`@openai/agents (${useResponses ? 'Responses' : 'chat completions'} API): a function tool and a handoff run to completion`, { timeout: CASE_TIMEOUT_MS }, async () => {
      setTracingDisabled(true);
      const { fake } = target();
      const offeredTransfer = (req: { body: { tools?: unknown[] } }) => (req.body.tools as Array<{ function: { name: string } }>).map((d) => d.function.name).find((n) => n.startsWith('transfer_to'))!;
      scriptFresh(
        fake,
        { toolCalls: [{ id: 'call_w', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
        (req) => ({ toolCalls: [{ id: 'call_h', name: offeredTransfer(req), arguments: '{}' }] }),
        { text: 'The specialist says: sunny in Paris.' },
      );
      const ran: string[] = [];
      const getWeather = agentTool({
        name: 'get_weather',
        description: 'The weather in a city',
        parameters: z.object({ city: z.string() }),
        execute: async ({ city }) => (ran.push(city), `sunny in ${city}`),
      });
      const specialist = new Agent({ name: 'Specialist', instructions: 'You explain the weather.', model: TOOLS_AGENT });
      const triage = new Agent({ name: 'Triage', instructions: 'Look the weather up, then hand off.', model: TOOLS_AGENT, tools: [getWeather], handoffs: [specialist] });
      const provider = new OpenAIProvider({ openAIClient: client(), useResponses });
      const result = await new Runner({ modelProvider: provider, tracingDisabled: true }).run(triage, 'Weather in Paris?');
      expect(ran).toEqual(['Paris']);
      expect(result.finalOutput).toBe('The specialist says: sunny in Paris.');
      expect(result.lastAgent?.name).toBe('Specialist');
      expect(fake.requests).toHaveLength(3);
      // Both client tools and the agent's own were offered; the model saw the tool's output.
      expect(offered(fake, 0)).toEqual(expect.arrayContaining(['get_weather', 'helper']));
      expect(fake.requests[1]!.body.messages.find((m) => m.role === 'tool')).toMatchObject({ tool_call_id: 'call_w', content: 'sunny in Paris' });
    });
  }
}
