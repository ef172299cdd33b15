import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { agentDsl, createAgent, describeOnBothEngines, ruleDsl, uid, type Env } from './resources-harness.js';

type Item = { ruleChain: { id: string; name: string }; metadata: unknown; kind: string; agentId?: string; loaded: boolean; error?: string };

/** /rules and /agents/{agentId}/rules, on both engines. */
describeOnBothEngines('rule chains', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  const ids = async (url: string) => ((await req('GET', url)).json() as Item[]).map((i) => i.ruleChain.id);

  it('POST /rules creates (201), GET /rules/{id} returns the DSL, a duplicate id is 409', async () => {
    const id = uid('r');
    const dsl = ruleDsl(id, 'ops');
    const res = await req('POST', '/rules', dsl);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual(dsl);
    expect((await req('GET', `/rules/${id}`)).json()).toEqual(dsl);
    const again = await req('POST', '/rules', ruleDsl(id));
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ error: `Already exists: rule chain "${id}"` });
  });

  it('POST /rules validates the DSL (400 naming the node or connection)', async () => {
    const base = ruleDsl(uid('bad_rule'));
    const cases: Array<[unknown, RegExp]> = [
      [{ ...base, ruleChain: { id: { x: 1 }, name: 'bad id' } }, /ruleChain/],
      [{ ...base, ruleChain: { id: 'ok_id' } }, /name/],
      [{ ...base, ruleChain: { id: '../x', name: 'n' } }, /ruleChain.id: must match pattern/],
      [{ ...base, metadata: { ...base.metadata, nodes: [...base.metadata.nodes, { id: 'log', type: 'end' }] } }, /duplicate node id "log"/],
      [{ ...base, metadata: { ...base.metadata, connections: [{ fromId: 'filter', toId: 'nowhere', type: 'True' }] } }, /connections\[0\]: toId "nowhere"/],
      [{ ...base, metadata: { ...base.metadata, nodes: [{ id: 'x', type: 'mystery' }], connections: [] } }, /unknown node type "mystery"/],
      [{ ...base, metadata: { nodes: [{ id: 'call', type: 'restApiCall', configuration: {} }], connections: [] } }, /"call"\), restApiCall: configuration: must have required properties restEndpointUrlPattern/],
      [{ ...base, metadata: { nodes: [{ id: 'sub', type: 'flow', configuration: { targetId: 7 } }], connections: [] } }, /configuration.targetId/],
    ];
    for (const [body, message] of cases) {
      const res = await req('POST', '/rules', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(message);
    }
    // Every registered node type is accepted (the flow names the chain itself: a reference must exist).
    const allId = uid('all_types');
    const all = {
      ruleChain: { id: allId, name: 'All types' },
      metadata: {
        nodes: [
          { id: 'a', type: 'ai/agent' },
          { id: 'b', type: 'ai/llm', configuration: { model: 'm1' } },
          { id: 'c', type: 'jsFilter' },
          { id: 'd', type: 'jsTransform', configuration: { jsScript: 'return {msg};' } },
          { id: 'e', type: 'jsSwitch' },
          { id: 'f', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'https://example.com', requestMethod: 'POST' } },
          { id: 'g', type: 'log' },
          { id: 'h', type: 'flow', configuration: { targetId: allId } },
          { id: 'i', type: 'end' },
        ],
        connections: [{ fromId: 'a', toId: 'i', type: 'Success' }],
      },
    };
    expect((await req('POST', '/rules', all)).statusCode).toBe(201);
  });

  it('takes the DSL as RuleGo files write it: missing ids generated (and said so), null means empty, unknown fields kept as written', async () => {
    const written = {
      ruleChain: { name: 'as written', firstRuleNodeId: null, root: false, debugMode: false, configuration: null, additionalInfo: { description: '' } },
      metadata: {
        firstNodeIndex: 0,
        nodes: [
          { type: 'jsFilter', name: 'f', configuration: { jsScript: 'return msg.temperature>10;' }, additionalInfo: { layoutX: 10 } },
          { id: 'named', type: 'log', configuration: null, additionalInfo: null, editorColour: 'red' },
        ],
        connections: null,
      },
    };
    const res = await req('POST', '/rules', written);
    expect(res.statusCode, res.body).toBe(201);
    const id = (res.json() as { ruleChain: { id: string } }).ruleChain.id;
    expect(id).toMatch(/^rule-[0-9a-f]{8}$/);
    expect(res.headers['x-agentry-generated-ids']).toBe(`ruleChain.id = "${id}" (generated); metadata.nodes[0].id = "node0"`);
    expect(res.headers.location).toBe(`/api/v1/rules/${id}`);
    const expected = {
      ruleChain: { id, name: 'as written', firstRuleNodeId: null, root: false, debugMode: false, configuration: {}, additionalInfo: { description: '' } },
      metadata: {
        firstNodeIndex: 0,
        nodes: [
          { id: 'node0', type: 'jsFilter', name: 'f', configuration: { jsScript: 'return msg.temperature>10;' }, additionalInfo: { layoutX: 10 } },
          { id: 'named', type: 'log', configuration: {}, additionalInfo: {}, editorColour: 'red' },
        ],
        connections: [],
      },
    };
    expect(res.json()).toEqual(expected);
    expect((await req('GET', `/rules/${id}`)).json()).toEqual(expected);

    // The id may come from the URL instead; a chain that has ids gets no header.
    const fromUrl = await req('POST', `/rules?id=${uid('from_url')}`, { ...written, metadata: { ...written.metadata, nodes: [written.metadata.nodes[1]] } });
    expect(fromUrl.statusCode, fromUrl.body).toBe(201);
    expect(fromUrl.headers['x-agentry-generated-ids']).toMatch(/^ruleChain.id = "from_url_[^"]+" \(from the URL\)$/);
    const complete = await req('POST', '/rules', ruleDsl(uid('complete')));
    expect(complete.headers['x-agentry-generated-ids']).toBeUndefined();
    // ?id= wins over the body's id, as RuleGo's New(id, dsl) registers a chain under the id it is given.
    const renamed = uid('renamed');
    const over = await req('POST', `/rules?id=${renamed}`, ruleDsl('sub_chain'));
    expect(over.statusCode, over.body).toBe(201);
    expect(over.json().ruleChain.id).toBe(renamed);
    expect(over.headers['x-agentry-generated-ids']).toBe(`ruleChain.id = "${renamed}" (from the URL, in place of "sub_chain")`);
    // PUT takes the same shape: the path names the chain, node ids are generated.
    const put = await req('PUT', `/rules/${id}`, { ruleChain: { name: 'renamed', configuration: null }, metadata: { nodes: [{ type: 'end' }] } });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json()).toEqual({ ruleChain: { id, name: 'renamed', configuration: {} }, metadata: { nodes: [{ id: 'node0', type: 'end' }], connections: [] } });
  });

  it('refuses, naming them, the RuleGo fields Agentry cannot honour', async () => {
    const base = ruleDsl(uid('refused'));
    const cases: Array<[unknown, RegExp]> = [
      [
        { ...base, metadata: { ...base.metadata, endpoints: [{ id: 'e1', type: 'http', configuration: { server: ':9090' }, routers: [] }] } },
        /metadata.endpoints: RuleGo endpoints \(http, mqtt, schedule, ...\) are not started by Agentry; its entry points are chat/,
      ],
      [{ ...base, metadata: { ...base.metadata, ruleChainConnections: [{ fromId: 'filter', toId: 'other', type: 'True' }] } }, /metadata.ruleChainConnections: .*use a "flow" node/],
      [{ ...base, ruleChain: { ...base.ruleChain, configuration: { secrets: { pwd: 'x' } } } }, /ruleChain.configuration.secrets: RuleGo's encrypted secrets/],
      [{ ...base, ruleChain: { ...base.ruleChain, configuration: { vars: ['x'] } } }, /ruleChain.configuration.vars: must be an object/],
    ];
    for (const [body, message] of cases) {
      const res = await req('POST', '/rules', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(message);
    }
    // Empty ones promise nothing and are kept as written.
    const empty = { ...base, metadata: { ...base.metadata, endpoints: [], ruleChainConnections: [] } };
    const res = await req('POST', '/rules', empty);
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual(empty);
  });

  it('GET /rules is an array of every chain (agents included) with its load status, filtered by agentId, category and loaded', async () => {
    const agent = uid('ag');
    await createAgent(env, agent);
    const global = uid('glob');
    const local = uid('loc');
    await req('POST', '/rules', ruleDsl(global, 'billing'));
    await req('POST', `/agents/${agent}/rules`, ruleDsl(local, 'billing'));

    const res = await req('GET', '/rules');
    expect(res.statusCode).toBe(200);
    const items = res.json() as Item[];
    expect(Array.isArray(items)).toBe(true);
    const byId = new Map(items.map((i) => [i.ruleChain.id, i]));
    expect(byId.get(agent)).toMatchObject({ kind: 'agent', loaded: true, metadata: expect.any(Object) });
    expect(byId.get(global)).toMatchObject({ kind: 'rule', loaded: true });
    expect(byId.get(global)).not.toHaveProperty('agentId');
    expect(byId.get(local)).toMatchObject({ kind: 'rule', agentId: agent, loaded: true });

    expect(await ids(`/rules?agentId=${agent}`)).toEqual([local]);
    const billing = await ids('/rules?category=billing');
    expect(billing).toContain(global);
    expect(billing).toContain(local);
    expect(billing).not.toContain(agent);
    expect(await ids(`/rules?category=billing&agentId=${agent}`)).toEqual([local]);
    expect(await ids('/rules?category=nothing-here')).toEqual([]);
    expect(await ids('/rules?loaded=true')).toContain(global);
    expect(await ids('/rules?loaded=false')).not.toContain(global);
    expect((await req('GET', '/rules?loaded=maybe')).statusCode).toBe(400);
    expect((await req('GET', '/rules?agentId=bad%20id')).statusCode).toBe(400);
  });

  it('a stored chain that fails to load is listed with its error; reload drops every replica\'s copy', async () => {
    const id = uid('broken');
    const broken = { ...ruleDsl(id), metadata: { nodes: [{ id: 'n1', type: 'gone/away' }], connections: [] } };
    await env()
      .db.insertInto('rule_chains')
      .values({ id, kind: 'rule', agent_id: null, name: 'Broken', category: 'legacy', dsl: JSON.stringify(broken) })
      .execute();
    const other = await env().replica();

    for (const app of [env().app, other]) {
      const items = (await app.inject({ method: 'GET', url: '/api/v1/rules?category=legacy' })).json() as Item[];
      expect(items).toEqual([expect.objectContaining({ loaded: false, error: expect.stringMatching(/metadata\.nodes\[0\] \("n1"\): unknown node type "gone\/away"/) })]);
    }
    expect(await ids('/rules?category=legacy&loaded=true')).toEqual([]);
    expect(await ids('/rules?category=legacy&loaded=false')).toEqual([id]);
    expect((await req('POST', `/rules/${id}/reload`)).json()).toEqual({ success: false, message: expect.stringMatching(/unknown node type/) });
    // Let the reload's invalidation reach both replicas (in-process pub/sub delivers on a later
    // tick), then let each cache the broken chain again.
    await new Promise((resolve) => setTimeout(resolve, 20));
    for (const app of [env().app, other]) await app.inject({ method: 'GET', url: '/api/v1/rules?category=legacy' });

    // Repaired behind the caches' back (same version): still the cached error until a reload.
    await sql`update rule_chains set dsl = ${JSON.stringify(ruleDsl(id, 'legacy'))} where id = ${id}`.execute(env().db);
    expect(await ids('/rules?category=legacy&loaded=false')).toEqual([id]);
    expect((await other.inject({ method: 'GET', url: '/api/v1/rules?category=legacy&loaded=false' })).json()).toHaveLength(1);

    const res = await req('POST', `/rules/${id}/reload`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await ids('/rules?category=legacy&loaded=true')).toEqual([id]);
    await expect
      .poll(async () => ((await other.inject({ method: 'GET', url: '/api/v1/rules?category=legacy' })).json() as Item[])[0]?.loaded)
      .toBe(true);
  });

  it('PUT /rules/{id} replaces (path id wins, mismatch 400); an agent edited through /rules stays an agent', async () => {
    const id = uid('put_rule');
    await req('POST', '/rules', ruleDsl(id));
    const changed = { ...ruleDsl(id, 'renamed'), ruleChain: { id, name: 'Changed', additionalInfo: { category: 'renamed' } } };
    const res = await req('PUT', `/rules/${id}`, changed);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(changed);
    expect(await ids('/rules?category=renamed')).toEqual([id]);
    expect((await req('PUT', `/rules/${id}`, ruleDsl('other_id'))).statusCode).toBe(400);
    expect((await req('PUT', '/rules/missing_rule', ruleDsl('missing_rule'))).statusCode).toBe(404);

    const agent = uid('agent_via_rules');
    await createAgent(env, agent);
    const demoted = await req('PUT', `/rules/${agent}`, ruleDsl(agent));
    expect(demoted.statusCode).toBe(400);
    expect(demoted.json().error).toMatch(/an agent needs a node of type "ai\/agent"/);
    expect((await req('PUT', `/rules/${agent}`, agentDsl(agent, 'Via rules'))).statusCode).toBe(200);
    expect((await req('GET', `/agents/${agent}`)).json().ruleChain.name).toBe('Via rules');
  });

  it('DELETE /rules/{id} removes a rule ({success:true}); for an agent it removes the agent; unknown is 404', async () => {
    const id = uid('del_rule');
    await req('POST', '/rules', ruleDsl(id));
    const res = await req('DELETE', `/rules/${id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await req('GET', `/rules/${id}`)).statusCode).toBe(404);
    const again = await req('DELETE', `/rules/${id}`);
    expect(again.statusCode).toBe(404);
    expect(again.json()).toEqual({ error: `Not found: rule chain "${id}"` });
    expect((await req('POST', `/rules/${id}/reload`)).statusCode).toBe(404);

    const agent = uid('agent_del_via_rules');
    await createAgent(env, agent);
    expect((await req('DELETE', `/rules/${agent}`)).statusCode).toBe(200);
    expect((await req('GET', `/agents/${agent}`)).statusCode).toBe(404);
  });

  it('agent-level routes see only that agent\'s rules', async () => {
    const a = uid('owner_a');
    const b = uid('owner_b');
    await createAgent(env, a);
    await createAgent(env, b);
    const ruleA = uid('rule_a');
    const created = await req('POST', `/agents/${a}/rules`, ruleDsl(ruleA, 'x'));
    expect(created.statusCode).toBe(201);
    expect(created.json()).toEqual(ruleDsl(ruleA, 'x'));
    const globalRule = uid('global_rule');
    await req('POST', '/rules', ruleDsl(globalRule));

    const listed = (await req('GET', `/agents/${a}/rules`)).json() as Item[];
    expect(listed).toEqual([expect.objectContaining({ ruleChain: expect.objectContaining({ id: ruleA }), agentId: a, loaded: true })]);
    expect(await ids(`/agents/${b}/rules`)).toEqual([]);
    expect(await ids(`/agents/${a}/rules?category=x&loaded=true`)).toEqual([ruleA]);
    expect(await ids(`/agents/${a}/rules?category=y`)).toEqual([]);

    expect((await req('GET', `/agents/${a}/rules/${ruleA}`)).json()).toEqual(ruleDsl(ruleA, 'x'));
    for (const url of [`/agents/${b}/rules/${ruleA}`, `/agents/${a}/rules/${globalRule}`, `/agents/${a}/rules/${a}`]) {
      const res = await req('GET', url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error).toMatch(/^Not found: rule chain ".*" of agent/);
    }
    expect((await req('PUT', `/agents/${b}/rules/${ruleA}`, ruleDsl(ruleA))).statusCode).toBe(404);
    expect((await req('DELETE', `/agents/${b}/rules/${ruleA}`)).statusCode).toBe(404);
    expect((await req('POST', `/agents/${b}/rules/${ruleA}/reload`)).statusCode).toBe(404);

    const put = await req('PUT', `/agents/${a}/rules/${ruleA}`, { ...ruleDsl(ruleA, 'z'), ruleChain: { name: 'No id', additionalInfo: { category: 'z' } } });
    expect(put.statusCode).toBe(200);
    expect(put.json().ruleChain).toEqual({ id: ruleA, name: 'No id', additionalInfo: { category: 'z' } });
    expect((await req('PUT', `/agents/${a}/rules/${ruleA}`, ruleDsl('different'))).statusCode).toBe(400);
    expect((await req('POST', `/agents/${a}/rules/${ruleA}/reload`)).json()).toEqual({ success: true });
    expect((await req('POST', `/agents/${b}/rules`, ruleDsl(ruleA))).statusCode).toBe(409);
    expect((await req('DELETE', `/agents/${a}/rules/${ruleA}`)).json()).toEqual({ success: true });
    expect(await ids(`/agents/${a}/rules`)).toEqual([]);
  });

  it('agent-level routes of an unknown agent are 404 naming the agent', async () => {
    for (const [method, url, body] of [
      ['GET', '/agents/ghost/rules', undefined],
      ['POST', '/agents/ghost/rules', ruleDsl('ghost_rule')],
      ['GET', '/agents/ghost/rules/x', undefined],
      ['PUT', '/agents/ghost/rules/x', ruleDsl('x')],
      ['DELETE', '/agents/ghost/rules/x', undefined],
      ['POST', '/agents/ghost/rules/x/reload', undefined],
    ] as const) {
      const res = await req(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found: agent "ghost"' });
    }
  });
});
