import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinTools } from '@agentry/engine';
import type { Runtime } from '@agentry/runtime';
import { startFakeModel, type FakeModel, type FakeRequest } from '@agentry/testing';
import { startAgentWorker } from '@agentry/agent-worker';
import { startGateway } from '@agentry/gateway';
import { bootEmbedded, fakeModelConfig, type EmbeddedRuntime } from './harness.js';

/**
 * RuleGo's own DSL test files (e2e/fixtures/rulego, SOURCE.md names repository, commit and
 * paths), posted to POST /api/v1/rules exactly as written and run with the inputs of the Go tests
 * that load them, asserting what those tests assert. Each chain runs the way a user's would: an
 * agent calls it as a rule-chain tool (the fake model makes the call), the tool config gives
 * RuleGo's message type and metadata, and the tool result is the chain's final message.
 */
const API_KEY = 'sk-rulego-conformance-0123456789';
const FIXTURES = path.join(import.meta.dirname, 'fixtures', 'rulego');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8');

let runtime: Runtime;
let fake: FakeModel;
let baseURL: string;
let embedded: EmbeddedRuntime | undefined;

beforeAll(async () => {
  fake = await startFakeModel();
  embedded = await bootEmbedded('rulego-conformance', [
    'server: {host: 127.0.0.1, port: 0}',
    ...fakeModelConfig(fake),
    `channels: {api: {accounts: {conformance: {api_key: "${API_KEY}"}}}}`,
    'worker: {chain_globals: {site: berlin}}',
  ]);
  runtime = embedded.runtime;
  await startAgentWorker(runtime, { builtin: builtinTools });
  const { port } = await startGateway(runtime);
  runtime.health.markStarted();
  baseURL = `http://127.0.0.1:${port}/api/v1`;
}, 60_000);

afterAll(async () => {
  await embedded?.stop();
  await fake?.close();
});

/** The file's text as the body, not a re-serialisation: "as written". */
async function postRule(text: string, id?: string, method: 'POST' | 'PUT' = 'POST', fieldValidation?: 'Strict' | 'Warn' | 'Ignore') {
  const query = new URLSearchParams();
  if (method === 'POST' && id) query.set('id', id);
  if (fieldValidation) query.set('fieldValidation', fieldValidation);
  const url = `${baseURL}/rules${method === 'PUT' ? `/${id}` : ''}${query.size > 0 ? `?${query}` : ''}`;
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: text });
  return {
    status: res.status,
    body: (await res.json()) as Record<string, unknown> & { error?: string },
    generated: res.headers.get('x-agentry-generated-ids'),
    warning: res.headers.get('warning'),
  };
}

interface End {
  relation: string;
  msgType: string;
  metadata: Record<string, string>;
  data: unknown;
}
interface ToolResult extends End {
  error?: string;
  ends?: End[];
  debug?: Array<{ chainId: string; nodeId: string; relation: string; in: { data: string; type: string }; out: { data: string; type: string } }>;
}

let agents = 0;

/**
 * RuleGo's `ruleEngine.OnMsg(types.NewMsg(0, msgType, types.JSON, metadata, data))`: an agent
 * whose rule-chain tool carries `msgType` and `metadata` in its config calls chain `chainId` with
 * `data` (a string as it is, any other value as JSON); the model repeats the tool result.
 */
