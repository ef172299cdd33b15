import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentryClient } from '@agentry/client';
import { freePort } from '@agentry/testing';
import { PROVIDER_KEY, agentDsl, runCli, startGateway, tempHome, type CliOptions, type TestGateway } from './support.js';

/**
 * The nouns and verbs of issue 23 (items 2, 6, 7) through the real bin against a real gateway
 * that requires a login: providers, channel accounts, bindings, rule chains, users, agents
 * show/enable/disable, and `doctor` (what works, and a fix named for what does not).
 */
let gw: TestGateway;
let home: string;
const ADMIN_PASSWORD = 'admin-password-for-cli-nouns';
const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);
const file = (name: string, content: unknown) => {
  const p = path.join(home, name);
  fs.writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
};

beforeAll(async () => {
  gw = await startGateway({ config: ['security:', '  requireAuth: true', '  users:', `    admin: "${ADMIN_PASSWORD}"`] });
  home = tempHome();
  const login = await cli(['login', '-u', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
  expect(login.code, login.stderr).toBe(0);
  const token = (await new AgentryClient({ url: gw.url }).auth.login('admin', ADMIN_PASSWORD)).token;
  await new AgentryClient({ url: gw.url, token }).agents.create(agentDsl('support'));
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

describe('the same verbs for every noun', () => {
  it('agents show (alias get), enable and disable', async () => {
    const shown = await cli(['agents', 'show', 'support']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.json()).toMatchObject({ ruleChain: { id: 'support' } });
    expect((await cli(['agents', 'get', 'support'])).json()).toEqual(shown.json());

    expect((await cli(['agents', 'disable', 'support'])).json()).toMatchObject({ ruleChain: { id: 'support', disabled: true } });
    expect((await cli(['agents', 'ls'])).json()).toEqual([{ ruleChain: { id: 'support', name: 'support', disabled: true, owner: 'admin', audience: { everyone: true, users: [], roles: [], apiAccounts: [] } } }]);
    expect((await cli(['agents', 'enable', 'support'])).json()).toMatchObject({ ruleChain: { disabled: false } });
  });

  it('agents heartbeat: set, change one field, show, refuse a bad interval with the reason, turn off', async () => {
    expect((await cli(['agents', 'heartbeat', 'support'])).json()).toMatchObject({ heartbeat: null, cronJobId: null });
    const set = await cli(['agents', 'heartbeat', 'support', '--every', '30m', '--hours', '22:00-06:00', '--tz', 'Europe/Berlin', '--prompt', 'anything new?']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.json()).toMatchObject({
      heartbeat: { interval: '30m', prompt: 'anything new?', activeHours: { start: '22:00', end: '06:00' }, timezone: 'Europe/Berlin' },
      cronJobId: 'heartbeat:support',
      schedule: '0 */30 * * * *',
      nextTickAt: expect.any(String),
    });
    // One option changes one field; the rest is kept, and the DSL holds it.
    expect((await cli(['agents', 'heartbeat', 'support', '--hours', 'all'])).json()).toMatchObject({ heartbeat: { interval: '30m', timezone: 'Europe/Berlin', prompt: 'anything new?' } });
    const dsl = (await cli(['agents', 'show', 'support'])).json<{ metadata: { nodes: { configuration: { heartbeat?: unknown } }[] } }>();
    expect(dsl.metadata.nodes[0]!.configuration.heartbeat).toEqual({ interval: '30m', prompt: 'anything new?', timezone: 'Europe/Berlin' });
    expect(await cli(['agents', 'heartbeat', 'support', '--every', '7m'])).toMatchObject({ code: 1, stderr: expect.stringContaining('heartbeat.interval "7m" must divide 60') });
    expect(await cli(['agents', 'heartbeat', 'support', '--hours', '9-17'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--hours takes HH:MM-HH:MM') });
    expect((await cli(['agents', 'heartbeat', 'support', '--off'])).json()).toEqual({ success: true });
    expect((await cli(['agents', 'heartbeat', 'support'])).json()).toMatchObject({ heartbeat: null, cronJobId: 'heartbeat:support', schedule: null });
  });

  it('rules create, show, update, delete (rm)', async () => {
    const dsl = { ruleChain: { id: 'triage', name: 'Triage' }, metadata: { nodes: [{ id: 'end', type: 'end', name: 'End' }], connections: [] } };
    const created = await cli(['rules', 'create', '-f', file('triage.json', dsl)]);
    expect(created.code, created.stderr).toBe(0);
    expect((await cli(['rules', 'show', 'triage'])).json()).toMatchObject({ ruleChain: { id: 'triage', name: 'Triage' } });
    const updated = await cli(['rules', 'update', '-f', file('triage2.json', { ...dsl, ruleChain: { id: 'triage', name: 'Triage 2' } })]);
    expect(updated.code, updated.stderr).toBe(0);
    expect((await cli(['rules', 'get', 'triage'])).json()).toMatchObject({ ruleChain: { name: 'Triage 2' } });
    expect((await cli(['rules', 'rm', 'triage'])).code).toBe(0);
    expect(await cli(['rules', 'show', 'triage'])).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: Not found/) });
  });

  it('rules create and update print the server\'s warnings (an unknown node field kept), --field-validation Strict refuses it, reload lists it', async () => {
    const dsl = {
      ruleChain: { id: 'lenient', name: 'Lenient' },
      metadata: { nodes: [{ id: 'wait', type: 'delay', configuration: { delayMs: 0, period: 500 } }], connections: [] },
    };
    const warning = 'Warning: metadata.nodes[0] ("wait"), delay: configuration: unknown field "period" (did you mean delayMs? RuleGo has no "period" and would not delay at all)\n';
    const created = await cli(['rules', 'create', '-f', file('lenient.json', dsl)]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toBe(warning);
    // The warning goes to stderr in JSON mode too; stdout stays the DSL as written.
    expect(created.json()).toEqual(dsl);
    const strict = await cli(['rules', 'update', 'lenient', '--field-validation', 'Strict', '-f', file('lenient.json', dsl)]);
    expect(strict).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: .*unknown field "period"/) });
    const ignored = await cli(['rules', 'update', 'lenient', '--field-validation', 'Ignore', '-f', file('lenient.json', dsl)]);
    expect(ignored).toMatchObject({ code: 0, stderr: '' });
    expect(await cli(['rules', 'update', 'lenient', '--field-validation', 'strict', '-f', file('lenient.json', dsl)])).toMatchObject({ code: 2 });
    const reloaded = await cli(['rules', 'reload', 'lenient']);
    expect(reloaded.code, reloaded.stderr).toBe(0);
    expect(reloaded.stderr).toBe(warning);
    expect((await cli(['agents', 'create', '--field-validation', 'Strict', '-f', file('bad-agent.json', { ...agentDsl('strict_agent'), metadata: { ...agentDsl('strict_agent').metadata, nodes: [...agentDsl('strict_agent').metadata.nodes, ...dsl.metadata.nodes] } })])).code).toBe(1);
    expect((await cli(['rules', 'rm', 'lenient'])).code).toBe(0);
  });

  it('users show and update', async () => {
    const created = await cli(['users', 'create', 'dora'], { input: 'dora-password-123\n' });
    expect(created.code, created.stderr).toBe(0);
    expect((await cli(['users', 'show', 'dora'])).json()).toMatchObject({ username: 'dora', role: 'user', disabled: false });
    expect((await cli(['users', 'update', 'dora', '--role', 'admin', '--disable'])).json()).toMatchObject({ role: 'admin', disabled: true });
    expect(await cli(['users', 'update', 'dora'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: give what changes/) });
    expect(await cli(['users', 'get', 'nobody'])).toMatchObject({ code: 1, stderr: 'error: Not found: user "nobody"\n' });
  });
});

describe('providers', () => {
  it('add, list, show, update, set-key, test, delete; keys never printed', async () => {
    const added = await cli(['providers', 'add', 'second', '--base-url', gw.fake.url, '--model', 'fake-model', '--key'], { input: `${PROVIDER_KEY}\n` });
    expect(added.code, added.stderr).toBe(0);
    expect(added.json()).toMatchObject({ id: 'second', hasApiKey: true, model: 'fake-model' });

    const list = await cli(['providers', 'ls']);
    expect(list.json<{ id: string }[]>().map((p) => p.id).sort()).toEqual(['fake', 'second']);
    expect(list.stdout + added.stdout).not.toContain(PROVIDER_KEY);
    expect((await cli(['providers', 'show', 'second'])).json()).toMatchObject({ id: 'second', base_url: gw.fake.url });

    expect((await cli(['providers', 'test', 'second'])).json()).toMatchObject({ ok: true });
    // A wrong key: the test fails with exit 1 and says why.
    expect((await cli(['providers', 'set-key', 'second'], { input: 'not-the-right-key-000\n' })).code).toBe(0);
    const failing = await cli(['providers', 'test', 'second']);
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(/^error: provider second does not answer: /);

    expect((await cli(['providers', 'update', 'second', '--model', 'other-model'])).json()).toMatchObject({ model: 'other-model' });
    expect((await cli(['providers', 'rm', 'second'])).code).toBe(0);
    expect((await cli(['providers', 'list'])).json<{ id: string }[]>().map((p) => p.id)).toEqual(['fake']);
  });
});

describe('channel accounts and bindings', () => {
  it('channels create (a generated api key shown once), show, update, delete', async () => {
    const created = await cli(['channels', 'create', 'api', 'partner', '--name', 'Partner']);
    expect(created.code, created.stderr).toBe(0);
    const key = created.json<{ apiKey: string }>().apiKey;
    expect(key).toMatch(/^sk-/);
    // The key works for chat at once.
    gw.fake.script({ text: 'hello partner' });
    expect(await cli(['chat', '-a', 'support', 'hi'], { env: { AGENTRY_API_KEY: key } })).toMatchObject({ code: 0, stdout: 'hello partner\n' });

    expect((await cli(['channels', 'show', 'api', 'partner'])).json()).toMatchObject({ id: 'partner', name: 'Partner', enabled: true });
    expect((await cli(['channels', 'show', 'api'])).json()).toMatchObject({ accounts: { partner: { id: 'partner' } } });
    expect((await cli(['channels', 'update', 'api', 'partner', '--disable', '--set', 'dm_policy=allow'])).json()).toMatchObject({ enabled: false });
    expect((await cli(['channels', 'show', 'api', 'partner'])).stdout).not.toContain(key);
  });

  it('bindings create, list, update, delete', async () => {
    const bound = await cli(['bindings', 'create', '-a', 'support', '--channel', 'api', '--account', 'partner']);
    expect(bound.code, bound.stderr).toBe(0);
    expect((await cli(['bindings', 'ls'])).json()).toEqual([{ agentId: 'support', match: { default: false, channel: 'api', accountId: 'partner' } }]);
    expect(await cli(['bindings', 'create', '-a', 'support', '--channel', 'api', '--account', 'partner'])).toMatchObject({ code: 1, stderr: 'error: that binding exists already\n' });

    const replaced = await cli(['bindings', 'update', '-f', file('b.yaml', 'bindings:\n  - {agentId: support, match: {channel: api}}\n')]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect((await cli(['bindings', 'list'])).json()).toEqual([{ agentId: 'support', match: { default: false, channel: 'api' } }]);

    expect((await cli(['bindings', 'rm', '-a', 'support', '--channel', 'api'])).code).toBe(0);
    expect((await cli(['bindings', 'list'])).json()).toEqual([]);
    expect((await cli(['channels', 'delete', 'api', 'partner'])).code).toBe(0);
    expect((await cli(['channels', 'show', 'api', 'partner'])).code).toBe(1);
  });
});

interface Doctor {
  ok: boolean;
  findings: { check: string; ok: boolean; detail: string; fix?: string }[];
}

describe('doctor', () => {
  it('reports server, version, auth, credential, each provider and readiness; exit 0 when all pass', async () => {
    const doc = await cli(['doctor', '--json']);
    expect(doc.code, doc.stderr).toBe(0);
    const report = doc.json<Doctor>();
    expect(report.ok).toBe(true);
    const checks = report.findings.map((f) => f.check);
    expect(checks).toEqual(expect.arrayContaining(['server', 'version', 'auth', 'credential', 'provider', 'default', 'agents', 'ready']));
    expect(report.findings.find((f) => f.check === 'version')!.detail).toMatch(/^\d+\.\d+\.\d+/);
    expect(report.findings.find((f) => f.check === 'auth')!.detail).toMatch(/login is required/);
    expect(report.findings.find((f) => f.check === 'provider')!.detail).toMatch(/^fake answers/);
    expect(report.findings.filter((f) => f.check === 'ready').map((f) => f.detail.split(' ')[0])).toContain('database');
  });

  it('names a fix for each failure: a provider that does not answer, a refused key, an unreachable server', async () => {
    const closed = await freePort();
    expect((await cli(['providers', 'add', 'dead', '--base-url', `http://127.0.0.1:${closed}/v1`, '--model', 'm'])).code).toBe(0);
    const doc = await cli(['doctor', '--json'], { env: { AGENTRY_API_KEY: 'sk-not-a-key-the-server-knows-0000' } });
    expect(doc.code).toBe(1);
    expect(doc.stderr).toMatch(/^error: 2 checks failed\n$/);
    const failed = doc.json<Doctor>().findings.filter((f) => !f.ok);
    expect(failed).toEqual([
      expect.objectContaining({ check: 'credential', detail: expect.stringMatching(/env AGENTRY_API_KEY is refused/), fix: expect.stringMatching(/AGENTRY_API_KEY/) }),
      expect.objectContaining({ check: 'provider', detail: expect.stringMatching(/^dead: /), fix: 'agentry providers set-key dead' }),
    ]);
    await cli(['providers', 'delete', 'dead']);

    const down = await runCli(['doctor'], home, `http://127.0.0.1:${closed}`);
    expect(down.code).toBe(1);
    expect(down.json<Doctor>().findings).toEqual([
      { check: 'server', ok: false, detail: `cannot reach http://127.0.0.1:${closed} (connection refused)`, fix: expect.stringMatching(/^start the server .* --url \/ AGENTRY_URL/) },
    ]);
  });

  it('reads a 503 from /ready: the failing check (the queue) with its fix, and no provider configured', async () => {
    // A stand-in server answering only what doctor asks, so /ready can fail on demand.
    const answers: Record<string, [number, unknown]> = {
      '/health': [200, 'OK'],
      '/api/v1/openapi.json': [200, { info: { version: '9.9.9' } }],
      '/api/v1/auth/status': [200, { requireAuth: true, user: null }],
      '/api/v1/models': [200, { object: 'list', data: [] }],
      '/api/v1/config/models/providers': [200, []],
      '/api/v1/config/models': [200, { default_provider: '', providers: [] }],
      '/api/v1/agents': [200, { data: [], total: 0, page: 1, size: 1 }],
      '/ready': [503, { error: 'not ready: redis', checks: { database: { ok: true, ms: 2 }, redis: { ok: false, ms: 5, error: 'connect ECONNREFUSED 127.0.0.1:6390' } } }],
    };
    const server = http.createServer((req, res) => {
      const [status, body] = answers[req.url!.split('?')[0]!] ?? [404, { error: 'Route not found' }];
      res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const doc = await runCli(['doctor', '--json'], tempHome(), url, { env: { AGENTRY_API_KEY: 'sk-some-key-for-the-stand-in-0001' } });
      expect(doc.code).toBe(1);
      expect(doc.json<Doctor>().findings).toEqual([
        { check: 'server', ok: true, detail: `${url} answers` },
        { check: 'version', ok: true, detail: '9.9.9' },
        { check: 'auth', ok: true, detail: 'a login is required for management' },
        { check: 'credential', ok: true, detail: 'chat works with API key sk-...0001 from env AGENTRY_API_KEY' },
        { check: 'providers', ok: false, detail: 'none configured', fix: "agentry providers add <id> --base-url <url> --model <name> --key, or the web UI's Model providers page (/providers)" },
        // What stops a first chat, each with the command and the page that fix it (issue 42).
        { check: 'default', ok: false, detail: 'no default provider: an agent that names none cannot answer', fix: "agentry providers add <id> --base-url <url> --default, or the web UI's Model providers page (/providers)" },
        { check: 'agents', ok: false, detail: 'none yet: there is nothing to chat with', fix: "agentry agents create --id helper, or the web UI's Agents page (/agents/new)" },
        { check: 'ready', ok: true, detail: 'database (2 ms)' },
        { check: 'ready', ok: false, detail: 'redis: connect ECONNREFUSED 127.0.0.1:6390', fix: 'the queue: check that Redis is running and REDIS_URL is right' },
      ]);
    } finally {
      server.close();
    }
  });
});

