import { ADMIN } from './fake-run-deps.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { CHAIN_DISABLED, ChainError, ChainRunner, ScriptSandbox, chainToolFailure, chainToolInput, chainToolResult, createRuleMsg, resolveTools, type ChainContext } from '../src/index.js';
import { type ParsedChain, normalizeRuleChain, parseChain, validateRuleChain, type RuleChainInput } from '@agentry/definitions';

/** The RuleGo DSL as people write it (issue 28): ids, nulls, vars, disabled, debugMode, chains as tools. */

const logger = pino({ level: 'silent' });
let sandbox: ScriptSandbox;
beforeAll(async () => {
  sandbox = new ScriptSandbox({ workers: 1 });
  await sandbox.warmUp();
});
afterAll(() => sandbox.close());

function parsed(dsl: unknown, id = (dsl as { ruleChain: { id: string } }).ruleChain.id): ParsedChain {
  const loaded = parseChain({ id, dsl });
  if (!loaded.ok) throw new Error(loaded.error);
  return loaded.chain;
}

function context(runner: ChainRunner, chains: Record<string, ParsedChain> = {}): ChainContext {
  const ctx: ChainContext = {
    logger,
    signal: new AbortController().signal,
    sandbox,
    runChain: (id, msg, depth, path) => runner.runById((cid) => (chains[cid] ? { ok: true, chain: chains[cid] } : undefined), id, msg, ctx, { depth, path }),
    complete: () => Promise.reject(new Error('no model here')),
    runAgent: () => Promise.reject(new Error('no agent here')),
  };
  return ctx;
}

describe('normalizeRuleChain', () => {
  it('names nodes node0, node1... as RuleGo, takes the chain id from the body, the URL or a generator, and reads null as empty', () => {
    const input = {
      ruleChain: { name: 'x', configuration: null, extra: 1 },
      metadata: { nodes: [{ type: 'end', additionalInfo: null }, { id: 'b', type: 'end' }, { type: 'end' }], connections: null },
    } as unknown as RuleChainInput;
    const fromUrl = normalizeRuleChain(input, { id: 'url_id', generate: () => 'never' });
    expect(fromUrl.dsl).toEqual({
      ruleChain: { name: 'x', configuration: {}, extra: 1, id: 'url_id' },
      metadata: { nodes: [{ id: 'node0', type: 'end', additionalInfo: {} }, { id: 'b', type: 'end' }, { id: 'node2', type: 'end' }], connections: [] },
    });
    expect(fromUrl.generated).toEqual(['ruleChain.id = "url_id" (from the URL)', 'metadata.nodes[0].id = "node0"', 'metadata.nodes[2].id = "node2"']);
    expect(normalizeRuleChain(input, { generate: () => 'gen' }).generated[0]).toBe('ruleChain.id = "gen" (generated)');
    const withId = { ...input, ruleChain: { ...input.ruleChain, id: 'own' } } as RuleChainInput;
    expect(normalizeRuleChain(withId, { id: 'url_id', generate: () => 'never' }).dsl.ruleChain.id).toBe('own');
    // An import's URL id wins, as RuleGo's New(id, dsl), and says whose place it took.
    const imported = normalizeRuleChain(withId, { id: 'url_id', overrides: true, generate: () => 'never' });
    expect(imported.dsl.ruleChain.id).toBe('url_id');
    expect(imported.generated[0]).toBe('ruleChain.id = "url_id" (from the URL, in place of "own")');
    expect(validateRuleChain(fromUrl.dsl).ok).toBe(true);
  });
});

describe('ruleChain.configuration.vars and ${global.x}', () => {
  it('fills ${vars.x} and ${global.x} in node configurations, leaves message placeholders and unknown names', async () => {
    const runner = new ChainRunner({ globals: () => ({ site: 'berlin' }) });
    const chain = parsed({
      ruleChain: { id: 'vars', name: 'vars', configuration: { vars: { limit: 10, label: 'hot' } } },
      metadata: {
        nodes: [
          { id: 't', type: 'jsTransform', configuration: { jsScript: "metadata.limit='${vars.limit}'; metadata.site='${global.site}'; metadata.miss='${vars.nope}'; return {msg: msg.t > ${vars.limit} ? '${vars.label}' : 'cold', metadata, msgType};" } },
        ],
        connections: [],
      },
    });
    const result = await runner.run(chain, createRuleMsg({ data: { t: 41 } }), context(runner));
    expect(result.msg.data).toBe('hot');
    expect(result.msg.metadata).toEqual({ limit: '10', site: 'berlin', miss: '${vars.nope}' });
  });
});

