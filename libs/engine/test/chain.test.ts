import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import Type from 'typebox';
import { ChainError, ChainRunner, ScriptSandbox, createRuleMsg, defineNodeType, nodeTypes, renderTemplate, type ChainContext, type ChainRunOptions, type CompleteRequest, type RuleMsg, type SubChainResult } from '../src/index.js';
import { type ParsedChain, parseChain } from '@agentry/definitions';

/** The rule-chain engine: every node type, relation routing, failures, limits, sub-chains. */

type N = { id: string; type: string; configuration?: Record<string, unknown> };
type C = [from: string, to: string, type: string];

function chain(id: string, nodes: N[], connections: C[] = [], firstNodeIndex?: number): ParsedChain {
  const dsl = {
    ruleChain: { id, name: `Chain ${id}` },
    metadata: {
      ...(firstNodeIndex !== undefined ? { firstNodeIndex } : {}),
      nodes,
      connections: connections.map(([fromId, toId, type]) => ({ fromId, toId, type })),
    },
  };
  const loaded = parseChain({ id, dsl });
  if (!loaded.ok) throw new Error(loaded.error);
  return loaded.chain;
}

const js = (id: string, type: 'jsFilter' | 'jsTransform' | 'jsSwitch', jsScript: string): N => ({ id, type, configuration: { jsScript } });
/** A transform that appends `tag` to `msg.seen` (the path the message took). */
const mark = (id: string, tag = id): N => js(id, 'jsTransform', `msg.seen = (msg.seen || []).concat(['${tag}']); return {msg, metadata, msgType};`);
const end = (id = 'end'): N => ({ id, type: 'end' });

const logLines: Array<Record<string, unknown>> = [];
const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });

let sandbox: ScriptSandbox;
beforeAll(async () => {
  sandbox = new ScriptSandbox({ workers: 2 });
  await sandbox.warmUp();
});
afterAll(() => sandbox.close());

const runner = new ChainRunner();

interface Fakes {
  chains?: Record<string, ParsedChain>;
  runner?: ChainRunner;
  complete?: (req: CompleteRequest) => Promise<string>;
  runAgent?: ChainContext['runAgent'];
  signal?: AbortSignal;
}

function context(f: Fakes = {}): ChainContext {
  const r = f.runner ?? runner;
  const ctx: ChainContext = {
    logger,
    signal: f.signal ?? new AbortController().signal,
    sandbox,
    runChain: (id, msg, depth, path) => r.runById((cid) => (f.chains?.[cid] ? { ok: true, chain: f.chains[cid] } : undefined), id, msg, ctx, { depth, path }),
    complete: f.complete ?? (() => Promise.reject(new Error('no model in this test'))),
    runAgent: f.runAgent ?? (() => Promise.reject(new Error('no agent in this test'))),
  };
  return ctx;
}

const data = (msg: RuleMsg) => JSON.parse(msg.data) as Record<string, unknown>;

