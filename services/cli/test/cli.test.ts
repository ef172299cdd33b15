import fs from 'node:fs';
import path from 'node:path';
import JSZip from 'jszip';
import { stringify as stringifyYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '@agentry/testing';
import { agentDsl, runCli, startGateway, tempHome, type CliOptions, type TestGateway } from './support.js';

/** An admin's agents are shared with everyone (issue 35); the list shows it to the owner and admins. */
const EVERYONE = { everyone: true, users: [], roles: [], apiAccounts: [] };

/**
 * Every command of the real `agentry` bin against a real gateway (embedded mode) that requires
 * authentication: the suite logs in once, and management commands carry that JWT. Output is
 * JSON here (no terminal); the terminal output has its own suite (cli-terminal.test.ts).
 */
let gw: TestGateway;
let home: string;
const ADMIN_PASSWORD = 'admin-password-for-cli-1';

const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);
const file = (name: string, content: string | Buffer) => {
  const p = path.join(home, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  return p;
};

beforeAll(async () => {
  gw = await startGateway({ config: ['security:', '  requireAuth: true', '  users:', `    admin: "${ADMIN_PASSWORD}"`] });
  home = tempHome();
  const login = await cli(['login', '-u', 'admin'], { input: `${ADMIN_PASSWORD}\n` });
  expect(login.code, login.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

describe('usage', () => {
  it('prints help with examples (exit 0) and refuses bad usage with exit 2', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: agentry/);
    expect(help.stdout).toMatch(/Examples:\n {2}\$ agentry/);

    const sub = await cli(['cron', 'create', '--help']);
    expect(sub.code).toBe(0);
    expect(sub.stdout).toMatch(/--schedule <fields>/);
    expect(sub.stdout).toMatch(/Examples:\n {2}\$ agentry cron create/);

    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/Usage: agentry/);

    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^error: unknown command 'frobnicate'/);

    const missing = await cli(['cron', 'create', '--name', 'x']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error: required option/);

    const badInt = await cli(['agents', 'list', '--page', '0']);
    expect(badInt.code).toBe(2);
    expect(badInt.stderr).toMatch(/^error: option '--page <n>' argument '0' is invalid/);

    const clearAll = await cli(['sessions', 'clear']);
    expect(clearAll).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: give a filter/) });
  });

  it('reports server errors on stderr as "error: <message>" with exit 1, and an unreachable server likewise', async () => {
    const missing = await cli(['agents', 'get', 'no-such-agent']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toBe('error: Not found: agent "no-such-agent"\n');

    const closed = await freePort();
    const down = await runCli(['agents', 'list'], home, `http://127.0.0.1:${closed}`);
    expect(down.code).toBe(1);
    expect(down.stderr).toBe(`error: cannot reach http://127.0.0.1:${closed} (connection refused)\n`);

    const badUrl = await cli(['agents', 'list', '--url', 'ftp://x']);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toMatch(/^error: --url: "ftp:\/\/x" is not an http\(s\) URL/);
  });
});