async function onMsg(chainId: string, msgType: string, metadata: Record<string, string>, data: unknown): Promise<ToolResult> {
  const agentId = `caller_${++agents}`;
  const created = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      ruleChain: { id: agentId, name: agentId },
      metadata: {
        nodes: [
          {
            id: 'agent',
            type: 'ai/agent',
            configuration: {
              provider: 'fake',
              tools: [{ type: 'rulechain', name: 'on_msg', targetId: chainId, config: { dataField: 'data', msgType, metadata } }],
            },
          },
        ],
        connections: [],
      },
    }),
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${await created.text()}`);
  fake.script({ toolCalls: [{ id: `c${agents}`, name: 'on_msg', arguments: JSON.stringify({ data }) }] }, (req: FakeRequest) => {
    const result = [...req.body.messages].reverse().find((m) => m.role === 'tool');
    return { text: String(result?.content ?? '(no tool result)') };
  });
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: agentId, messages: [{ role: 'user', content: 'run it' }] }),
  });
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  if (res.status !== 200) throw new Error(`chat: ${res.status} ${JSON.stringify(body)}`);
  const text = body.choices[0]!.message.content;
  try {
    return JSON.parse(text) as ToolResult;
  } catch {
    throw new Error(`the tool did not answer a message: ${text}`);
  }
}

/**
 * Several `OnMsg` at once: one agent with a rule-chain tool per message (each with its own
 * metadata); the fake model asks for all of them in one turn, which the agent runs in parallel,
 * and then repeats every tool result, in call order, as a JSON list.
 */
async function onMsgConcurrently(chainId: string, msgType: string, msgs: Array<{ metadata: Record<string, string>; data: unknown }>): Promise<ToolResult[]> {
  const agentId = `caller_${++agents}`;
  const tools = msgs.map((m, i) => ({ type: 'rulechain', name: `on_msg_${i}`, targetId: chainId, config: { dataField: 'data', msgType, metadata: m.metadata } }));
  const created = await fetch(`${baseURL}/agents`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ruleChain: { id: agentId, name: agentId }, metadata: { nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'fake', tools } }], connections: [] } }),
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${await created.text()}`);
  const toolCalls = msgs.map((m, i) => ({ id: `c${agents}_${i}`, name: `on_msg_${i}`, arguments: JSON.stringify({ data: m.data }) }));
  fake.script({ toolCalls }, (req: FakeRequest) => {
    const results = req.body.messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(String(m.content)) as unknown);
    return { text: JSON.stringify(results) };
  });
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: agentId, messages: [{ role: 'user', content: 'run them' }] }),
  });
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  if (res.status !== 200) throw new Error(`chat: ${res.status} ${JSON.stringify(body)}`);
  return JSON.parse(body.choices[0]!.message.content) as ToolResult[];
}