async function runError(c: ParsedChain, msg: RuleMsg, ctx = context(), opts?: ChainRunOptions, r = runner): Promise<ChainError> {
  const err = await r.run(c, msg, ctx, opts).then(
    () => {
      throw new Error('expected the run to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ChainError);
  return err as ChainError;
}

describe('node registry', () => {
  it('holds one definition per type: its name, form description, configuration schema and executor', () => {
    for (const [type, def] of Object.entries(nodeTypes)) {
      expect(def.type).toBe(type);
      expect(def.description).toEqual(expect.any(String));
      expect(def.configuration).toMatchObject({ type: 'object' });
      expect(def.execute).toEqual(expect.any(Function));
    }
  });

  it('runs a node type the runner is given instead of the registry (one definition, nothing else to register)', async () => {
    const shout = defineNodeType({
      type: 'shout',
      description: 'upper-cases the data',
      configuration: Type.Object({ suffix: Type.Optional(Type.String()) }),
      execute: async (msg, config) => ({ msg: { ...msg, data: msg.data.toUpperCase() + (config.suffix ?? '') }, relation: 'Success' }),
    });
    const custom = new ChainRunner({ executors: { ...nodeTypes, shout } });
    const c = chain('custom', [{ id: 's', type: 'end' }]);
    const withShout = { ...c, nodes: new Map([['s', { id: 's', type: 'shout', configuration: { suffix: '!' } }]]) };
    const result = await custom.run(withShout, createRuleMsg({ data: 'hi' }), context());
    expect(result.msg.data).toBe('HI!');
  });
});

describe('ChainRunner: routing', () => {
  it('runs from the first node along Success to end, with a trace', async () => {
    const c = chain('lin', [mark('a'), mark('b'), end()], [['a', 'b', 'Success'], ['b', 'end', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { x: 1 } }), context());
    expect(data(result.msg)).toEqual({ x: 1, seen: ['a', 'b'] });
    expect(result.trace.map((t) => [t.nodeId, t.type, t.relations])).toEqual([
      ['a', 'jsTransform', ['Success']],
      ['b', 'jsTransform', ['Success']],
      ['end', 'end', []],
    ]);
    expect(result.trace.every((t) => typeof t.ms === 'number' && t.error === undefined)).toBe(true);
    expect(result.ends).toEqual([{ nodeId: 'end', relation: undefined, msg: result.msg }]);
    expect(result.steps).toBe(3);
  });

  it('starts at firstNodeIndex', async () => {
    const c = chain('first', [mark('a'), mark('b'), end()], [['a', 'b', 'Success'], ['b', 'end', 'Success']], 1);
    const result = await runner.run(c, createRuleMsg({ data: {} }), context());
    expect(data(result.msg).seen).toEqual(['b']);
  });

  it('routes a jsFilter along True or False', async () => {
    const c = chain(
      'filter',
      [js('f', 'jsFilter', 'return msg.temperature > 50;'), mark('hot'), mark('cold'), end()],
      [['f', 'hot', 'True'], ['f', 'cold', 'False'], ['hot', 'end', 'Success'], ['cold', 'end', 'Success']],
    );
    const hot = await runner.run(c, createRuleMsg({ data: { temperature: 60 } }), context());
    const cold = await runner.run(c, createRuleMsg({ data: { temperature: 10 } }), context());
    expect(data(hot.msg).seen).toEqual(['hot']);
    expect(data(cold.msg).seen).toEqual(['cold']);
    expect(hot.trace[0]?.relations).toEqual(['True']);
    expect(cold.trace[0]?.relations).toEqual(['False']);
  });

  it('ends a branch at a relation without a connection (a leaf)', async () => {
    const c = chain('leaf', [js('f', 'jsFilter', 'return false;'), mark('t')], [['f', 't', 'True']]);
    const input = createRuleMsg({ data: { v: 1 } });
    const result = await runner.run(c, input, context());
    expect(result.ends).toEqual([{ nodeId: 'f', relation: 'False', msg: input }]);
    expect(result.msg).toEqual(input);
  });

  it('fans a jsSwitch out to each named relation in the order returned', async () => {
    const c = chain(
      'switch',
      [js('s', 'jsSwitch', "return ['second', 'nowhere', 'first'];"), mark('x1'), mark('x2'), mark('y'), end('e1'), end('e2')],
      [
        ['s', 'y', 'first'],
        ['s', 'x1', 'second'],
        ['s', 'x2', 'second'],
        ['x1', 'e1', 'Success'],
        ['x2', 'e1', 'Success'],
        ['y', 'e2', 'Success'],
      ],
    );
    const result = await runner.run(c, createRuleMsg({ data: {} }), context());
    expect(result.trace.map((t) => t.nodeId)).toEqual(['s', 'x1', 'e1', 'x2', 'e1', 'y', 'e2']);
    expect(result.ends.map((e) => [e.nodeId, data(e.msg).seen])).toEqual([
      ['e1', ['x1']],
      ['e1', ['x2']],
      ['e2', ['y']],
    ]);
    expect(data(result.msg).seen).toEqual(['y']); // the last end
    expect(result.trace[0]?.relations).toEqual(['second', 'nowhere', 'first']);
  });

  it('gives each branch its own copy of the message', async () => {
    const c = chain(
      'copies',
      [js('s', 'jsSwitch', "return 'go';"), js('m1', 'jsTransform', "metadata.who = 'one'; return {metadata};"), js('m2', 'jsTransform', 'return {metadata};')],
      [['s', 'm1', 'go'], ['s', 'm2', 'go']],
    );
    const result = await runner.run(c, createRuleMsg({ metadata: { k: 'v' } }), context());
    expect(result.ends.map((e) => e.msg.metadata)).toEqual([{ k: 'v', who: 'one' }, { k: 'v' }]);
  });

  it('keeps running other branches after one reaches end', async () => {
    const c = chain('ends', [js('s', 'jsSwitch', "return ['a', 'b'];"), end('ea'), mark('b'), end('eb')], [['s', 'ea', 'a'], ['s', 'b', 'b'], ['b', 'eb', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: {} }), context());
    expect(result.ends.map((e) => e.nodeId)).toEqual(['ea', 'eb']);
  });

  it('returns the input for a chain without nodes', async () => {
    const input = createRuleMsg({ data: 'hello' });
    const result = await runner.run(chain('empty', []), input, context());
    expect(result).toMatchObject({ msg: input, ends: [], trace: [], steps: 0 });
  });
});

describe('ChainRunner: failures and limits', () => {
  const throwing = js('t', 'jsTransform', "var a = 1;\nthrow new Error('bad input ' + a);");

  it('routes a throwing node along Failure with its input and metadata.error', async () => {
    const c = chain('fail', [throwing, mark('ok'), mark('recover'), end()], [['t', 'ok', 'Success'], ['t', 'recover', 'Failure'], ['recover', 'end', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { v: 1 }, metadata: { a: 'b' } }), context());
    expect(data(result.msg)).toEqual({ v: 1, seen: ['recover'] });
    expect(result.msg.metadata).toEqual({ a: 'b', error: 'Error: bad input 1 (line 2)' });
    expect(result.trace[0]).toMatchObject({ nodeId: 't', relations: ['Failure'], error: 'Error: bad input 1 (line 2)' });
  });

  it('fails the run with the node error when there is no Failure connection', async () => {
    const c = chain('fail2', [mark('a'), throwing, end()], [['a', 't', 'Success'], ['t', 'end', 'Success']]);
    const err = await runError(c, createRuleMsg({ data: {} }));
    expect(err.message).toBe('chain "fail2", node "t" (jsTransform): Error: bad input 1 (line 2)');
    expect(err).toMatchObject({ chainId: 'fail2', nodeId: 't' });
    expect(err.trace.map((t) => [t.nodeId, t.relations, t.error])).toEqual([
      ['a', ['Success'], undefined],
      ['t', ['Failure'], 'Error: bad input 1 (line 2)'],
    ]);
  });

  it('treats a wrong script result as a node failure', async () => {
    const cases: Array<[N, RegExp]> = [
      [js('x', 'jsSwitch', 'return [1];'), /jsSwitch: the script must return an array of relation names, not \[1\]/],
      [js('x', 'jsTransform', 'return 5;'), /jsTransform: the script must return an object/],
      [js('x', 'jsFilter', 'return msg.;'), /SyntaxError: .*\(line 1\)/],
      [{ id: 'x', type: 'jsFilter' }, /jsFilter needs a jsScript/],
    ];
    for (const [node, message] of cases) {
      expect((await runError(chain('wrong', [node]), createRuleMsg({ data: {} }))).message).toMatch(message);
    }
  });

  it('cuts a loop at the step limit', async () => {
    const loop = chain('loop', [mark('a'), mark('b')], [['a', 'b', 'Success'], ['b', 'a', 'Success']]);
    const err = await runError(loop, createRuleMsg({ data: {} }), context(), {}, new ChainRunner({ maxSteps: 20 }));
    expect(err.message).toBe('chain "loop": step limit 20 reached at node "a"; does the chain loop?');
    expect(err.trace).toHaveLength(20);
    // The default limit is 1000 node executions.
    const logLoop = chain('logloop', [{ id: 'l1', type: 'log' }, { id: 'l2', type: 'log' }], [['l1', 'l2', 'Success'], ['l2', 'l1', 'Success']]);
    const quiet = { ...context(), logger: pino({ level: 'silent' }) };
    expect((await runError(logLoop, createRuleMsg(), quiet)).message).toMatch(/step limit 1000 reached/);
  });

  it('stops between nodes when the signal aborts', async () => {
    const controller = new AbortController();
    controller.abort(new Error('client went away'));
    const err = await runError(chain('abort', [mark('a')]), createRuleMsg(), context({ signal: controller.signal }));
    expect(err.message).toBe('chain "abort": cancelled');
  });
});

describe('node types', () => {
  it('jsTransform: replaces data, metadata and type; left-out fields stay', async () => {
    const c = chain('tr', [
      js('t', 'jsTransform', "return {msg: 'plain ' + msg.n, metadata: {count: 3, ok: true, name: metadata.name}, msgType: 'OUT'};"),
      js('u', 'jsTransform', "return {metadata: Object.assign(metadata, {more: 'x'})};"),
      { id: 'v', type: 'jsTransform' },
    ], [['t', 'u', 'Success'], ['u', 'v', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { n: 7 }, type: 'IN', metadata: { name: 'n1', drop: 'me' } }), context());
    expect(result.msg).toMatchObject({ data: 'plain 7', type: 'OUT', metadata: { count: '3', ok: 'true', name: 'n1', more: 'x' } });
  });

  it('jsFilter: a result that is not a boolean is False with a warning, as in RuleGo', async () => {
    for (const [script, relation] of [["return 'yes';", 'False'], ['return 1;', 'False'], ['return msg.missing;', 'False'], ['return true;', 'True']] as const) {
      logLines.length = 0;
      const result = await runner.run(chain('nb', [js('f', 'jsFilter', script)]), createRuleMsg({ data: {} }), context());
      expect(result.ends[0]?.relation, script).toBe(relation);
      const warned = logLines.filter((l) => l.level === 40 && String(l.msg).startsWith('jsFilter: the script returned'));
      expect(warned, script).toHaveLength(relation === 'True' ? 0 : 1);
    }
    expect(logLines).toEqual([]);
    await runner.run(chain('nb', [js('f', 'jsFilter', "return 'yes';")]), createRuleMsg({ data: {} }), context());
    expect(logLines[0]).toMatchObject({ chainId: 'nb', nodeId: 'f', msg: 'jsFilter: the script returned "yes", not true or false; taken as False' });
  });

  it("scripts get RuleGo's fourth parameter dataType: JSON when the data is JSON, else TEXT", async () => {
    const c = (type: 'jsFilter' | 'jsSwitch' | 'jsTransform', script: string) => chain('dt', [js('x', type, script)]);
    const json = createRuleMsg({ data: { a: 1 } });
    const text = createRuleMsg({ data: 'test data' });
    // RuleGo's js_filter_node_test: "return String(dataType) === 'JSON';"
    expect((await runner.run(c('jsFilter', "return String(dataType) === 'JSON';"), json, context())).ends[0]?.relation).toBe('True');
    expect((await runner.run(c('jsFilter', "return String(dataType) === 'TEXT';"), json, context())).ends[0]?.relation).toBe('False');
    expect((await runner.run(c('jsFilter', "return String(dataType) === 'TEXT';"), text, context())).ends[0]?.relation).toBe('True');
    // js_switch_node_test: "return [String(dataType)];"
    expect((await runner.run(c('jsSwitch', 'return [String(dataType)];'), text, context())).ends[0]?.relation).toBe('TEXT');
    const out = await runner.run(c('jsTransform', 'metadata.dt = dataType; return {msg, metadata, msgType};'), json, context());
    expect(out.msg.metadata.dt).toBe('JSON');
  });

  it('jsFilter and friends see non-JSON data as a string', async () => {
    const c = chain('str', [js('f', 'jsFilter', "return typeof msg === 'string' && msg.startsWith('hello');")]);
    expect((await runner.run(c, createRuleMsg({ data: 'hello world' }), context())).ends[0]?.relation).toBe('True');
  });

  it('log: writes the script text, or the message, through the logger', async () => {
    logLines.length = 0;
    const c = chain('lg', [
      { id: 'l1', type: 'log', configuration: { jsScript: "return 'Incoming: ' + JSON.stringify(msg) + ' from ' + metadata.room;" } },
      { id: 'l2', type: 'log' },
    ], [['l1', 'l2', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { t: 1 }, metadata: { room: 'r1' } }), context());
    expect(result.trace.map((t) => t.relations)).toEqual([['Success'], ['Success']]);
    expect(logLines).toMatchObject([
      { chainId: 'lg', nodeId: 'l1', msg: 'Incoming: {"t":1} from r1' },
      { chainId: 'lg', nodeId: 'l2', data: '{"t":1}', metadata: { room: 'r1' }, msg: 'rule chain message' },
    ]);
  });

  it('end: ends the branch; nothing after it runs', async () => {
    const c = chain('e', [end('e'), mark('after')], [['e', 'after', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: {} }), context());
    expect(result.trace.map((t) => t.nodeId)).toEqual(['e']);
  });

  it('ai/llm: one completion from templated prompts; the answer becomes the data', async () => {
    const requests: CompleteRequest[] = [];
    const complete = async (req: CompleteRequest) => {
      requests.push(req);
      return `answer ${requests.length}`;
    };
    const c = chain('llm', [
      {
        id: 'l',
        type: 'ai/llm',
        configuration: {
          provider: 'p1',
          model: 'm1',
          systemPrompt: 'You are a ${metadata.role}.',
          messages: [{ role: 'user', content: 'Translate "${msg.text}" into ${metadata.lang}' }],
          params: { temperature: 0.2 },
        },
      },
      { id: 'plain', type: 'ai/llm' },
    ], [['l', 'plain', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: { text: 'Hallo' }, metadata: { role: 'translator', lang: 'English' } }), context({ complete }));
    expect(requests[0]).toMatchObject({
      provider: 'p1',
      model: 'm1',
      params: { temperature: 0.2 },
      messages: [
        { role: 'system', content: 'You are a translator.' },
        { role: 'user', content: 'Translate "Hallo" into English' },
      ],
    });
    expect(requests[0]?.signal).toBeInstanceOf(AbortSignal);
    // Without messages, the data is the user message.
    expect(requests[1]?.messages).toEqual([{ role: 'user', content: 'answer 1' }]);
    expect(requests[1]).not.toHaveProperty('provider');
    expect(result.msg.data).toBe('answer 2');
  });

  it('ai/llm: a model failure routes along Failure', async () => {
    const c = chain('llmfail', [{ id: 'l', type: 'ai/llm' }, end('oops')], [['l', 'oops', 'Failure']]);
    const result = await runner.run(c, createRuleMsg({ data: 'hi' }), context({ complete: () => Promise.reject(new Error('provider p1: 503')) }));
    expect(result.ends[0]).toMatchObject({ nodeId: 'oops', msg: { data: 'hi', metadata: { error: 'provider p1: 503' } } });
  });

  it('ai/agent: calls runAgent with the node configuration; the answer becomes the data', async () => {
    const calls: Array<[unknown, RuleMsg]> = [];
    const runAgent: ChainContext['runAgent'] = async (config, msg) => {
      calls.push([config, msg]);
      return 'agent says hi';
    };
    const config = { provider: 'p', model: 'm', systemPrompt: 'Be brief.', maxStep: 3 };
    const c = chain('agent', [{ id: 'a', type: 'ai/agent', configuration: config }, end()], [['a', 'end', 'Success']]);
    const result = await runner.run(c, createRuleMsg({ data: 'hello', metadata: { sessionId: 's1' } }), context({ runAgent }));
    expect(calls).toHaveLength(1);
    expect(calls[0]?.[0]).toEqual(config);
    expect(calls[0]?.[1]).toMatchObject({ data: 'hello', metadata: { sessionId: 's1' } });
    expect(result.msg).toMatchObject({ data: 'agent says hi', metadata: { sessionId: 's1' } });
  });

  it('accepts a context whose hooks are class methods using private state', async () => {
    class Hooks {
      readonly #answer = 'from a class';
      logger = logger;
      signal = new AbortController().signal;
      sandbox = sandbox;
      runChain(): Promise<SubChainResult> {
        return Promise.reject(new Error('none'));
      }
      async complete(): Promise<string> {
        return this.#answer;
      }
      async runAgent(): Promise<string> {
        return this.#answer;
      }
    }
    const c = chain('cls', [{ id: 'l', type: 'ai/llm' }, { id: 'a', type: 'ai/agent' }], [['l', 'a', 'Success']]);
    expect((await runner.run(c, createRuleMsg({ data: 'q' }), new Hooks())).msg.data).toBe('from a class');
  });

  it('flow: runs another chain and merges its branch ends into one message, as RuleGo (TellFlowAndMerge)', async () => {
    // Two ends in the sub-chain: s1 -> a and s1 -> b, each setting data, type and metadata.
    const set = (id: string) => js(id, 'jsTransform', `metadata.from_${id} = '${id}'; metadata.shared = '${id}'; return {msg: {branch: '${id}'}, metadata, msgType: 'SUB_${id}'};`);
    const sub = chain('sub', [mark('s1', 'sub'), set('a'), set('b')], [['s1', 'a', 'Success'], ['s1', 'b', 'Success']]);
    const main = chain('main', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub' } }, js('after', 'jsTransform', 'metadata.after = String(Array.isArray(msg)); return {msg, metadata, msgType};')], [['f', 'after', 'Success']]);
    const input = createRuleMsg({ type: 'IN', data: { x: 1 }, metadata: { keep: 'k' } });
    const result = await runner.run(main, input, context({ chains: { sub } }));
    // The input's id and type; its metadata plus that of every end (the last end's value wins).
    expect(result.msg).toMatchObject({ id: input.id, type: 'IN', metadata: { keep: 'k', from_a: 'a', from_b: 'b', shared: 'b', after: 'true' } });
    expect(JSON.parse(result.msg.data)).toEqual([
      { msg: { id: input.id, dataType: 'JSON', type: 'SUB_a', data: '{"branch":"a"}', metadata: {} }, err: '', nodeId: 'a' },
      { msg: { id: input.id, dataType: 'JSON', type: 'SUB_b', data: '{"branch":"b"}', metadata: {} }, err: '', nodeId: 'b' },
    ]);
    // extend: true continues with the last end as it is.
    const extended = chain('ext', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub', extend: true } }]);
    const last = await runner.run(extended, input, context({ chains: { sub } }));
    expect(last.msg).toMatchObject({ type: 'SUB_b', data: '{"branch":"b"}', metadata: { from_b: 'b' } });
    expect(last.msg.metadata.from_a).toBeUndefined();
  });

  it('flow: a sub-chain end on Failure sends the merged message along Failure, without that end\'s metadata', async () => {
    // s0 fans out to ok (ends on Success) and bad -> sw (chooses Failure, which has no connection: an end on Failure).
    const sub = chain('sub', [
      mark('s0'),
      js('ok', 'jsTransform', "metadata.fine = 'yes'; return {msg, metadata, msgType};"),
      js('bad', 'jsTransform', "metadata.bad = 'no'; return {msg, metadata, msgType};"),
      js('sw', 'jsSwitch', "return ['Failure'];"),
    ], [['s0', 'ok', 'Success'], ['s0', 'bad', 'Success'], ['bad', 'sw', 'Success']]);
    const main = chain('main', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub' } }, end('handled')], [['f', 'handled', 'Failure']]);
    const result = await runner.run(main, createRuleMsg({ data: {} }), context({ chains: { sub } }));
    expect(result.ends.map((e) => e.nodeId)).toEqual(['handled']);
    expect(result.msg.metadata).toMatchObject({ fine: 'yes', error: 'failed' });
    expect(result.msg.metadata.bad).toBeUndefined();
    expect((JSON.parse(result.msg.data) as Array<{ err: string; nodeId: string }>).map((b) => [b.nodeId, b.err])).toEqual([
      ['ok', ''],
      ['sw', 'failed'],
    ]);
  });

  it('flow: the sub-chain\'s debugMode steps join the calling run\'s trace', async () => {
    const sub = chain('sub', [mark('s1', 'sub')]);
    (sub.dsl.ruleChain as { debugMode?: boolean }).debugMode = true;
    const main = chain('main', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub' } }]);
    const result = await runner.run(main, createRuleMsg({ data: {} }), context({ chains: { sub } }));
    expect(result.trace.map((t) => [t.nodeId, t.debug?.chainId])).toEqual([
      ['s1', 'sub'],
      ['f', undefined],
    ]);
  });

  it('flow: a failing or missing sub-chain routes along Failure, else fails the run', async () => {
    const sub = chain('sub', [js('t', 'jsTransform', "throw new Error('inner');")]);
    const withFailure = chain('m', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub' } }, end('handled')], [['f', 'handled', 'Failure']]);
    const handled = await runner.run(withFailure, createRuleMsg(), context({ chains: { sub } }));
    expect(handled.ends[0]?.msg.metadata.error).toBe('chain "sub", node "t" (jsTransform): Error: inner (line 1)');

    const bare = chain('m', [{ id: 'f', type: 'flow', configuration: { targetId: 'sub' } }]);
    expect((await runError(bare, createRuleMsg(), context({ chains: { sub } }))).message).toBe('chain "sub", node "t" (jsTransform): Error: inner (line 1)');
    const missing = chain('m', [{ id: 'f', type: 'flow', configuration: { targetId: 'nope' } }]);
    expect((await runError(missing, createRuleMsg(), context())).message).toBe('chain "nope" does not exist');
  });

  it('flow: stops a cycle of chains at the depth limit, naming the path', async () => {
    const a = chain('a', [{ id: 'fa', type: 'flow', configuration: { targetId: 'b' } }]);
    const b = chain('b', [{ id: 'fb', type: 'flow', configuration: { targetId: 'a' } }]);
    const err = await runError(a, createRuleMsg(), context({ chains: { a, b } }));
    expect(err.message).toBe(
      'chain "b", node "fb" (flow): sub-chain depth limit 5 exceeded (a -> b -> a -> b -> a -> b -> a); do the chains call each other in a cycle?',
    );
  });
});

describe('renderTemplate', () => {
  const msg = createRuleMsg({ id: 'm1', type: 'T', data: { a: { b: 'x', n: 2 }, list: [1] }, metadata: { k: 'v', 'dotted.key': 'd' } });

  it('fills msg, metadata, type and id placeholders', () => {
    expect(renderTemplate('${msg.a.b}/${msg.a.n}/${msg.list}/${msg.a}', msg)).toBe('x/2/[1]/{"b":"x","n":2}');
    expect(renderTemplate('${metadata.k}|${metadata.dotted.key}|${metadata.none}|${k}', msg)).toBe('v|d||v');
    expect(renderTemplate('${msgType} ${id} ${ msg.a.b }', msg)).toBe('T m1 x');
    expect(renderTemplate('${msg}', msg)).toBe(msg.data);
    expect(renderTemplate('${msg.missing.deep}!', msg)).toBe('!');
  });

  it('leaves unknown placeholders as written', () => {
    expect(renderTemplate('${global.x} ${unknown} $notone', msg)).toBe('${global.x} ${unknown} $notone');
  });
});