describe('agents', () => {
  it('create -f (JSON), create --id (template), list, get, update -f (YAML), reload, delete', async () => {
    const created = await cli(['agents', 'create', '-f', file('support.json', JSON.stringify(agentDsl('support', 'Support')))]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.json()).toMatchObject({ ruleChain: { id: 'support', name: 'Support' } });

    const fromTemplate = await cli(['agents', 'create', '--id', 'helper', '--name', 'Helper']);
    expect(fromTemplate.code, fromTemplate.stderr).toBe(0);
    expect(fromTemplate.json()).toMatchObject({ ruleChain: { id: 'helper', name: 'Helper' } });

    const dup = await cli(['agents', 'create', '-f', path.join(home, 'support.json')]);
    expect(dup).toMatchObject({ code: 1, stderr: 'error: Already exists: agent "support"\n' });

    const both = await cli(['agents', 'create', '--id', 'x', '-f', 'y.json']);
    expect(both.code).toBe(2);

    const list = await cli(['agents', 'list']);
    expect(list.json()).toEqual([{ ruleChain: { id: 'helper', name: 'Helper', owner: 'admin', audience: EVERYONE } }, { ruleChain: { id: 'support', name: 'Support', owner: 'admin', audience: EVERYONE } }]);
    const page = await cli(['agents', 'list', '--page', '2', '--size', '1']);
    expect(page.json()).toEqual([{ ruleChain: { id: 'support', name: 'Support', owner: 'admin', audience: EVERYONE } }]);

    const got = await cli(['agents', 'get', 'support']);
    expect(got.json()).toMatchObject({ ruleChain: { id: 'support' }, metadata: { nodes: [{ type: 'ai/agent' }, { type: 'end' }] } });

    const yamlFile = file('support.yaml', stringifyYaml(agentDsl('support', 'Support desk')));
    const updated = await cli(['agents', 'update', '-f', yamlFile]);
    expect(updated.code, updated.stderr).toBe(0);
    expect((await cli(['agents', 'get', 'support'])).json()).toMatchObject({ ruleChain: { name: 'Support desk' } });

    const reload = await cli(['agents', 'reload', 'support']);
    expect(reload.code, reload.stderr).toBe(0);
    expect(reload.json()).toEqual({ success: true });

    const temp = await cli(['agents', 'create', '--id', 'doomed']);
    expect(temp.code).toBe(0);
    const deleted = await cli(['agents', 'delete', 'doomed']);
    expect(deleted).toMatchObject({ code: 0 });
    expect(deleted.json()).toEqual({ success: true });
    expect((await cli(['agents', 'list'])).json<unknown[]>()).toHaveLength(2);
  });

  it('disable and enable an agent: the flag is in its DSL and the list, and chat to it is refused meanwhile', async () => {
    const disabled = await cli(['agents', 'disable', 'support']);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.json()).toMatchObject({ ruleChain: { id: 'support', disabled: true } });
    expect((await cli(['agents', 'get', 'support'])).json()).toMatchObject({ ruleChain: { disabled: true } });
    expect((await cli(['agents', 'list'])).json()).toContainEqual({ ruleChain: { id: 'support', name: 'Support desk', disabled: true, owner: 'admin', audience: EVERYONE } });
    const refused = await cli(['chat', '-a', 'support', 'hi']);
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining('agent "support" is disabled') });

    const enabled = await cli(['agents', 'enable', 'support']);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(enabled.json()).toMatchObject({ ruleChain: { id: 'support', disabled: false } });
    expect((await cli(['agents', 'list'])).json()).toContainEqual({ ruleChain: { id: 'support', name: 'Support desk', owner: 'admin', audience: EVERYONE } });

    const missing = await cli(['agents', 'disable', 'no-such-agent']);
    expect(missing).toMatchObject({ code: 1, stderr: 'error: Not found: agent "no-such-agent"\n' });
  });
});