describe('ruleChain.disabled', () => {
  it('a disabled chain does not run as a sub-chain or by id: RuleGo\'s "the rule chain has been disabled"', async () => {
    const runner = new ChainRunner();
    const off = parsed({ ruleChain: { id: 'off', name: 'off', disabled: true }, metadata: { nodes: [{ id: 'e', type: 'end' }], connections: [] } });
    const caller = parsed({ ruleChain: { id: 'caller', name: 'c' }, metadata: { nodes: [{ id: 'f', type: 'flow', configuration: { targetId: 'off' } }], connections: [] } });
    const ctx = context(runner, { off, caller });
    const direct = await runner.runById(() => ({ ok: true, chain: off }), 'off', createRuleMsg(), ctx).catch((e: unknown) => e);
    expect(direct).toBeInstanceOf(ChainError);
    expect((direct as Error).message).toBe(`chain "off": ${CHAIN_DISABLED}`);
    const nested = await runner.run(caller, createRuleMsg(), ctx).catch((e: unknown) => e);
    expect((nested as Error).message).toBe(`chain "off": ${CHAIN_DISABLED}`);
    // Enabled again, it runs.
    const on = parsed({ ...off.dsl, ruleChain: { ...off.dsl.ruleChain, disabled: false } });
    await expect(runner.runById(() => ({ ok: true, chain: on }), 'off', createRuleMsg(), ctx)).resolves.toMatchObject({ steps: 1 });
  });
});

describe('debugMode', () => {
  it('records the input, output and relation of each node in debug mode (the node\'s flag or the chain\'s), nothing for the others', async () => {
    const runner = new ChainRunner();
    const dsl = {
      ruleChain: { id: 'dbg', name: 'dbg' },
      metadata: {
        nodes: [
          { id: 's1', type: 'jsFilter', debugMode: true, configuration: { jsScript: "return msg=='aa';" } },
          { id: 's2', type: 'jsTransform', debugMode: false, configuration: { jsScript: "return {msg: {bb: 22}, metadata, msgType: 'T2'};" } },
        ],
        connections: [{ fromId: 's1', toId: 's2', type: 'True' }],
      },
    };
    const msg = createRuleMsg({ data: 'aa', type: 'T1', metadata: { k: 'v' } });
    const result = await runner.run(parsed(dsl), msg, context(runner));
    expect(result.trace.map((t) => t.debug)).toEqual([{ chainId: 'dbg', in: msg, out: msg }, undefined]);
    const all = await runner.run(parsed({ ...dsl, ruleChain: { ...dsl.ruleChain, debugMode: true } }), msg, context(runner));
    expect(all.trace.map((t) => [t.nodeId, t.relations, t.debug?.out.type])).toEqual([
      ['s1', ['True'], 'T1'],
      ['s2', ['Success'], 'T2'],
    ]);
    expect(chainToolResult(all, msg).debug).toEqual([
      { chainId: 'dbg', nodeId: 's1', relation: 'True', in: msg, out: msg },
      { chainId: 'dbg', nodeId: 's2', relation: 'Success', in: msg, out: { ...msg, type: 'T2', data: '{"bb":22}' } },
    ]);
  });
});

