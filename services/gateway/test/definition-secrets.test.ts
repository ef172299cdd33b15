import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRuleChain, insertRuleChain, type JsonValue } from '@agentry/db';
import { SECRET_MARKER, unsealDefinition } from '@agentry/definitions';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';
import { describeOnBothEngines, uid, type Env } from './resources-harness.js';

/**
 * Secrets inside definitions (issue 20, finding 3): an MCP header, a restApiCall header and a
 * token in a tool's config are sealed in the row, never answered by any read, kept across a
 * GET-then-PUT, replaced by a new value and removed by "" or null.
 */
const MCP_TOKEN = 'Bearer mcp-plain-7c1e0a';
const REST_KEY = 'rest-plain-93bd44';
const TOOL_TOKEN = 'tool-plain-5f20aa';
const RULE_TOKEN = 'rule-plain-d0e1f2';
const PLAINTEXTS = [MCP_TOKEN, 'mcp-plain-7c1e0a', REST_KEY, TOOL_TOKEN, RULE_TOKEN];

function secretAgent(id: string, mcpAuth: string | null = MCP_TOKEN, restKey: string | null = REST_KEY) {
  return {
    ruleChain: { id, name: `Agent ${id}` },
    metadata: {
      nodes: [
        { id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'https://api.example.com/hook', requestMethod: 'POST', headers: { 'X-Api-Key': restKey, Accept: 'application/json' } } },
        {
          id: 'agent',
          type: 'ai/agent',
          configuration: {
            provider: 'p1',
            tools: [
              { type: 'mcp', name: 'docs', config: { url: 'https://mcp.example.com/mcp', headers: { Authorization: mcpAuth } } },
              { type: 'builtin', name: 'read', config: { apiToken: TOOL_TOKEN } },
            ],
          },
        },
      ],
      connections: [{ fromId: 'call', toId: 'agent', type: 'Success' }],
    },
  };
}

function secretRule(id: string) {
  return {
    ruleChain: { id, name: `Rule ${id}` },
    metadata: {
      nodes: [{ id: 'call', type: 'restApiCall', configuration: { restEndpointUrlPattern: 'https://api.example.com/x', headers: { authorization: RULE_TOKEN } } }],
      connections: [],
    },
  };
}

type Dsl = ReturnType<typeof secretAgent>;
const mcpHeaders = (dsl: unknown) => ((dsl as Dsl).metadata.nodes[1]!.configuration as { tools: Array<{ config: { headers: Record<string, unknown> } }> }).tools[0]!.config.headers;
const restHeaders = (dsl: unknown) => ((dsl as Dsl).metadata.nodes[0]!.configuration as { headers: Record<string, unknown> }).headers;

function expectNoPlaintext(text: string, where: string) {
  for (const plain of PLAINTEXTS) expect(text, `${where} holds ${plain}`).not.toContain(plain);
}