describe('workspace', () => {
  it('put (file, stdin, binary), ls, cat, mv, rm', async () => {
    const put = await cli(['workspace', 'put', 'notes/faq.md', '-f', file('faq.md', '# FAQ\nBe kind.\n'), '-a', 'support']);
    expect(put.code, put.stderr).toBe(0);
    expect(put.json()).toMatchObject({ path: 'notes/faq.md', isDir: false, size: 15 });

    const fromStdin = await cli(['workspace', 'put', 'STYLE.md', '-a', 'support'], { input: 'be brief\n' });
    expect(fromStdin.code, fromStdin.stderr).toBe(0);

    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0xfe, 0x01]);
    expect((await cli(['ws', 'put', 'img/logo.png', '-f', file('logo.png', bytes), '-a', 'support'])).code).toBe(0);

    const root = await cli(['workspace', 'ls', '-a', 'support']);
    expect(root.json<Array<{ name: string }>>().map((e) => e.name).sort()).toEqual(['AGENTS.md', 'STYLE.md', 'img', 'notes']);
    const notes = await cli(['workspace', 'ls', 'notes', '-a', 'support']);
    expect(notes.json()).toEqual([{ name: 'faq.md', isDir: false, size: 15, modTime: expect.stringMatching(/Z$/) }]);

    const cat = await cli(['workspace', 'cat', 'notes/faq.md', '-a', 'support']);
    expect(cat).toMatchObject({ code: 0, stdout: '# FAQ\nBe kind.\n' });
    expect((await cli(['workspace', 'cat', 'STYLE.md', '-a', 'support'])).stdout).toBe('be brief\n');
    expect((await cli(['workspace', 'cat', 'STYLE.md', '-a', 'support', '--json'])).json()).toEqual({ content: 'be brief\n' });

    // Binary content comes back byte for byte.
    const raw = await cli(['workspace', 'cat', 'img/logo.png'], { env: { AGENTRY_AGENT: 'support' } });
    expect(raw.bytes.equals(bytes)).toBe(true);

    const mv = await cli(['workspace', 'mv', 'notes/faq.md', 'faq.md', '-a', 'support']);
    expect(mv.code, mv.stderr).toBe(0);
    expect(mv.json()).toMatchObject({ path: 'faq.md' });
    const mvDir = await cli(['workspace', 'mv', 'img', 'assets/img', '-a', 'support']);
    expect(mvDir.json()).toMatchObject({ path: 'assets/img', isDir: true });

    expect((await cli(['workspace', 'rm', 'assets', '-a', 'support'])).json()).toEqual({ success: true });
    const after = await cli(['workspace', 'ls', '-a', 'support']);
    expect(after.json<Array<{ name: string }>>().map((e) => e.name).sort()).toEqual(['AGENTS.md', 'STYLE.md', 'faq.md', 'notes']);

    const gone = await cli(['workspace', 'cat', 'assets/img/logo.png', '-a', 'support']);
    expect(gone).toMatchObject({ code: 1, stderr: 'error: Not found: workspace file "assets/img/logo.png"\n' });

    // Two agents exist: without -a (or AGENTRY_AGENT) the CLI asks which.
    const which = await cli(['workspace', 'ls']);
    expect(which.code).toBe(2);
    expect(which.stderr).toMatch(/^error: name an agent with -a \(one of: helper, support\)/);
  });
});

describe('skills', () => {
  it('create (global from front matter, local with -a), list, get, upload a zip, delete', async () => {
    const md = file('summarise/SKILL.md', '---\nname: summarise\ndescription: Summarise a text\n---\nSummarise in three bullet points.\n');
    const global = await cli(['skills', 'create', '-f', md]);
    expect(global.code, global.stderr).toBe(0);
    expect(global.json()).toMatchObject({ name: 'summarise', scope: 'global', description: 'Summarise a text', content: 'Summarise in three bullet points.\n' });

    const local = await cli(['skills', 'create', 'triage', '-f', '-', '-a', 'support', '-d', 'Sort tickets'], { input: 'Sort by urgency.\n' });
    expect(local.code, local.stderr).toBe(0);
    expect(local.json()).toMatchObject({ name: 'triage', scope: 'local', agentId: 'support', description: 'Sort tickets' });

    const zip = new JSZip();
    zip.file('greet/SKILL.md', '---\ndescription: Greet people\n---\nSay hello.\n');
    zip.file('farewell.md', 'Say goodbye.\n');
    const archive = file('skills.zip', await zip.generateAsync({ type: 'nodebuffer' }));
    const upload = await cli(['skills', 'upload', archive]);
    expect(upload.code, upload.stderr).toBe(0);
    expect(upload.json()).toEqual({ created: expect.arrayContaining(['greet', 'farewell']), updated: [], skipped: [] });

    const all = await cli(['skills', 'list']);
    expect(all.json<Array<{ name: string; scope: string }>>().map((s) => `${s.scope}:${s.name}`)).toEqual([
      'global:farewell',
      'global:greet',
      'global:summarise',
      'local:triage',
    ]);
    const localOnly = await cli(['skills', 'list', '--scope', 'local', '-a', 'support']);
    expect(localOnly.json<Array<{ name: string }>>().map((s) => s.name)).toEqual(['triage']);

    const got = await cli(['skills', 'get', 'triage', '-a', 'support']);
    expect(got.json()).toMatchObject({ name: 'triage', content: 'Sort by urgency.\n' });
    const notGlobal = await cli(['skills', 'get', 'triage']);
    expect(notGlobal).toMatchObject({ code: 1, stderr: 'error: Not found: global skill "triage"\n' });

    expect((await cli(['skills', 'delete', 'triage', '-a', 'support'])).json()).toEqual({ success: true });
    expect((await cli(['skills', 'delete', 'farewell'])).json()).toEqual({ success: true });
    expect((await cli(['skills', 'list'])).json<unknown[]>()).toHaveLength(2);
  });
});