describe('chains as tools carry messages', () => {
  it('builds the message from the arguments or one argument (any JSON value), the message type and metadata of the tool config', () => {
    expect(chainToolInput({ n: 1 }, undefined)).toMatchObject({ data: '{"n":1}', type: 'MESSAGE', metadata: {} });
    expect(chainToolInput({ text: 'hello' }, { dataField: 'text', msgType: 'TELEMETRY', metadata: { deviceId: 'd1', level: 3 } })).toMatchObject({
      data: 'hello',
      type: 'TELEMETRY',
      metadata: { deviceId: 'd1', level: '3' },
    });
    expect(chainToolInput({ list: [1, 2] }, { dataField: 'list' }).data).toBe('[1,2]');
  });

  it('offers the model one argument of any JSON type with dataField, any object without, and hands the entry\'s config to the run', async () => {
    const calls: unknown[] = [];
    const deps = {
      logger,
      authority: ADMIN,
      builtin: {},
      context: { db: undefined as never, agentId: 'a', runId: 'r', sessionId: null, logger },
      runSubagent: async () => '',
      runChain: async (...args: unknown[]) => {
        calls.push(args.filter((a) => !(a instanceof AbortSignal)));
        return 'result';
      },
    };
    const config = { dataField: 'text', msgType: 'T' };
    const { tools } = await resolveTools([{ type: 'rulechain', name: 'one', targetId: 'c1', config }, { type: 'rulechain', name: 'all', targetId: 'c2' }], deps);
    expect(tools.map((t) => t.parameters)).toEqual([
      { type: 'object', properties: { text: { description: 'the message data: text or any JSON value' } }, required: ['text'] },
      { type: 'object', additionalProperties: true },
    ]);
    await tools[0]!.run({ text: 'hi' }, new AbortController().signal);
    expect(calls).toEqual([['c1', { text: 'hi' }, config]]);
  });

  it('answers the final message with its type, metadata and end relation; a node failure ends on Failure with the error', async () => {
    const runner = new ChainRunner();
    const chain = parsed({
      ruleChain: { id: 'tool', name: 'tool' },
      metadata: {
        nodes: [
          { id: 'f', type: 'jsFilter', configuration: { jsScript: 'return msg.t > 10;' } },
          { id: 'x', type: 'jsTransform', configuration: { jsScript: "metadata.seen='yes'; return {msg: {hot: msg.t}, metadata, msgType: 'HOT'};" } },
          { id: 'boom', type: 'jsTransform', configuration: { jsScript: "throw new Error('cold is broken');" } },
        ],
        connections: [
          { fromId: 'f', toId: 'x', type: 'True' },
          { fromId: 'f', toId: 'boom', type: 'False' },
        ],
      },
    });
    const hot = chainToolInput({ t: 41 }, { msgType: 'TEMP', metadata: { room: 'a' } });
    const ok = chainToolResult(await runner.run(chain, hot, context(runner)), hot);
    expect(ok).toEqual({ relation: 'Success', msgType: 'HOT', metadata: { room: 'a', seen: 'yes' }, data: { hot: 41 } });

    const cold = chainToolInput({ t: 1 }, { msgType: 'TEMP', metadata: { room: 'a' } });
    const err = await runner.run(chain, cold, context(runner)).catch((e: unknown) => e);
    const failed = chainToolFailure(err);
    expect(failed).toMatchObject({ relation: 'Failure', msgType: 'TEMP', data: { t: 1 }, error: expect.stringContaining('cold is broken') as unknown });
    expect(failed!.metadata).toMatchObject({ room: 'a', error: expect.stringContaining('cold is broken') as unknown });
    // A failure that is not a node's (a missing chain) stays an error of the call.
    const missing = await runner.runById(() => undefined, 'nope', cold, context(runner)).catch((e: unknown) => e);
    expect(chainToolFailure(missing)).toBeUndefined();
  });

  it('lists every branch end when there is more than one; the final message is the last', async () => {
    const runner = new ChainRunner();
    const chain = parsed({
      ruleChain: { id: 'fan', name: 'fan' },
      metadata: {
        nodes: [
          { id: 'f', type: 'jsFilter', configuration: { jsScript: 'return true;' } },
          { id: 'a', type: 'jsTransform', configuration: { jsScript: "return {msg: 'a', metadata, msgType: 'A'};" } },
          { id: 'b', type: 'end' },
        ],
        connections: [
          { fromId: 'f', toId: 'a', type: 'True' },
          { fromId: 'f', toId: 'b', type: 'True' },
        ],
      },
    });
    const input = chainToolInput({}, undefined);
    const result = chainToolResult(await runner.run(chain, input, context(runner)), input);
    expect(result.ends?.map((e) => [e.relation, e.msgType, e.data])).toEqual([
      ['Success', 'A', 'a'],
      ['Success', 'MESSAGE', {}],
    ]);
    expect(result).toMatchObject({ relation: 'Success', msgType: 'MESSAGE', data: {} });
  });
});
