import JSZip from 'jszip';
import { expect, it } from 'vitest';
import { insertCronRun } from '@agentry/db';
import { createAgent, describeOnBothEngines, multipart, uid, type Env } from './resources-harness.js';

/**
 * The skills, workspace, cron, channels and providers routes answer through their response
 * schemas, and fastify's serializer drops every field a schema does not declare. Each case here
 * pins the whole answer of representative routes (exact keys, no extras missing): a field left
 * out of a schema fails it, where the other suites, which mostly match parts, would not notice.
 */

const DATE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describeOnBothEngines('answers keep every field', (env: () => Env) => {
  const req = async (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const res = await env().req(method, `/api/v1${url}`, body);
    return { status: res.statusCode, body: res.json() as unknown };
  };

  it('skills: a skill, a page of them (no content), an upload', async () => {
    const agent = uid('kf_sk');
    await createAgent(env, agent);
    const created = await req('POST', `/agents/${agent}/skills`, { name: 'kf', description: 'D', content: 'Body', status: 'draft' });
    const skill = { name: 'kf', description: 'D', content: 'Body', scope: 'local', agentId: agent, status: 'draft', createdAt: expect.stringMatching(DATE), updatedAt: expect.stringMatching(DATE) };
    expect(created).toEqual({ status: 201, body: skill });
    const { content: _content, ...listed } = skill;
    expect(await req('GET', `/agents/${agent}/skills`)).toEqual({ status: 200, body: { data: [listed], total: 1, page: 1, size: 20 } });

    const zip = new JSZip();
    zip.file('up/SKILL.md', '---\nname: up\ndescription: Up\n---\nx');
    zip.file('notes.txt', 'not a skill');
    const { payload, headers } = multipart([{ name: 'file', filename: 'skills.zip', value: await zip.generateAsync({ type: 'nodebuffer' }) }]);
    const up = await env().app.inject({ method: 'POST', url: `/api/v1/agents/${agent}/skills/upload`, payload, headers });
    expect(up.statusCode, up.body).toBe(200);
    expect(up.json()).toEqual({ created: ['up'], updated: [], skipped: [{ entry: 'notes.txt', reason: expect.any(String) }] });
  });

  it('workspace: written entries, a listing, text and base64 content', async () => {
    const agent = uid('kf_ws');
    await createAgent(env, agent);
    expect(await req('POST', `/agents/${agent}/workspace/files`, { path: 'docs/a.txt', content: 'hello' })).toEqual({
      status: 201,
      body: { path: 'docs/a.txt', name: 'a.txt', isDir: false, size: 5, modTime: expect.stringMatching(DATE) },
    });
    expect(await req('POST', `/agents/${agent}/workspace/dirs`, { path: 'empty' })).toEqual({ status: 201, body: { path: 'empty', name: 'empty', isDir: true } });
    expect(await req('GET', `/agents/${agent}/workspace/entries`)).toEqual({
      status: 200,
      body: expect.arrayContaining([
        { name: 'docs', isDir: true },
        { name: 'empty', isDir: true },
      ]),
    });
    expect((await req('GET', `/agents/${agent}/workspace/entries?path=docs`)).body).toEqual([{ name: 'a.txt', isDir: false, size: 5, modTime: expect.stringMatching(DATE) }]);
    expect(await req('GET', `/agents/${agent}/workspace/file?path=docs/a.txt`)).toEqual({ status: 200, body: { content: 'hello' } });
    await req('PUT', `/agents/${agent}/workspace/file?path=bin`, { content: Buffer.from([0xff, 0xfe, 0x00]).toString('base64'), encoding: 'base64' });
    expect(await req('GET', `/agents/${agent}/workspace/file?path=bin`)).toEqual({ status: 200, body: { content: '//4A', encoding: 'base64' } });
    expect(await req('PATCH', `/agents/${agent}/workspace/rename?path=bin`, { newName: 'bin2' })).toEqual({
      status: 200,
      body: { path: 'bin2', name: 'bin2', isDir: false, size: 3, modTime: expect.stringMatching(DATE) },
    });
    expect(await req('DELETE', `/agents/${agent}/workspace/entry?path=bin2`)).toEqual({ status: 200, body: { success: true } });
  });

  it('cron: a job with every field, a page of its runs (numeric ids)', async () => {
    const agent = uid('kf_cron');
    await createAgent(env, agent);
    const created = await req('POST', '/cron', { name: 'daily', schedule: '0 0 9 * * *', message: 'report', target: agent });
    const job = {
      id: expect.any(String),
      name: 'daily',
      schedule: '0 0 9 * * *',
      message: 'report',
      target: agent,
      disabled: false,
      timezone: expect.any(String),
      deliver: null,
      owner: expect.any(String),
      nextRunAt: expect.stringMatching(DATE),
      lastRunAt: null,
      lastStatus: null,
      createdAt: expect.stringMatching(DATE),
      updatedAt: expect.stringMatching(DATE),
    };
    expect(created).toEqual({ status: 201, body: job });
    const id = (created.body as { id: string }).id;
    expect(await req('PUT', `/cron/${id}/toggle`, { disabled: true })).toEqual({ status: 200, body: { ...job, disabled: true, nextRunAt: null } });
    expect(await req('GET', `/agents/${agent}/cron`)).toEqual({ status: 200, body: [{ ...job, disabled: true, nextRunAt: null }] });

    await insertCronRun(env().db, { cronJobId: id, scheduledAt: new Date('2026-01-02T09:00:00Z'), runId: null });
    expect(await req('GET', `/cron/${id}/runs`)).toEqual({
      status: 200,
      body: {
        data: [
          {
            id: expect.any(Number),
            cronJobId: id,
            scheduledAt: '2026-01-02T09:00:00.000Z',
            runId: null,
            startedAt: expect.stringMatching(DATE),
            finishedAt: null,
            status: 'running',
            outputExcerpt: null,
            error: null,
            deliveryStatus: null,
            deliveryError: null,
          },
        ],
        total: 1,
        page: 1,
        size: 20,
      },
    });
  });

  it('channels: an account with its open settings, the generated key once, platform views, bindings', async () => {
    const agent = uid('kf_ch');
    await createAgent(env, agent);
    const id = uid('kf_lark');
    const account = {
      id,
      name: 'Lark',
      enabled: true,
      dmPolicy: 'allow',
      groupPolicy: 'disabled',
      appId: 'cli_1',
      hasSecret: true,
      allowFrom: ['oc_1'],
      sessionScope: 'per_peer',
      apiBase: 'http://127.0.0.1:1/open-apis',
    };
    const created = await req('POST', '/channels/chat_a/accounts', {
      id,
      name: 'Lark',
      group_policy: 'disabled',
      app_id: 'cli_1',
      app_secret: 'secret-of-kept-fields',
      allow_from: ['oc_1'],
      session_scope: 'per_peer',
      api_base: 'http://127.0.0.1:1/open-apis',
      binding: { agentId: agent },
    });
    expect(created).toEqual({ status: 201, body: account });
    expect(await req('GET', `/channels/chat_a/accounts/${id}`)).toEqual({ status: 200, body: account });
    expect((await req('GET', '/channels/chat_a')).body).toEqual({ enabled: true, accounts: expect.objectContaining({ [id]: account }) });
    const all = (await req('GET', '/channels')).body as { platforms: Record<string, { accounts: Record<string, unknown> }> };
    expect(all.platforms.chat_a?.accounts[id]).toEqual(account);

    const apiId = uid('kf_api');
    const api = await req('POST', '/channels/api/accounts', { id: apiId, description: 'bot' });
    expect(api).toEqual({
      status: 201,
      body: { id: apiId, name: apiId, enabled: true, dmPolicy: 'allow', groupPolicy: 'allow', appId: '', hasSecret: true, description: 'bot', apiKey: expect.stringMatching(/^sk-/) },
    });

    expect(await req('GET', '/bindings')).toEqual({ status: 200, body: { bindings: expect.arrayContaining([{ agentId: agent, match: { default: false, channel: 'chat_a', accountId: id } }]) } });
    const bindings = [
      { agentId: agent, match: { channel: 'chat_a', accountId: id } },
      { agentId: agent, match: { default: true } },
    ];
    expect(await req('PUT', '/bindings', { bindings })).toEqual({ status: 200, body: { bindings: [{ ...bindings[0], match: { default: false, ...bindings[0]!.match } }, bindings[1]] } });
    expect(await req('DELETE', `/channels/chat_a/accounts/${id}`)).toEqual({ status: 200, body: { success: true } });
    expect(await req('PUT', '/bindings', { bindings: [] })).toEqual({ status: 200, body: { bindings: [] } });
  });

  it('providers: the overview, a provider (never its key), a connection test, a reload', async () => {
    const id = uid('kf_prov');
    const provider = {
      id,
      name: 'Kept',
      base_url: 'http://127.0.0.1:1/v1',
      model: 'big',
      models: [{ name: 'big', alias: 'default', context_window: 8192 }, { name: 'small' }],
      hasApiKey: true,
    };
    const created = await req('POST', '/config/models/providers', {
      id,
      name: 'Kept',
      base_url: 'http://127.0.0.1:1/v1',
      api_key: 'sk-kept-fields-provider-key',
      models: [{ name: 'big', alias: 'default', context_window: 8192 }, { name: 'small' }],
    });
    expect(created).toEqual({ status: 201, body: provider });
    expect(await req('GET', '/config/models/providers')).toEqual({ status: 200, body: expect.arrayContaining([provider]) });
    expect(await req('GET', '/config/models')).toEqual({ status: 200, body: { default_provider: 'p1', providers: expect.arrayContaining([provider]) } });
    expect(await req('PUT', `/config/models/providers/${id}`, { api_key: null })).toEqual({ status: 200, body: { ...provider, hasApiKey: false } });
    expect(await req('PUT', `/config/models/providers/${id}/api-key`, { apiKey: 'sk-another-key' })).toEqual({ status: 200, body: { success: true } });
    expect(await req('POST', `/config/models/providers/${id}/test`)).toEqual({
      status: 200,
      body: { ok: false, latencyMs: expect.any(Number), method: 'models', error: expect.stringContaining('cannot reach') },
    });
    expect(await req('POST', '/config/models/reload')).toEqual({ status: 200, body: { success: true, message: expect.stringContaining('re-imported') } });
    expect(await req('DELETE', `/config/models/providers/${id}`)).toEqual({ status: 200, body: { success: true } });
  });
});