describe('rules', () => {
  it('list (filters), get, reload', async () => {
    const all = await cli(['rules', 'list']);
    expect(all.code, all.stderr).toBe(0);
    expect(all.json<Array<{ ruleChain: { id: string }; kind: string; loaded: boolean }>>().map((r) => [r.ruleChain.id, r.kind, r.loaded])).toEqual([
      ['helper', 'agent', true],
      ['support', 'agent', true],
    ]);
    expect((await cli(['rules', 'list', '--failed'])).json()).toEqual([]);
    expect((await cli(['rules', 'list', '--loaded', '--category', 'agents'])).json<unknown[]>()).toHaveLength(1);
    expect((await cli(['rules', 'list', '-a', 'support'])).json()).toEqual([]);

    expect((await cli(['rules', 'get', 'helper'])).json()).toMatchObject({ ruleChain: { id: 'helper' } });
    expect((await cli(['rules', 'reload', 'helper'])).json()).toEqual({ success: true });
    const missing = await cli(['rules', 'reload', 'nope']);
    expect(missing).toMatchObject({ code: 1, stderr: 'error: Not found: rule chain "nope"\n' });
  });
});

describe('chat', () => {
  it('says on stderr which provider attempt is under way while the server retries; stdout stays the answer (issue 42)', async () => {
    expect((await cli(['agents', 'create', '-f', file('retrier.json', JSON.stringify(agentDsl('retrier', 'Retrier')))])).code).toBe(0);
    gw.fake.reset();
    gw.fake.script({ status: 503, body: { error: { message: 'warming up' } } }, { status: 502 }, { text: 'third time' });
    const chat = await cli(['chat', '-a', 'retrier', 'hi']);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe('third time\n');
    expect(chat.stderr).toBe('thinking (attempt 2 of 3: provider error (HTTP 503))\nthinking (attempt 3 of 3: provider error (HTTP 502))\n');
  });

  it('streams the answer to stdout; --json prints the raw completion', async () => {
    gw.fake.script({ text: ['Hello', ', ', 'world', '!'] });
    const chat = await cli(['chat', '-a', 'support', 'Say', 'hello']);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe('Hello, world!\n');
    const request = gw.fake.requests.at(-1)!;
    expect(request.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'Say hello' });

    gw.fake.script({ text: 'raw answer' });
    const raw = await cli(['chat', '-a', 'support', '--json', 'hi']);
    expect(raw.code, raw.stderr).toBe(0);
    expect(raw.json()).toMatchObject({
      object: 'chat.completion',
      model: 'support',
      id: expect.stringMatching(/^chatcmpl-/),
      choices: [{ index: 0, message: { role: 'assistant', content: 'raw answer' }, finish_reason: 'stop' }],
    });

    gw.fake.script({ text: 'from stdin' });
    const stdin = await cli(['chat', '-a', 'support', '-'], { input: 'a question\nover two lines\n' });
    expect(stdin.stdout).toBe('from stdin\n');
    expect(gw.fake.requests.at(-1)!.body.messages.at(-1)).toMatchObject({ content: 'a question\nover two lines' });
  });

  it('keeps one session: -s across runs, and the loop over stdin lines', async () => {
    const count = (req: { body: { messages: Array<{ role: string }> } }) => ({ text: `turns=${req.body.messages.filter((m) => m.role === 'user').length}` });
    gw.fake.script(count, count);
    expect((await cli(['chat', '-a', 'support', '-s', 'ticket-42', 'first'])).stdout).toBe('turns=1\n');
    expect((await cli(['chat', '-a', 'support', '-s', 'ticket-42', 'second'])).stdout).toBe('turns=2\n');

    gw.fake.script(count, count, count);
    const loop = await cli(['chat', '-a', 'helper', '-s', 'loop-1'], { input: 'one\n\ntwo\n/session\nthree\n/exit\nnot sent\n' });
    expect(loop.code, loop.stderr).toBe(0);
    expect(loop.stdout).toBe('turns=1\nturns=2\nturns=3\n');
    expect(loop.stderr).toMatch(/session loop-1/);

    const sessions = await cli(['sessions', 'list', '-a', 'support']);
    expect(sessions.code, sessions.stderr).toBe(0);
    expect(sessions.json()).toEqual([expect.objectContaining({ agentId: 'support', sessionKey: 'ticket-42', channel: 'api', messageCount: 4 })]);
    expect((await cli(['sessions', 'list'])).json<unknown[]>()).toHaveLength(2);

    const cleared = await cli(['sessions', 'clear', '-a', 'support', '-s', 'ticket-42']);
    expect(cleared.json()).toEqual({ success: true, message: 'cleared 1 session' });
    gw.fake.script(count);
    expect((await cli(['chat', '-a', 'support', '-s', 'ticket-42', 'again'])).stdout).toBe('turns=1\n');
    expect((await cli(['sessions', 'clear', '--all'])).json()).toMatchObject({ success: true });
    const afterAll = (await cli(['sessions', 'list'])).json<Array<{ messageCount: number }>>();
    expect(afterAll.map((s) => s.messageCount)).toEqual([0, 0]);
  });

  it('--tools shows the server-side tool calls (agui) on stderr', async () => {
    gw.fake.script({ toolCalls: [{ name: 'read', arguments: JSON.stringify({ path: 'STYLE.md' }) }] }, { text: 'Be brief, it says.' });
    const chat = await cli(['chat', '-a', 'support', '--tools', 'What does STYLE.md say?']);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe('Be brief, it says.\n');
    expect(chat.stderr).toMatch(/→ read \(builtin\) \{"path":"STYLE\.md"\}\n/);
    expect(chat.stderr).toMatch(/← read: .*be brief/);

    // Without --tools no tool data is shown (nor sent).
    gw.fake.script({ toolCalls: [{ name: 'read', arguments: JSON.stringify({ path: 'STYLE.md' }) }] }, { text: 'Quietly.' });
    const quiet = await cli(['chat', '-a', 'support', 'Again?']);
    expect(quiet).toMatchObject({ code: 0, stdout: 'Quietly.\n', stderr: '' });

    // --json --tools: the raw chunks, one a line.
    gw.fake.script({ toolCalls: [{ name: 'read', arguments: JSON.stringify({ path: 'STYLE.md' }) }] }, { text: 'Done.' });
    const chunks = await cli(['chat', '-a', 'support', '--tools', '--json', 'Once more']);
    const parsed = chunks.stdout.trim().split('\n').map((l) => JSON.parse(l) as { choices: Array<{ delta: { tool_calls?: Array<{ type: string }> } }> });
    const types = parsed.flatMap((c) => c.choices[0]?.delta.tool_calls?.map((t) => t.type) ?? []);
    expect(types).toEqual(['TOOL_CALL_START', 'TOOL_CALL_RESULT']);
  });

  it('fails cleanly: unknown agent, provider failure, a stream that breaks', async () => {
    const unknown = await cli(['chat', '-a', 'ghost', 'hi']);
    expect(unknown).toMatchObject({ code: 1, stdout: '', stderr: 'error: Not found: agent "ghost"\n' });

    gw.fake.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error' } } });
    const failed = await cli(['chat', '-a', 'support', 'hi']);
    // The sentence a person reads (issue 23, item 3); --verbose adds where it happened.
    expect(failed).toMatchObject({ code: 1, stdout: '', stderr: "error: the model provider 'fake' failed: HTTP 400 context too long\n" });
    gw.fake.script({ status: 400, body: { error: { message: 'context too long', type: 'invalid_request_error' } } });
    const verbose = await cli(['chat', '-a', 'support', 'hi', '--verbose']);
    expect(verbose.stderr).toMatch(/^error: the model provider 'fake' failed: HTTP 400 context too long\n {2}detail: chain "support", node "\w+" \(ai\/agent\): Upstream failure: provider "fake" \(model fake-model\): HTTP 400: context too long\n$/);

    // Broken after the first tokens: what arrived stays on stdout, the failure goes to stderr.
    gw.fake.script({ text: ['partial ', 'answer ', 'lost'], failAfterChunks: 2 });
    const broken = await cli(['chat', '-a', 'support', 'hi']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/^partial /);
    expect(broken.stderr).toMatch(/^error: \S/);

    const empty = await cli(['chat', '-a', 'support', '']);
    expect(empty.code).toBe(2);

    const which = await cli(['chat', 'hi']);
    expect(which.code).toBe(2);
    expect(which.stderr).toMatch(/^error: name an agent with -a/);
  });
});

