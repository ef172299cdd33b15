import { ADMIN } from './fake-run-deps.js';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { resolveTools, runAgentLoop, ToolError, type LoopEvent, type LoopTool, type ModelCallRequest, type ModelEvent, type ToolCall, type ToolDefinition } from '@agentry/engine';

const logger = pino({ level: 'silent' });

type Turn = { text?: string; calls?: Array<Omit<ToolCall, 'id'> & { id?: string }> };

/** A model that answers each call with the next scripted turn and records what it was sent. */
function scriptedModel(turns: Turn[]) {
  const requests: ModelCallRequest[] = [];
  let n = 0;
  async function* stream(req: ModelCallRequest): AsyncIterable<ModelEvent> {
    requests.push({ ...req, messages: structuredClone(req.messages) });
    const turn = turns[Math.min(n++, turns.length - 1)]!;
    if (turn.text) yield { type: 'text', text: turn.text };
    if (turn.calls) yield { type: 'tool_calls', calls: turn.calls.map((c, i) => ({ id: c.id ?? `call_${n}_${i}`, name: c.name, arguments: c.arguments })) };
    yield { type: 'done', finishReason: turn.calls ? 'tool_calls' : 'stop', provider: 'p', model: 'm', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } };
  }
  return { stream, requests };
}

function tool(name: string, run: LoopTool['run'], extra: Partial<LoopTool> = {}): LoopTool {
  return { name, description: `${name} tool`, parameters: { type: 'object' }, toolType: 'builtin', run, ...extra };
}

async function loop(turns: Turn[], tools: LoopTool[], opts: Parameters<typeof runAgentLoop>[1] = {}, signal = new AbortController().signal) {
  const model = scriptedModel(turns);
  const events: LoopEvent[] = [];
  const result = await runAgentLoop({ stream: model.stream, emit: async (e) => void events.push(e), logger }, opts, [{ role: 'user', content: 'go' }], tools, signal);
  return { result, events, requests: model.requests };
}