describeOnBothEngines('secrets in definitions', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  /** The stored row's DSL with its secrets opened by the master key, as the worker sees it. */
  const opened = async (id: string) => unsealDefinition((await getRuleChain(env().db, id))!.dsl, env().runtime.secrets, id) as unknown as Dsl;

  it('answers no secret from any read, and stores none in plain text', async () => {
    const id = uid('sealed_agent');
    const ruleId = uid('sealed_rule');
    const created = await req('POST', '/agents', secretAgent(id));
    expect(created.statusCode).toBe(201);
    expect(mcpHeaders(created.json())).toEqual({ Authorization: SECRET_MARKER });
    expect(restHeaders(created.json())).toEqual({ 'X-Api-Key': SECRET_MARKER, Accept: 'application/json' });
    const rule = await req('POST', `/agents/${id}/rules`, secretRule(ruleId));
    expect(rule.statusCode).toBe(201);

    const reads = [
      created,
      rule,
      await req('GET', `/agents/${id}`),
      await req('GET', '/agents'),
      await req('GET', '/rules'),
      await req('GET', `/rules?agentId=${id}`),
      await req('GET', `/rules/${id}`),
      await req('GET', `/rules/${ruleId}`),
      await req('GET', `/agents/${id}/rules`),
      await req('GET', `/agents/${id}/rules/${ruleId}`),
      await req('PUT', `/agents/${id}`, (await req('GET', `/agents/${id}`)).json()),
    ];
    for (const [i, res] of reads.entries()) {
      expect(res.statusCode, res.body).toBeLessThan(300);
      expectNoPlaintext(res.body, `read ${i}`);
      expect(res.body).not.toContain('sealed:');
    }
    const listed = (await req('GET', '/rules')).json() as Array<{ ruleChain: { id: string }; metadata: unknown; loaded: boolean }>;
    const item = listed.find((r) => r.ruleChain.id === id)!;
    expect(item.loaded).toBe(true);
    expect(mcpHeaders(item)).toEqual({ Authorization: SECRET_MARKER });

    for (const chain of [id, ruleId]) {
      const stored = JSON.stringify((await getRuleChain(env().db, chain))!.dsl);
      expectNoPlaintext(stored, `the row of ${chain}`);
      expect(stored).toMatch(/"sealed:v1\./);
    }
    expectNoPlaintext(env().logs(), 'the log');
    // The worker's view: the values as written.
    expect(mcpHeaders(await opened(id))).toEqual({ Authorization: MCP_TOKEN });
    expect(restHeaders(await opened(id))).toEqual({ 'X-Api-Key': REST_KEY, Accept: 'application/json' });
  });

  it('keeps secrets through GET then PUT, replaces them with new values and removes them with "" or null', async () => {
    const id = uid('round_trip');
    expect((await req('POST', '/agents', secretAgent(id))).statusCode).toBe(201);
    const edited = (await req('GET', `/agents/${id}`)).json() as Dsl;
    edited.ruleChain.name = 'Renamed';
    // The editor may reorder tools; the secret follows its tool.
    edited.metadata.nodes[1]!.configuration.tools!.reverse();
    const put = await req('PUT', `/agents/${id}`, edited);
    expect(put.statusCode, put.body).toBe(200);
    const kept = await opened(id);
    expect(kept.ruleChain.name).toBe('Renamed');
    expect(kept.metadata.nodes[1]!.configuration.tools![1]).toEqual({ type: 'mcp', name: 'docs', config: { url: 'https://mcp.example.com/mcp', headers: { Authorization: MCP_TOKEN } } });
    expect(restHeaders(kept)).toEqual({ 'X-Api-Key': REST_KEY, Accept: 'application/json' });

    const replaced = await req('PUT', `/agents/${id}`, secretAgent(id, 'Bearer mcp-new-0042', SECRET_MARKER));
    expect(replaced.statusCode, replaced.body).toBe(200);
    expectNoPlaintext(replaced.body, 'PUT');
    expect(replaced.body).not.toContain('mcp-new-0042');
    expect(mcpHeaders(await opened(id))).toEqual({ Authorization: 'Bearer mcp-new-0042' });
    expect(restHeaders(await opened(id))).toEqual({ 'X-Api-Key': REST_KEY, Accept: 'application/json' });

    const removed = await req('PUT', `/agents/${id}`, secretAgent(id, '', null));
    expect(removed.statusCode, removed.body).toBe(200);
    expect(mcpHeaders(removed.json())).toEqual({});
    expect(restHeaders(removed.json())).toEqual({ Accept: 'application/json' });
    expect(mcpHeaders(await opened(id))).toEqual({});
    expect(restHeaders(await opened(id))).toEqual({ Accept: 'application/json' });
  });

  it('does not let a kept secret follow a changed URL', async () => {
    const id = uid('moved');
    expect((await req('POST', '/agents', secretAgent(id))).statusCode).toBe(201);
    const edited = (await req('GET', `/agents/${id}`)).json() as Dsl;
    (edited.metadata.nodes[0]!.configuration as { restEndpointUrlPattern: string }).restEndpointUrlPattern = 'https://collector.example.net/grab';
    const put = await req('PUT', `/agents/${id}`, edited);
    expect(put.statusCode, put.body).toBe(200);
    expect(restHeaders(put.json())).toEqual({ Accept: 'application/json' });
    expect(restHeaders(await opened(id))).toEqual({ Accept: 'application/json' });
    // The MCP tool's address did not change: its secret stays.
    expect(mcpHeaders(await opened(id))).toEqual({ Authorization: MCP_TOKEN });
  });

  it('refuses a marker with no secret behind it and a value that poses as sealed, in human words', async () => {
    const id = uid('copied');
    const copied = await req('POST', '/agents', secretAgent(id, SECRET_MARKER));
    expect(copied.statusCode).toBe(400);
    expect(copied.json()).toEqual({
      error: 'Invalid input: metadata.nodes[1].configuration.tools[0].config.headers.Authorization: holds the secret marker "[secret]" but no secret is stored there; send the value itself',
    });
    const posing = secretAgent(id);
    (posing.ruleChain as Record<string, unknown>).additionalInfo = { description: 'sealed:v1.AAAA' };
    const planted = await req('POST', '/agents', posing);
    expect(planted.statusCode).toBe(400);
    expect(planted.json().error).toMatch(/ruleChain\.additionalInfo\.description: values starting with "sealed:" are reserved/);
  });

  it('seals plain text stored before this release when a gateway starts, once', async () => {
    const id = uid('legacy');
    await insertRuleChain(env().db, { id, kind: 'agent', agentId: null, name: id, category: null, dsl: secretAgent(id) as unknown as JsonValue });
    expect(JSON.stringify((await getRuleChain(env().db, id))!.dsl)).toContain(MCP_TOKEN);
    // Reads redact even before the pass.
    expectNoPlaintext((await req('GET', `/agents/${id}`)).body, 'GET before the pass');

    await env().replica();
    const sealed = (await getRuleChain(env().db, id))!;
    expectNoPlaintext(JSON.stringify(sealed.dsl), 'the row after the pass');
    expect(mcpHeaders(await opened(id))).toEqual({ Authorization: MCP_TOKEN });
    await env().replica();
    expect((await getRuleChain(env().db, id))!.updatedAt).toEqual(sealed.updatedAt);
  });
});

describe('secrets in definitions with authentication on (the reported case)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(
      [
        'models: {default_provider: p1, providers: {p1: {base_url: "http://127.0.0.1:1/v1", model: m}}}',
        'security: {requireAuth: true, users: {admin: "admin-password-0123", bob: "bob-password-0123"}}',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await h?.close();
  });

  it("a user reads an admin's agent and the rule list without the admin's MCP token", async () => {
    const admin = bearer(await login(h.app, 'admin', 'admin-password-0123'));
    const bob = bearer(await login(h.app, 'bob', 'bob-password-0123'));
    const created = await h.app.inject({ method: 'POST', url: '/api/v1/agents', headers: admin, payload: secretAgent('admins') });
    expect(created.statusCode, created.body).toBe(201);
    for (const url of ['/api/v1/agents/admins', '/api/v1/rules', '/api/v1/agents']) {
      const res = await h.app.inject({ method: 'GET', url, headers: bob });
      expect(res.statusCode, res.body).toBe(200);
      expectNoPlaintext(res.body, `${url} as bob`);
    }
    expect(mcpHeaders((await h.app.inject({ method: 'GET', url: '/api/v1/agents/admins', headers: bob })).json())).toEqual({ Authorization: SECRET_MARKER });
  });
});