describeOnBothEngines('the document shows those answers', (env: () => Env) => {
  /** Answers that are not JSON of ours: raw file bytes, and each platform's own acknowledgement. */
  const NOT_JSON = new Set(['get /api/v1/agents/{agentId}/workspace/download', 'get /api/v1/channels/{platform}/accounts/{accountId}/events', 'post /api/v1/channels/{platform}/accounts/{accountId}/events']);
  const FAMILY = /^\/api\/v1\/(skills|agents\/\{agentId\}\/(skills|workspace|cron)|cron|channels|bindings|config\/models)(\/|$)/;

  it('every JSON route of the skills, workspace, cron, channels and providers families has its success schema in /openapi.json', async () => {
    const res = await env().req('GET', '/api/v1/openapi.json');
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: unknown }> }> }>> };
    const missing: string[] = [];
    let checked = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!FAMILY.test(path)) continue;
      for (const [method, op] of Object.entries(ops)) {
        if (NOT_JSON.has(`${method} ${path}`)) continue;
        checked += 1;
        const success = Object.entries(op.responses).find(([code]) => /^2\d\d$/.test(code));
        if (!success?.[1].content?.['application/json']?.schema) missing.push(`${method} ${path}`);
      }
    }
    expect(checked).toBeGreaterThan(40);
    expect(missing).toEqual([]);
  });
});