describe('agent loop', () => {
  it('answers directly without tools and offers the tool definitions', async () => {
    const { result, requests } = await loop([{ text: 'hello' }], [tool('echo', async (a) => String(a.text))]);
    expect(result).toMatchObject({ output: 'hello', finishReason: 'stop', steps: 1, usage: { totalTokens: 2 } });
    expect(requests[0]!.tools).toEqual([{ type: 'function', function: { name: 'echo', description: 'echo tool', parameters: { type: 'object' } } }]);
  });

  it('runs parallel calls concurrently, reports results in call order, and feeds them back', async () => {
    const started: string[] = [];
    const slow = tool('slow', async () => {
      started.push('slow');
      await new Promise((r) => setTimeout(r, 80));
      return 'slow done';
    });
    const fast = tool('fast', async () => {
      started.push('fast');
      return 'fast done';
    });
    const t0 = Date.now();
    const { result, events, requests } = await loop(
      [{ calls: [{ name: 'slow', arguments: '{}', id: 'a' }, { name: 'fast', arguments: '{}', id: 'b' }] }, { text: 'all done' }],
      [slow, fast],
    );
    expect(Date.now() - t0).toBeLessThan(150);
    expect(started).toEqual(['slow', 'fast']);
    expect(events.map((e) => `${e.type}:${'toolCallId' in e ? e.toolCallId : ''}`)).toEqual([
      'tool_start:a',
      'tool_start:b',
      'tool_result:a',
      'tool_result:b',
      'text:',
    ]);
    expect(requests[1]!.messages.slice(-3)).toEqual([
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'a', type: 'function', function: { name: 'slow', arguments: '{}' } },
          { id: 'b', type: 'function', function: { name: 'fast', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'a', content: 'slow done' },
      { role: 'tool', tool_call_id: 'b', content: 'fast done' },
    ]);
    expect(result.added.map((m) => m.role)).toEqual(['assistant', 'tool', 'tool', 'assistant']);
    expect(result.steps).toBe(2);
  });

  it('returns tool failures, bad arguments and unknown tools to the model as errors', async () => {
    const failing = tool('failing', async () => {
      throw new ToolError('disk on fire');
    });
    const { events } = await loop(
      [{ calls: [{ name: 'failing', arguments: '{}' }, { name: 'failing', arguments: 'not json' }, { name: 'ghost', arguments: '{}' }] }, { text: 'sorry' }],
      [failing],
    );
    const results = events.filter((e) => e.type === 'tool_result');
    expect(results.map((r) => [r.content, r.isError])).toEqual([
      ['Error: disk on fire', true],
      ['Error: the arguments of failing are not a JSON object: not json', true],
      ['Error: there is no tool named "ghost"', true],
    ]);
  });

  it('times a tool out', async () => {
    const hang = tool('hang', () => new Promise(() => {}), { timeoutMs: 50 });
    const { events } = await loop([{ calls: [{ name: 'hang', arguments: '{}' }] }, { text: 'ok' }], [hang]);
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ content: 'Error: hang timed out after 50 ms', isError: true });
  });

  it('cuts long outputs with a marker', async () => {
    const big = tool('big', async () => 'x'.repeat(100));
    const { events } = await loop([{ calls: [{ name: 'big', arguments: '{}' }] }, { text: 'ok' }], [big], { maxToolOutputLength: 10 });
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ content: 'xxxxxxxxxx\n[output truncated: 90 more characters]' });
  });

  it('stops identical calls repeated three times in a row (doom-loop guard)', async () => {
    let runs = 0;
    const same = tool('same', async () => String(++runs));
    const { result } = await loop([{ calls: [{ name: 'same', arguments: '{"q":1}' }] }], [same]);
    expect(runs).toBe(2);
    expect(result.steps).toBe(3);
    expect(result.output).toMatch(/the same tool call \(same\) was requested 3 times in a row/);
    // Every call in the transcript has an answer, so the session stays valid for the next turn.
    const callIds = result.added.flatMap((m) => ((m.tool_calls as Array<{ id: string }> | undefined) ?? []).map((c) => c.id));
    const answered = result.added.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
    expect(answered).toEqual(callIds);
  });

  it('stops after maxStep model calls with a clear message', async () => {
    let k = 0;
    const step = tool('step', async () => 'ok');
    const turns: Turn[] = Array.from({ length: 10 }, () => ({ calls: [{ name: 'step', arguments: JSON.stringify({ k: k++ }) }] }));
    const { result, requests } = await loop(turns, [step], { maxStep: 4 });
    expect(requests).toHaveLength(4);
    expect(result).toMatchObject({ output: '[Stopped after 4 model calls (maxStep) without a final answer.]', finishReason: 'length' });
  });

  it("ends with the calls of the client's tools, after running the agent's calls of the same reply; tool_choice only on the first call", async () => {
    const ran: string[] = [];
    const weather = { name: 'get_weather', description: 'weather', parameters: { type: 'object' } };
    const { result, events, requests } = await loop(
      [{ calls: [{ name: 'echo', arguments: '{"text":"a"}', id: 's1' }] }, { text: 'checking', calls: [{ name: 'echo', arguments: '{"text":"b"}', id: 's2' }, { name: 'get_weather', arguments: '{"city":"X"}', id: 'c1' }] }, { text: 'never asked' }],
      [tool('echo', async (a) => (ran.push(String(a.text)), String(a.text)))],
      { clientTools: [weather], toolChoice: 'required', parallelToolCalls: false },
    );
    expect(ran).toEqual(['a', 'b']);
    expect(requests).toHaveLength(2);
    expect(requests[0]!.tools).toContainEqual({ type: 'function', function: weather });
    expect(requests[0]!.tool_choice).toBe('required');
    expect(requests[1]).not.toHaveProperty('tool_choice');
    expect(requests.map((r) => r.parallel_tool_calls)).toEqual([false, false]);
    expect(result).toMatchObject({ output: 'checking', finishReason: 'tool_calls', steps: 2, clientCalls: [{ id: 'c1', name: 'get_weather', arguments: '{"city":"X"}' }] });
    // The turn keeps the whole reply (both calls) and the agent's result; the client answers c1 next turn.
    expect(result.added.map((m) => [m.role, m.tool_call_id ?? ''])).toEqual([['assistant', ''], ['tool', 's1'], ['assistant', ''], ['tool', 's2']]);
    expect((result.added[2]!.tool_calls as Array<{ id: string }>).map((c) => c.id)).toEqual(['s2', 'c1']);
    // The client's call is not run here: no events for it.
    expect(events.filter((e) => e.type !== 'text').map((e) => ('toolCallId' in e ? e.toolCallId : ''))).toEqual(['s1', 's1', 's2', 's2']);
  });

  it("never takes a client's call for a repeat: the same client call every turn ends each turn", async () => {
    const same = { calls: [{ name: 'get_weather', arguments: '{}', id: 'c' }] };
    for (let i = 0; i < 3; i++) {
      const { result } = await loop([same], [], { clientTools: [{ name: 'get_weather' }] });
      expect(result.finishReason).toBe('tool_calls');
    }
  });

  it('ends with the cancel reason when the signal aborts during a tool', async () => {
    const ctl = new AbortController();
    const wait = tool('wait', () => new Promise(() => setTimeout(() => ctl.abort(new Error('client gone')), 20)));
    await expect(loop([{ calls: [{ name: 'wait', arguments: '{}' }] }], [wait], {}, ctl.signal)).rejects.toThrow('client gone');
  });
});