describe('cron', () => {
  it('create, list, disable, enable, runs, delete', async () => {
    const created = await cli(['cron', 'create', '-a', 'helper', '--name', 'tick', '--schedule', '*/1 * * * * *', '-m', 'tick', '--timezone', 'Europe/Berlin']);
    expect(created.code, created.stderr).toBe(0);
    const job = created.json<{ id: string; disabled: boolean; target: string; timezone: string }>();
    expect(job).toMatchObject({ disabled: false, target: 'helper', timezone: 'Europe/Berlin' });

    const bad = await cli(['cron', 'create', '-a', 'helper', '--name', 'bad', '--schedule', '* * * * *', '-m', 'x']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: schedule "\* \* \* \* \*" has 5 fields.*did you mean "0 \* \* \* \* \*"/);
    const badDeliver = await cli(['cron', 'create', '-a', 'helper', '--name', 'bad', '--schedule', '0 0 * * * *', '-m', 'x', '--deliver', 'chat_d']);
    expect(badDeliver.code).toBe(2);

    // It fires every second; its runs show up.
    const runs = await waitFor(
      async () => {
        const r = await cli(['cron', 'runs', job.id]);
        const data = r.json<Array<{ cronJobId: string; status: string }>>();
        return data.some((x) => x.status === 'succeeded') && data;
      },
      20_000,
      300,
    );
    expect(runs[0]).toMatchObject({ cronJobId: job.id });

    // By its name too, as a person knows it; any case.
    const disabled = await cli(['cron', 'disable', 'TICK']);
    expect(disabled.json()).toMatchObject({ id: job.id, disabled: true, nextRunAt: null });
    const list = await cli(['cron', 'list', '-a', 'helper']);
    expect(list.json()).toEqual([expect.objectContaining({ id: job.id, name: 'tick', disabled: true })]);
    expect((await cli(['cron', 'show', 'tick'])).json()).toMatchObject({ id: job.id });
    const twin = await cli(['cron', 'create', '-a', 'helper', '--name', 'tick', '--schedule', '0 0 9 * * *', '-m', 'tock']);
    const twinId = twin.json<{ id: string }>().id;
    const ambiguous = await cli(['cron', 'show', 'tick']);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toContain(`2 cron jobs are named "tick" (${job.id} of agent helper, ${twinId} of agent helper): give the id`);
    expect((await cli(['cron', 'delete', twinId])).code).toBe(0);
    expect((await cli(['cron', 'show', 'no-such-job'])).code).toBe(1);
    const enabled = await cli(['cron', 'enable', 'tick']);
    expect(enabled.json()).toMatchObject({ disabled: false, nextRunAt: expect.any(String) });

    expect((await cli(['cron', 'delete', job.id])).json()).toEqual({ success: true });
    expect((await cli(['cron', 'list'])).json()).toEqual([]);
    expect((await cli(['cron', 'runs', job.id])).code).toBe(1);
  });
});

