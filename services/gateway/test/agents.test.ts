import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { validateRuleChain } from '@agentry/definitions';
import { agentDsl, createAgent, describeOnBothEngines, ruleDsl, uid, type Env } from './resources-harness.js';

/** /agents, /agents/{id}/reload and /agent-template, on both engines. */
describeOnBothEngines('agents', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);

  it('GET /agent-template is a complete, valid agent on the default provider, with its workspace files', async () => {
    const res = await req('GET', '/agent-template');
    expect(res.statusCode).toBe(200);
    const template = res.json();
    const { workspaceFiles, ...dsl } = template;
    expect(validateRuleChain(dsl, { requireAgent: true })).toEqual({ ok: true, errors: [], warnings: [] });
    const agentNode = dsl.metadata.nodes.find((n: { type: string }) => n.type === 'ai/agent');
    expect(agentNode.configuration.provider).toBe('p1');
    expect(workspaceFiles).toEqual([{ path: 'AGENTS.md', content: expect.stringContaining(`# ${dsl.ruleChain.name}`) }]);

    // It can be posted as it is once given a fresh id.
    const id = uid('from_template');
    const created = await req('POST', '/agents', { ...template, ruleChain: { ...dsl.ruleChain, id } });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).not.toHaveProperty('workspaceFiles');
  });

  it('POST creates (201 with the DSL), GET returns the DSL exactly, and the workspace is seeded', async () => {
    const id = uid('agent');
    const dsl = agentDsl(id, 'Helper');
    const res = await req('POST', '/agents', dsl);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual(dsl);
    const got = await req('GET', `/agents/${id}`);
    expect(got.statusCode).toBe(200);
    // Byte for byte: key order included (the DSL is kept as written).
    expect(got.body).toBe(JSON.stringify(dsl));

    const entries = await req('GET', `/agents/${id}/workspace/entries`);
    expect(entries.json()).toEqual([{ name: 'AGENTS.md', isDir: false, size: expect.any(Number), modTime: expect.stringMatching(/Z$/) }]);
    const file = await req('GET', `/agents/${id}/workspace/file?path=AGENTS.md`);
    expect(file.json().content).toContain('# Helper');
    expect(file.json().content).toContain(`\`${id}\``);
    expect(file.json().content).toContain(`the ${id} agent`);
  });

  it('POST with an id already used by an agent or a rule chain is 409', async () => {
    const id = uid('dup');
    await createAgent(env, id);
    const again = await req('POST', '/agents', agentDsl(id, 'Other'));
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ error: `Already exists: agent "${id}"` });

    const ruleId = uid('rule_taken');
    expect((await req('POST', '/rules', ruleDsl(ruleId))).statusCode).toBe(201);
    expect((await req('POST', '/agents', agentDsl(ruleId))).statusCode).toBe(409);
  });

  const invalid: Array<[string, (d: ReturnType<typeof agentDsl>) => unknown, RegExp]> = [
    ['missing ruleChain.id', (d) => ({ ...d, ruleChain: { name: 'x' } }), /ruleChain.*id/],
    ['missing ruleChain.name', (d) => ({ ...d, ruleChain: { id: d.ruleChain.id } }), /ruleChain.*name/],
    ['an empty name', (d) => ({ ...d, ruleChain: { ...d.ruleChain, name: '' } }), /name/],
    ['an id with a space', (d) => ({ ...d, ruleChain: { ...d.ruleChain, id: 'has space' } }), /ruleChain.id: must match pattern/],
    ['an id of 65 characters', (d) => ({ ...d, ruleChain: { ...d.ruleChain, id: 'a'.repeat(65) } }), /ruleChain.id: must match pattern/],
    ['a node id with a slash', (d) => ({ ...d, metadata: { ...d.metadata, nodes: [{ ...d.metadata.nodes[0], id: 'a/b' }, d.metadata.nodes[1]] } }), /nodes.0.id: must match pattern/],
    ['missing metadata', (d) => ({ ruleChain: d.ruleChain }), /metadata/],
    ['missing metadata.nodes', (d) => ({ ...d, metadata: { connections: [] } }), /nodes/],
    [
      'duplicate node ids',
      (d) => ({ ...d, metadata: { ...d.metadata, nodes: [d.metadata.nodes[0], { id: 'node_agent', type: 'end' }] } }),
      /metadata\.nodes\[1\] \("node_agent"\): duplicate node id "node_agent"/,
    ],
    [
      'a connection to an unknown node',
      (d) => ({ ...d, metadata: { ...d.metadata, connections: [{ fromId: 'node_agent', toId: 'ghost', type: 'Success' }] } }),
      /metadata\.connections\[0\]: toId "ghost" is not a node of this chain/,
    ],
    [
      'a connection from an unknown node',
      (d) => ({ ...d, metadata: { ...d.metadata, connections: [{ fromId: 'ghost', toId: 'node_end', type: 'Success' }] } }),
      /metadata\.connections\[0\]: fromId "ghost" is not a node of this chain/,
    ],
    [
      'an unknown node type',
      (d) => ({ ...d, metadata: { ...d.metadata, nodes: [d.metadata.nodes[0], { id: 'node_end', type: 'x/teleport' }] } }),
      /metadata\.nodes\[1\] \("node_end"\): unknown node type "x\/teleport"/,
    ],
    [
      'no ai/agent node',
      (d) => ({ ...d, metadata: { nodes: [{ id: 'only', type: 'end' }], connections: [] } }),
      /an agent needs a node of type "ai\/agent"/,
    ],
    [
      'a configuration its node type refuses',
      (d) => ({ ...d, metadata: { ...d.metadata, nodes: [{ ...d.metadata.nodes[0], configuration: { maxStep: 0 } }, d.metadata.nodes[1]] } }),
      /metadata\.nodes\[0\] \("node_agent"\), ai\/agent: configuration\.maxStep: must be >= 1/,
    ],
    ['firstNodeIndex out of range', (d) => ({ ...d, metadata: { ...d.metadata, firstNodeIndex: 5 } }), /firstNodeIndex: 5 is out of range/],
  ];
  it.each(invalid)('POST with %s is 400 naming the problem', async (_what, mutate, message) => {
    const id = uid('bad');
    const res = await req('POST', '/agents', mutate(agentDsl(id)));
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
    expect((await req('GET', `/agents/${id}`)).statusCode).toBe(404);
  });

  it('GET /agents is paged: defaults, bounds and items {ruleChain:{id,name,owner}}', async () => {
    const prefix = uid('pg');
    for (const n of [1, 2, 3]) await createAgent(env, `${prefix}_${n}`);
    const all = await req('GET', '/agents');
    expect(all.statusCode).toBe(200);
    const body = all.json();
    expect(body).toMatchObject({ page: 1, size: 20 });
    expect(body.total).toBeGreaterThanOrEqual(3);
    expect(body.data.length).toBe(Math.min(body.total, 20));
    expect(body.data).toContainEqual({ ruleChain: { id: `${prefix}_2`, name: `Agent ${prefix}_2`, owner: 'admin', audience: { everyone: true, users: [], roles: [], apiAccounts: [] } } });
    for (const item of body.data) expect(Object.keys(item)).toEqual(['ruleChain']);

    const pageTwo = await req('GET', '/agents?page=2&size=1');
    expect(pageTwo.json()).toMatchObject({ page: 2, size: 1, total: body.total });
    expect(pageTwo.json().data).toEqual([body.data[1]]);
    expect((await req('GET', '/agents?size=100')).statusCode).toBe(200);
    expect((await req('GET', '/agents?page=9999')).json().data).toEqual([]);

    for (const query of ['page=0', 'size=0', 'size=101', 'page=-1', 'page=abc', 'size=1.5']) {
      const res = await req('GET', `/agents?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error).toMatch(/^Invalid input: querystring\.(page|size)/);
    }
  });

  it('GET, PUT, DELETE and reload of an unknown agent are 404 naming it; a rule chain is not an agent', async () => {
    for (const [method, url, body] of [
      ['GET', '/agents/nope', undefined],
      ['PUT', '/agents/nope', agentDsl('nope')],
      ['DELETE', '/agents/nope', undefined],
      ['POST', '/agents/nope/reload', undefined],
    ] as const) {
      const res = await req(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found: agent "nope"' });
    }
    const ruleId = uid('just_rule');
    await req('POST', '/rules', ruleDsl(ruleId));
    expect((await req('GET', `/agents/${ruleId}`)).statusCode).toBe(404);
    expect((await req('GET', '/agents/bad%20id')).statusCode).toBe(400);
  });

  it('PUT replaces the agent; the id in the path wins and a different one is 400', async () => {
    const id = uid('put');
    await createAgent(env, id);
    const changed = agentDsl(id, 'Renamed', { category: 'support' });
    const res = await req('PUT', `/agents/${id}`, changed);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(changed);
    expect((await req('GET', `/agents/${id}`)).json()).toEqual(changed);
    expect((await req('GET', `/rules?category=support`)).json().map((r: { ruleChain: { id: string } }) => r.ruleChain.id)).toContain(id);

    const { id: _drop, ...withoutId } = changed.ruleChain;
    const noId = await req('PUT', `/agents/${id}`, { ...changed, ruleChain: { ...withoutId, name: 'No id given' } });
    expect(noId.statusCode).toBe(200);
    expect(noId.json().ruleChain).toMatchObject({ id, name: 'No id given' });

    const mismatch = await req('PUT', `/agents/${id}`, agentDsl('someone_else'));
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json().error).toMatch(/ruleChain.id "someone_else" does not match the id in the path/);

    const noAgentNode = await req('PUT', `/agents/${id}`, { ...changed, metadata: { nodes: [{ id: 'e', type: 'end' }], connections: [] } });
    expect(noAgentNode.statusCode).toBe(400);
    expect((await req('GET', `/agents/${id}`)).json().ruleChain.name).toBe('No id given');
  });

  it('DELETE removes the agent with its skills, workspace and agent-level rules', async () => {
    const id = uid('doomed');
    const keep = uid('kept');
    await createAgent(env, id);
    await createAgent(env, keep);
    const ruleId = uid('doomed_rule');
    expect((await req('POST', `/agents/${id}/rules`, ruleDsl(ruleId))).statusCode).toBe(201);
    expect((await req('POST', `/agents/${id}/skills`, { name: 'tidy', content: 'Tidy up.' })).statusCode).toBe(201);
    expect((await req('POST', `/agents/${keep}/skills`, { name: 'tidy', content: 'Tidy up.' })).statusCode).toBe(201);
    expect((await req('POST', `/agents/${id}/workspace/files`, { path: 'notes/a.txt', content: 'x' })).statusCode).toBe(201);

    const res = await req('DELETE', `/agents/${id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await req('GET', `/agents/${id}`)).statusCode).toBe(404);
    expect((await req('GET', `/rules/${ruleId}`)).statusCode).toBe(404);
    const { db } = env();
    const left = await sql<{ chains: number; skills: number; files: number }>`
      select (select count(*) from rule_chains where id = ${id} or agent_id = ${id})::int as chains,
             (select count(*) from skills where agent_id = ${id})::int as skills,
             (select count(*) from workspace_entries where agent_id = ${id})::int as files`.execute(db);
    expect(left.rows[0]).toEqual({ chains: 0, skills: 0, files: 0 });
    // The other agent keeps its own.
    expect((await req('GET', `/agents/${keep}/skills/tidy`)).statusCode).toBe(200);
    expect((await req('DELETE', `/agents/${id}`)).statusCode).toBe(404);
  });

  it('POST /agents/{id}/reload answers {success:true} and drops the copy cached by every replica', async () => {
    const id = uid('reload');
    await createAgent(env, id);
    const other = await env().replica();
    await new Promise((resolve) => setTimeout(resolve, 20)); // let in-flight invalidations land
    // The other replica loads the agent, then the row changes behind every cache's back.
    const listed = await other.inject({ method: 'GET', url: '/api/v1/rules?category=agents&loaded=true' });
    expect(listed.json().map((r: { ruleChain: { id: string } }) => r.ruleChain.id)).toContain(id);
    await sql`update rule_chains set dsl = ${JSON.stringify({ ...agentDsl(id), metadata: { nodes: [{ id: 'e', type: 'end' }], connections: [] } })} where id = ${id}`.execute(env().db);
    const stale = await other.inject({ method: 'GET', url: '/api/v1/rules?loaded=false' });
    expect(stale.json().map((r: { ruleChain: { id: string } }) => r.ruleChain.id)).not.toContain(id);

    const res = await req('POST', `/agents/${id}/reload`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(/an agent needs a node of type "ai\/agent"/) });
    await expect
      .poll(async () => (await other.inject({ method: 'GET', url: '/api/v1/rules?loaded=false' })).json().map((r: { ruleChain: { id: string } }) => r.ruleChain.id))
      .toContain(id);

    // Repaired, reloaded: loaded again everywhere, and reload says so.
    await sql`update rule_chains set dsl = ${JSON.stringify(agentDsl(id))} where id = ${id}`.execute(env().db);
    expect((await req('POST', `/agents/${id}/reload`)).json()).toEqual({ success: true });
    await expect
      .poll(async () => (await other.inject({ method: 'GET', url: '/api/v1/rules?loaded=true' })).json().map((r: { ruleChain: { id: string } }) => r.ruleChain.id))
      .toContain(id);
  });
});