describe('resolveTools', () => {
  const echo: ToolDefinition = { name: 'echo', description: 'Echoes.', parameters: { type: 'object' }, run: async (a) => String(a.text) };
  const deps = {
    logger,
    authority: ADMIN,
    builtin: { echo },
    context: { db: undefined as never, agentId: 'a', runId: 'r', sessionId: null, logger },
    runSubagent: async () => '',
    runChain: async () => '',
  };

  it('takes tools[].timeout as milliseconds, and ignores (with a warning) one under 1000 that was meant as seconds', async () => {
    const ms = await resolveTools([{ type: 'builtin', name: 'echo', timeout: 2500 }, { type: 'agent', name: 'helper', targetId: 'helper' }], deps);
    expect(ms.tools.map((t) => [t.name, t.timeoutMs])).toEqual([
      ['echo', 2500],
      ['helper', undefined],
    ]);
    expect(ms.warnings).toEqual([]);
    const seconds = await resolveTools([{ type: 'builtin', name: 'echo', timeout: 30 }], deps);
    expect(seconds.tools[0]!.timeoutMs).toBeUndefined();
    expect(seconds.warnings).toEqual(['tools[0].timeout is in milliseconds; 30 ms is too short — did you mean 30000? The default (120000 ms) is used.']);
  });
});

/** Deeper than the 868 levels at which a cancel overflowed the stack in the run. */
const LEVELS = 2000;

describe('cancel of a deep run', () => {
  it(`reaches ${LEVELS} nested tool loops without overflowing the stack`, async () => {
    const loopDeps = { stream: nestingModel, emit: async () => {}, logger: pino({ level: 'silent' }) };
    let depth = 0;
    let reached!: () => void;
    const deepest = new Promise<void>((resolve) => (reached = resolve));
    const tool: LoopTool = {
      name: 'deeper',
      description: 'goes one level deeper',
      parameters: { type: 'object' },
      toolType: 'subagent',
      run: async (_args, signal) => {
        if (++depth === LEVELS) {
          reached();
          return new Promise<string>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
        }
        return (await runAgentLoop(loopDeps, {}, [{ role: 'user', content: 'go' }], [tool], signal)).output;
      },
    };
    const ctl = new AbortController();
    const run = runAgentLoop(loopDeps, {}, [{ role: 'user', content: 'go' }], [tool], ctl.signal);
    await deepest;
    ctl.abort(new Error('stop'));
    await expect(run).rejects.toThrow('stop');
  }, 120_000);
});

async function* nestingModel(req: ModelCallRequest): AsyncIterable<ModelEvent> {
  yield { type: 'tool_calls', calls: [{ id: 'c', name: 'deeper', arguments: `{"n":${req.messages.length}}` }] };
  yield { type: 'done', finishReason: 'tool_calls', provider: 'p', model: 'm' };
}