describe('config', () => {
  it('get (all, one key), set (typed values)', async () => {
    const all = await cli(['config', 'get']);
    expect(all.json()).toMatchObject({ server: { host: '127.0.0.1' }, models: { default_provider: 'fake' }, security: { requireAuth: true, users: { admin: true } } });
    expect((await cli(['config', 'get', 'models.default_provider'])).json()).toBe('fake');
    expect((await cli(['config', 'get', 'no.such.key'])).code).toBe(1);

    const set = await cli(['config', 'set', 'server.port', '9600']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.json()).toMatchObject({ server: { port: 9600 } });
    expect((await cli(['config', 'get', 'server.port'])).json()).toBe(9600);

    const wrong = await cli(['config', 'set', 'server.nope', 'x']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^error: .*server\.nope/);
  });
});

describe('usage (tokens)', () => {
  it('totals the tokens of model calls by the group asked for, as JSON; a bad group is a usage error', async () => {
    expect((await cli(['agents', 'create', '-f', file('metered.json', JSON.stringify(agentDsl('metered', 'Metered')))])).code).toBe(0);
    gw.fake.script({ text: 'counted', usage: { prompt_tokens: 40, completion_tokens: 2 } });
    expect((await cli(['chat', '-a', 'metered', 'count me'])).stdout).toBe('counted\n');
    const byAgent = async () => (await cli(['usage', '--group-by', 'agent', '--json'])).json<{ data: Array<{ key: string; promptTokens: number; completionTokens: number; requests: number }>; groupBy: string; from: string; to: string }>();
    await waitFor(async () => (await byAgent()).data.some((r) => r.key === 'metered'), 5000, 100);
    const report = await byAgent();
    expect(report.groupBy).toBe('agent');
    expect(report.data.find((r) => r.key === 'metered')).toEqual({ key: 'metered', promptTokens: 40, completionTokens: 2, totalTokens: 42, requests: 1 });
    const today = new Date().toISOString().slice(0, 10);
    const byPrincipal = await cli(['usage', '-g', 'principal', '--from', today, '--to', today]);
    expect(byPrincipal.code, byPrincipal.stderr).toBe(0);
    expect(byPrincipal.json<{ data: Array<{ key: string }>; from: string }>()).toMatchObject({ from: `${today}T00:00:00.000Z`, data: expect.arrayContaining([expect.objectContaining({ key: 'user:admin' })]) });
    // Yesterday's window holds none of it.
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    expect((await cli(['usage', '-g', 'agent', '--from', yesterday, '--to', yesterday])).json<{ data: unknown[] }>().data).toEqual([]);
    const bad = await cli(['usage', '-g', 'model']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/argument 'model' is invalid/);
    const badDate = await cli(['usage', '--from', 'yesterday']);
    expect(badDate.code).toBe(1);
    expect(badDate.stderr).toMatch(/from: not an ISO 8601 date/);
  });
});