describe('RuleGo testdata/rule, posted as written and run as the Go tests run them', { timeout: 30_000 }, () => {
  it('filter_node.json (rulego_test.go TestDefaultRuleGo): no chain or node id, configuration null; loads as "aa" and filters {"temperature":41}', async () => {
    const created = await postRule(fixture('filter_node'), 'aa');
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.generated).toBe('ruleChain.id = "aa" (from the URL); metadata.nodes[0].id = "node0"');
    // Get("aa") is there; the file's unknown field is kept as written.
    const stored = (await (await fetch(`${baseURL}/rules/aa`)).json()) as { ruleChain: Record<string, unknown> };
    expect(stored.ruleChain).toMatchObject({ id: 'aa', firstRuleNodeId: null, configuration: {} });
    const end = await onMsg('aa', 'TEST_MSG_TYPE1', { productType: 'test01' }, { temperature: 41 });
    expect(end).toMatchObject({ relation: 'True', msgType: 'TEST_MSG_TYPE1', data: { temperature: 41 }, metadata: { productType: 'test01' } });
  });

  it('not_debug_mode_chain.json (engine_test.go TestNotDebugModel): ends as TEST_MSG_TYPE2 without error; debug only once debugMode is true', async () => {
    // Under its own id, so that the reload (a PUT) is the file as written too.
    const id = 'not_debug_mode_chain';
    expect((await postRule(fixture('not_debug_mode_chain'))).status).toBe(201);
    const quiet = await onMsg(id, 'TEST_MSG_TYPE', { productType: 'test01' }, { temperature: 41 });
    expect(quiet.msgType).toBe('TEST_MSG_TYPE2');
    expect(quiet.relation).toBe('Success');
    expect(quiet.error).toBeUndefined();
    expect(quiet.debug).toBeUndefined();
    // ReloadSelf with "debugMode": false replaced by true: OnDebug is called.
    const reloaded = fixture('not_debug_mode_chain').replaceAll('"debugMode": false', '"debugMode": true');
    expect((await postRule(reloaded, id, 'PUT')).status).toBe(200);
    const loud = await onMsg(id, 'TEST_MSG_TYPE', { productType: 'test01' }, { temperature: 41 });
    expect(loud.debug?.length).toBeGreaterThan(0);
  });

  it('test_debug_mode_chain.json (engine_test.go TestRuleChainDebugMode): 2 nodes in and out in debug, 1 with sub_s1 off, 0 with both off', async () => {
    // Its ruleChain.id is "sub_chain" (sub_chain.json is posted as sub_chain_01, as the Go test names it).
    const id = 'sub_chain';
    const file = fixture('test_debug_mode_chain');
    expect((await postRule(file)).status).toBe(201);
    const both = await onMsg(id, 'TEST_MSG_TYPE', { productType: 'productType01' }, 'aa');
    expect(both.debug?.map((d) => [d.nodeId, d.relation])).toEqual([
      ['sub_s1', 'True'],
      ['sub_s2', 'Success'],
    ]);
    expect(both.debug?.[1]).toMatchObject({ in: { data: 'aa', type: 'TEST_MSG_TYPE' }, out: { data: '{"bb":22}', type: 'TEST_MSG_TYPE2' } });
    // The Go test switches debugMode off on sub_s1, then on sub_s2 too; here each is a PUT of the file so edited.
    const dsl = JSON.parse(file) as { metadata: { nodes: Array<{ debugMode: boolean }> } };
    dsl.metadata.nodes[0]!.debugMode = false;
    expect((await postRule(JSON.stringify(dsl), id, 'PUT')).status).toBe(200);
    expect((await onMsg(id, 'TEST_MSG_TYPE', { productType: 'productType01' }, 'aa')).debug?.map((d) => d.nodeId)).toEqual(['sub_s2']);
    dsl.metadata.nodes[1]!.debugMode = false;
    expect((await postRule(JSON.stringify(dsl), id, 'PUT')).status).toBe(200);
    expect((await onMsg(id, 'TEST_MSG_TYPE', { productType: 'productType01' }, 'aa')).debug).toBeUndefined();
  });

  it('chain_has_sub_chain_node.json + sub_chain.json (engine_test.go TestSubRuleChain): two ends, the root branch and the sub-chain branch', async () => {
    expect((await postRule(fixture('sub_chain'), 'sub_chain_01')).status).toBe(201);
    expect((await postRule(fixture('chain_has_sub_chain_node'), 'has_sub_chain')).status).toBe(201);
    const metadata = { productType: 'productType01', name1: 'name1', name2: 'name2', name3: 'name3', name4: 'name4' };
    const result = await onMsg('has_sub_chain', 'TEST_MSG_TYPE', metadata, 'aa');
    expect(result.ends).toHaveLength(2);
    const [root, sub] = result.ends!;
    // msg.Type == "TEST_MSG_TYPE1": root chain end.
    expect(root).toMatchObject({ msgType: 'TEST_MSG_TYPE1', data: { aa: 11 }, metadata: { test: 'Modified by root chain' } });
    // The sub-chain end: the flow node merges the sub-chain's branch ends into one message, as
    // RuleGo's asserts: data a JSON list of the wrapped ends, metadata of all of them.
    expect(sub!.msgType).toBe('TEST_MSG_TYPE');
    expect(JSON.stringify(sub!.data)).toContain('"data":"{\\"bb\\":22}"');
    expect(sub!.metadata.test).toBe('Modified by sub chain');
    expect(sub!.metadata.test_s3).toBe('Modified by sub chain node sub_s3');
  });

  it('chain_call_rest_api.json (engine_test.go TestCallRestApi): the call to a private address fails and the message ends on Failure', async () => {
    // As written, maxParallelRequestsCount included (RuleGo's per-node, per-host limit; honoured).
    expect((await postRule(fixture('chain_call_rest_api'), 'call_rest_api')).status).toBe(201);
    const end = await onMsg('call_rest_api', 'TEST_MSG_TYPE', { productType: 'productType01' }, { aa: 'aaaaaaaaaaaaaa' });
    // The Go test asserts the end callback runs; RuleGo ends it with the error, as here. Nothing
    // is sent: 192.168.136.26 is private and refused before connecting.
    expect(end).toMatchObject({ relation: 'Failure', msgType: 'TEST_MSG_TYPE2', data: { aa: 66 }, metadata: { test: 'test02', index: '52' } });
    expect(end.error).toMatch(/192\.168\.136\.26 is a private/);
  });

  it('test_skip_fallback_aspect.json (engine_aspect_test.go): a failed restApiCall goes along Failure to its log node', async () => {
    expect((await postRule(fixture('test_skip_fallback_aspect'), 'skip_fallback')).status).toBe(201);
    const end = await onMsg('skip_fallback', 'TEST_MSG_TYPE1', { productType: 'test01' }, { temperature: 41 });
    expect(end).toMatchObject({ relation: 'Success', msgType: 'TEST_MSG_TYPE1', data: { temperature: 41 } });
    expect(end.debug?.map((d) => [d.nodeId, d.relation])).toEqual([
      ['s1', 'Failure'],
      ['s3', 'Success'],
    ]);
  });

  it('with_http_endpoint.json and with_schedule_endpoint.json (rulego_test.go): refused, naming metadata.endpoints and where Agentry\'s entry points are', async () => {
    for (const name of ['with_http_endpoint', 'with_schedule_endpoint']) {
      const res = await postRule(fixture(name));
      expect(res.status, name).toBe(400);
      expect(res.body.error).toMatch(/metadata.endpoints: RuleGo endpoints .* are not started by Agentry; its entry points are chat/);
    }
  });
});

