import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryBus } from '@agentry/bus';
import { bootstrap, type Runtime } from '@agentry/runtime';
import { createTestPglite } from '@agentry/testing';
import { builtinTools, nodeTypes } from '@agentry/engine';
import { validateRuleChain } from '@agentry/definitions';
import { buildGateway, seedGateway } from '@agentry/gateway';

/** GET /tools, GET /tools/forms and GET /agent-template (embedded runtime, inject()). */
let runtime: Runtime;
let app: FastifyInstance;
let cwd: string;

beforeAll(async () => {
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-tools-'));
  fs.writeFileSync(
    path.join(cwd, 'config.yaml'),
    ['models:', '  default_provider: p1', '  providers:', '    p1: {name: One, base_url: "http://127.0.0.1:1/v1", models: [{name: m1, alias: default}]}'].join('\n'),
  );
  runtime = await bootstrap({
    service: 'gateway-test',
    mode: 'embedded',
    argv: [],
    env: { AGENTRY_SECRET_KEY: 'test-master-key-0123456789-abcdefghij' },
    cwd,
    logDestination: { write: () => undefined },
    openDb: () => createTestPglite(),
    openBus: (logger) => createMemoryBus({ logger }),
  });
  await seedGateway(runtime);
  app = await buildGateway(runtime);
  await app.ready();
  runtime.health.markStarted();
});

afterAll(async () => {
  await app?.close();
  await runtime?.lifecycle.shutdown('test');
  fs.rmSync(cwd, { recursive: true, force: true });
});

const get = (url: string) => app.inject({ method: 'GET', url: `/api/v1${url}` });

describe('GET /tools', () => {
  it('lists the built-in tools with JSON-schema parameters and whether they are opt-in', async () => {
    const res = await get('/tools');
    expect(res.statusCode).toBe(200);
    const tools = res.json() as Array<{ name: string; description: string; parameters: Record<string, unknown>; optIn: boolean }>;
    expect(tools.map((t) => t.name)).toEqual(['read', 'write', 'edit', 'grep', 'glob', 'skill', 'cron', 'send_message', 'http_fetch', 'bash']);
    for (const t of tools) {
      expect(Object.keys(t).sort()).toEqual(['description', 'name', 'optIn', 'parameters']);
      expect(t.parameters).toMatchObject({ type: 'object', properties: expect.any(Object), additionalProperties: false });
    }
    expect(tools.filter((t) => t.optIn).map((t) => t.name)).toEqual(['send_message', 'http_fetch', 'bash']);
    const read = tools.find((t) => t.name === 'read');
    expect(read?.parameters).toMatchObject({
      properties: { operation: { type: 'string', enum: ['file', 'list', 'search'] }, line_from: { type: 'integer', minimum: 1 } },
    });
    expect(tools.find((t) => t.name === 'write')?.parameters).toMatchObject({ required: ['path', 'content'] });
  });
});

describe('GET /tools/forms', () => {
  it('has a form for every node type, every built-in tool and the tool kinds', async () => {
    const res = await get('/tools/forms');
    expect(res.statusCode).toBe(200);
    const forms = res.json();
    expect(forms.nodes.map((n: { type: string }) => n.type).sort()).toEqual(Object.keys(nodeTypes).sort());
    const agent = forms.nodes.find((n: { type: string }) => n.type === 'ai/agent');
    expect(agent).toMatchObject({ description: expect.any(String), configuration: { type: 'object', properties: { systemPrompt: { type: 'string' }, tools: { type: 'array' } } } });
    expect(forms.nodes.find((n: { type: string }) => n.type === 'restApiCall').configuration.required).toEqual(['restEndpointUrlPattern']);

    expect(forms.tools.map((t: { name: string }) => t.name)).toEqual(Object.keys(builtinTools));
    const bash = forms.tools.find((t: { name: string }) => t.name === 'bash');
    expect(bash).toMatchObject({ optIn: true, parameters: { required: ['command'] }, config: { type: 'object', properties: { timeout: { type: 'integer' }, denyList: { type: 'array' } } } });
    const fetch = forms.tools.find((t: { name: string }) => t.name === 'http_fetch');
    expect(fetch.config.properties).toHaveProperty('allowPrivateNetworks');
    expect(fetch.config.properties).toHaveProperty('allowHosts');

    expect(forms.toolKinds).toEqual(['builtin', 'rulechain', 'agent', 'mcp']);
    expect(forms.toolKindForms.map((k: { kind: string }) => k.kind)).toEqual(['builtin', 'rulechain', 'agent', 'mcp']);
    expect(forms.toolKindForms.find((k: { kind: string }) => k.kind === 'mcp').config.properties).toHaveProperty('url');
    expect(forms.toolEntry.properties.type.anyOf.map((a: { const: string }) => a.const)).toEqual(['builtin', 'rulechain', 'agent', 'mcp']);
  });
});

describe('GET /agent-template', () => {
  it('is a valid agent on the default provider with the default built-in tools, and can be created as it is', async () => {
    const res = await get('/agent-template');
    expect(res.statusCode).toBe(200);
    const { workspaceFiles, ...dsl } = res.json();
    expect(validateRuleChain(dsl, { requireAgent: true })).toEqual({ ok: true, errors: [], warnings: [] });
    const node = dsl.metadata.nodes.find((n: { type: string }) => n.type === 'ai/agent');
    expect(node.configuration.provider).toBe('p1');
    expect(node.configuration.tools).toEqual(['read', 'write', 'edit', 'grep', 'glob', 'skill', 'cron'].map((name) => ({ type: 'builtin', name })));
    expect(node.configuration.systemPrompt).toContain('${include(AGENTS.md)}');
    expect(workspaceFiles[0].path).toBe('AGENTS.md');

    const created = await app.inject({ method: 'POST', url: '/api/v1/agents', payload: { ...dsl, ruleChain: { ...dsl.ruleChain, id: 'from_template' } } });
    expect(created.statusCode).toBe(201);
    expect(created.json().metadata.nodes[0].configuration.tools).toHaveLength(7);
  });
});