describe('RuleGo testdata/rule with msgTypeSwitch, fork, join, delay and groupFilter', { timeout: 30_000 }, () => {
  const temp41 = { productType: 'test01' };

  it('chain_msg_type_switch.json (engine_test.go TestMsgTypeSwitch): TYPE1 to s2 and s3, TYPE2 to s4, anything else along Default to s5', async () => {
    expect((await postRule(fixture('chain_msg_type_switch'), 'msg_type_switch')).status).toBe(201);
    // 6 OnDebug calls in RuleGo = s1, s2, s3 in and out; Agentry's debug step holds both.
    const one = await onMsg('msg_type_switch', 'TEST_MSG_TYPE1', temp41, { temperature: 41 });
    expect(one.debug?.map((d) => d.nodeId)).toEqual(['s1', 's2', 's3']);
    expect(one.ends?.map((e) => [e.msgType, e.metadata.addFrom])).toEqual([
      ['s2', 's2'],
      ['s3', 's3'],
    ]);
    const two = await onMsg('msg_type_switch', 'TEST_MSG_TYPE2', temp41, { temperature: 41 });
    expect(two.debug?.map((d) => d.nodeId)).toEqual(['s1', 's4']);
    expect(two).toMatchObject({ msgType: 's4', metadata: { addFrom: 's4' } });
    const three = await onMsg('msg_type_switch', 'TEST_MSG_TYPE3', temp41, { temperature: 41 });
    expect(three.debug?.map((d) => [d.nodeId, d.relation])).toEqual([
      ['s1', 'Default'],
      ['s5', 'Success'],
    ]);
    expect(three).toMatchObject({ msgType: 'TEST_MSG_TYPE3', metadata: { addFrom: 'Default' } });
  });

  it('test_wait.json + sub_chain.json (engine_test.go TestOnMsgAndWait): 2 ends for TYPE1 (one through the sub-chain), 1 for TYPE2, TYPE3 ends at s1 unchanged', async () => {
    // Posted as the Go test names them (test_wait.json's own id is that of chain_msg_type_switch.json).
    expect((await postRule(fixture('sub_chain'), 'sub_chain_02')).status).toBe(201);
    expect((await postRule(fixture('test_wait'), 'test_wait')).status).toBe(201);
    const one = await onMsg('test_wait', 'TEST_MSG_TYPE1', temp41, { temperature: 41 });
    expect(one.ends).toHaveLength(2);
    // "2 chains, 5 nodes": s1, s2, s3, the flow node and the sub-chain's nodes in debugMode.
    expect(one.debug?.filter((d) => d.chainId === 'test_wait').map((d) => d.nodeId).sort()).toEqual(['s1', 's2', 's3', 'sub_chain_02']);
    expect(one.debug?.filter((d) => d.chainId === 'sub_chain_02').length).toBeGreaterThan(0);
    const two = await onMsg('test_wait', 'TEST_MSG_TYPE2', temp41, { temperature: 41 });
    expect(two.ends).toBeUndefined();
    expect(two.debug?.map((d) => d.nodeId)).toEqual(['s1', 's4']);
    const three = await onMsg('test_wait', 'TEST_MSG_TYPE3', temp41, { temperature: 41 });
    expect(three.ends).toBeUndefined();
    expect(three.data).toEqual({ temperature: 41 });
    expect(three.debug?.map((d) => d.nodeId)).toEqual(['s1']);
  });

  interface JoinItem {
    msg: { data: string; type: string };
    err: string;
    nodeId: string;
  }

  it('test_join_node.json (engine_test.go TestJoinNode "Basic" and "Concurrent"): the join ends on Success with the 2 branch messages', async () => {
    // Its metadata.endpoints is [] (nothing to start): accepted.
    expect((await postRule(fixture('test_join_node'), 'test_join_node')).status).toBe(201);
    const basic = await onMsg('test_join_node', 'TEST_MSG_TYPE1', temp41, { temperature: 41, humidity: 90 });
    expect(basic.relation).toBe('Success');
    const list = basic.data as JoinItem[];
    expect(list).toHaveLength(2);
    expect(list[0]!.nodeId).not.toBe(list[1]!.nodeId);
    // "Concurrent": 10 messages at once (parallel tool calls); each join has its own 2 inputs.
    const inputs = Array.from({ length: 10 }, (_, index) => ({ metadata: { index: String(index) }, data: { temperature: 40 + index, humidity: 90 } }));
    const ends = await onMsgConcurrently('test_join_node', 'CONCURRENT_TEST', inputs);
    expect(ends).toHaveLength(10);
    ends.forEach((end, index) => {
      expect(end.relation).toBe('Success');
      expect(end.metadata.index).toBe(String(index));
      const list = end.data as JoinItem[];
      expect(list).toHaveLength(2);
      for (const b of list) expect(JSON.parse(b.msg.data)).toMatchObject({ temperature: 40 + index, a: 'aa' });
    });
  });

  it('test_join_multi_branch.json (engine_test.go TestJoinNode "Multi Branch"): only the True branch runs; the join ends on Success without error', async () => {
    expect((await postRule(fixture('test_join_multi_branch'), 'multi_branch_join')).status).toBe(201);
    const end = await onMsg('multi_branch_join', 'HIGH_TEMP_TEST', { testType: 'highTemp' }, { temperature: 60, humidity: 70 });
    expect(end).toMatchObject({ relation: 'Success', metadata: { testType: 'highTemp' } });
    expect(end.error).toBeUndefined();
    expect((end.data as JoinItem[]).map((b) => [b.nodeId, b.err])).toEqual([['node_4', '']]);
  });

  it('test_fork_direct_join.json (as fork_direct_join_test.go TestForkNodeDirectToJoin runs its inline copy): loads as written with warnings, and the join waits for the delayed branch', async () => {
    // Its delay node has "period" and "maxPendingMsg", fields RuleGo's delay does not have
    // (its are delayMs, periodInSeconds, maxPendingMsgs): RuleGo ignores them (no delay at all).
    // Agentry keeps them and warns, naming each with its hint (fieldValidation=Warn, the default).
    const strict = await postRule(fixture('test_fork_direct_join'), undefined, 'POST', 'Strict');
    expect(strict.status).toBe(400);
    expect(strict.body.error).toMatch(/delay: configuration: unknown field "period" \(did you mean delayMs\?/);
    expect(strict.body.error).toMatch(/unknown field "maxPendingMsg" \(did you mean maxPendingMsgs\?\)/);
    const asWritten = await postRule(fixture('test_fork_direct_join'));
    expect(asWritten.status).toBe(201);
    expect(asWritten.body).toEqual(JSON.parse(fixture('test_fork_direct_join')));
    expect(asWritten.warning).toMatch(/^299 - ".*delay: configuration: unknown field \\"period\\" \(did you mean delayMs\?.*", 299 - ".*unknown field \\"maxPendingMsg\\" \(did you mean maxPendingMsgs\?\)"$/);
    // As RuleGo runs it: the delay has no delay, the join gets both branches.
    const undelayed = await onMsg('test_fork_direct_join', 'TEST_MSG_TYPE', {}, { from: 'fork' });
    expect(undelayed.ends).toBeUndefined();
    expect(undelayed).toMatchObject({ relation: 'Success', msgType: 'TEST_MSG_TYPE', data: { from: 'fork' } });
    const dsl = JSON.parse(fixture('test_fork_direct_join')) as { metadata: { nodes: Array<{ type: string; configuration?: Record<string, unknown> }> } };
    const delayNode = dsl.metadata.nodes.find((n) => n.type === 'delay')!;
    // What the file means: 500 ms, 100 pending messages, in RuleGo's field names.
    delayNode.configuration = { delayMs: 500, maxPendingMsgs: 100 };
    const meant = await postRule(JSON.stringify(dsl), 'test_fork_direct_join', 'PUT');
    expect(meant.status).toBe(200);
    expect(meant.warning).toBeNull();
    const started = Date.now();
    const end = await onMsg('test_fork_direct_join', 'TEST_MSG_TYPE', {}, { from: 'fork' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    // One end: the join ran once, with both branches (mergeToMap: the object data merged).
    expect(end.ends).toBeUndefined();
    expect(end).toMatchObject({ relation: 'Success', msgType: 'TEST_MSG_TYPE', data: { from: 'fork' } });
  });

  it('test_restore_complex.json (restore_test.go TestRestoreFromMultipleBranches): both branches reach the join, then node_e and node_f', async () => {
    // The Go test resumes at node_c1 and node_c2 (WithRestoreNodes, Go API); Agentry runs a
    // chain from its first node, so here b1 and b2 run too (SOURCE.md).
    expect((await postRule(fixture('test_restore_complex'))).status).toBe(201);
    const end = await onMsg('complex_restore_chain', 'TEST_MSG_TYPE', {}, {});
    expect(end).toMatchObject({ relation: 'Success', metadata: { e: 'executed', f: 'executed' } });
    const branches = (end.data as JoinItem[]).map((b) => [b.nodeId, JSON.parse(b.msg.data) as unknown]);
    expect(branches.sort()).toEqual([
      ['node_c1', { b1: 'executed', c1: 'executed' }],
      ['node_c2', { b2: 'executed', c2: 'executed' }],
    ]);
  });

  it('test_restore_fork_no_join.json (restore_test.go TestRestoreForkNoJoin): two ends, b1 then c1 and b2 then c2', async () => {
    expect((await postRule(fixture('test_restore_fork_no_join'))).status).toBe(201);
    const result = await onMsg('fork_no_join_chain', 'TEST_MSG_TYPE', {}, { from: 'inputMsg' });
    expect(result.ends?.map((e) => e.data)).toEqual([
      { from: 'inputMsg', b1: 'executed', c1: 'executed' },
      { from: 'inputMsg', b2: 'executed', c2: 'executed' },
    ]);
  });

  it('test_group_filter_node.json (engine_test.go TestExecuteNode): any of s1, s2 true, then with allMatches all of them', async () => {
    const id = 'executeNode_rule01';
    expect((await postRule(fixture('test_group_filter_node'), id)).status).toBe(201);
    const msg1 = { temperature: 41, humidity: 90 };
    expect((await onMsg(id, 'TEST_MSG_TYPE1', temp41, msg1)).metadata.result).toBe('true');
    // ReloadSelf with "allMatches": true and the chain id replaced, as the Go test does.
    const allMatches = fixture('test_group_filter_node').replaceAll('"allMatches": false', '"allMatches": true').replaceAll('test_group_filter_node', id);
    expect((await postRule(allMatches, id, 'PUT')).status).toBe(200);
    expect((await onMsg(id, 'TEST_MSG_TYPE1', temp41, msg1)).metadata.result).toBe('false');
    expect((await onMsg(id, 'TEST_MSG_TYPE1', temp41, { temperature: 52, humidity: 90 })).metadata.result).toBe('true');
    expect((await onMsg(id, 'TEST_MSG_TYPE1', temp41, { temperature: 51, humidity: 90 })).metadata.result).toBe('true');
    // The Go test then calls ctx.TellNode / TellChainNode from the end callback: Go API, no DSL.
  });

  // The switch node: chain_test.go TestChainCtx "ConditionalBranchJoin" and "ComplexJoinCase" only
  // load these two files and assert the join's lowest common ancestor (Go API); here they run.
  it('test_conditional_branch_join.json (switch, then join): Case1 through node_6, Case2 straight to the join, neither to Default', async () => {
    expect((await postRule(fixture('test_conditional_branch_join'))).status).toBe(201);
    const case1 = await onMsg('VbMyQ-IcrrIu', 'TEST_MSG_TYPE', {}, { temperature: 30 });
    expect(case1).toMatchObject({ relation: 'Success' });
    expect((case1.data as JoinItem[]).map((b) => b.nodeId)).toEqual(['node_6']);
    const case2 = await onMsg('VbMyQ-IcrrIu', 'TEST_MSG_TYPE', {}, { temperature: 60 });
    expect((case2.data as JoinItem[]).map((b) => [b.nodeId, JSON.parse(b.msg.data) as unknown])).toEqual([['node_2', { temperature: 60 }]]);
    // No case is true: Default, which no connection names, ends the chain at the switch.
    const neither = await onMsg('VbMyQ-IcrrIu', 'TEST_MSG_TYPE', {}, { temperature: 10 });
    expect(neither).toMatchObject({ relation: 'Default', data: { temperature: 10 } });
  });

  it('test_complex_join.json (switch, two paths of different length to one join): each case reaches the join once', async () => {
    expect((await postRule(fixture('test_complex_join'))).status).toBe(201);
    const long = await onMsg('InVGNEN0NOnN', 'TEST_MSG_TYPE', {}, { temperature: 30 });
    expect((long.data as JoinItem[]).map((b) => b.nodeId)).toEqual(['node_14']);
    const short = await onMsg('InVGNEN0NOnN', 'TEST_MSG_TYPE', {}, { temperature: 70 });
    expect((short.data as JoinItem[]).map((b) => b.nodeId)).toEqual(['node_5']);
  });

  it('test_lca_complex_bug.json (lca_complex_test.go TestLCAComplexBug): fork, join, switch, fork, join; the join keeps level_info and the log after the failing node runs, twice', async () => {
    expect((await postRule(fixture('test_lca_complex_bug'))).status).toBe(201);
    for (let run = 1; run <= 2; run++) {
      const end = await onMsg('test_lca_complex_bug', 'TEST_MSG', {}, {});
      // node_90 throws; its Failure (and Success) both lead to node_122, the log, which ends the chain.
      expect(end, `run ${run}`).toMatchObject({ relation: 'Success', metadata: { level_info: 'true' } });
      const ran = (end.debug ?? []).map((d) => d.nodeId);
      expect(ran, `run ${run}`).toEqual(expect.arrayContaining(['node_28', 'node_86', 'node_90', 'node_122']));
      expect(end.debug?.find((d) => d.nodeId === 'node_90')?.relation).toBe('Failure');
    }
  });
});

describe('RuleGo fields Agentry honours, through the worker', { timeout: 30_000 }, () => {
  it('fills ${vars.x} from ruleChain.configuration.vars and ${global.x} from worker.chain_globals; a disabled chain refuses the tool call', async () => {
    const dsl = {
      ruleChain: { id: 'with_vars', name: 'vars', configuration: { vars: { threshold: 10 } } },
      metadata: {
        nodes: [{ type: 'jsTransform', configuration: { jsScript: "metadata.site='${global.site}'; return {msg: msg.t > ${vars.threshold} ? 'hot' : 'cold', metadata, msgType};" } }],
      },
    };
    expect((await postRule(JSON.stringify(dsl))).status).toBe(201);
    expect(await onMsg('with_vars', 'TEMP', {}, { t: 41 })).toMatchObject({ relation: 'Success', data: 'hot', metadata: { site: 'berlin' } });
    expect((await postRule(JSON.stringify({ ...dsl, ruleChain: { ...dsl.ruleChain, disabled: true } }), 'with_vars', 'PUT')).status).toBe(200);
    await expect(onMsg('with_vars', 'TEMP', {}, { t: 41 })).rejects.toThrow(/the tool did not answer a message: .*chain "with_vars": the rule chain has been disabled/);
  });
});
