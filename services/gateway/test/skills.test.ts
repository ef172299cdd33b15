import JSZip from 'jszip';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { deflatedZeros } from '@agentry/testing';
import { createAgent, describeOnBothEngines, multipart, rawZip, uid, type Env } from './resources-harness.js';

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new JSZip();
  for (const [name, content] of Object.entries(files)) zip.file(name, content);
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
}

/** Agent-private and global skills, uploads and copies, on both engines. */
describeOnBothEngines('skills', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  const upload = (url: string, file: Buffer, fields: Record<string, string> = {}) => {
    const { payload, headers } = multipart([...Object.entries(fields).map(([name, value]) => ({ name, value })), { name: 'file', filename: 'skills.zip', value: file }]);
    return env().app.inject({ method: 'POST', url: `/api/v1${url}`, payload, headers });
  };
  const skillCount = async () => (await sql<{ n: number }>`select count(*)::int as n from skills`.execute(env().db)).rows[0]?.n;

  it('agent-private CRUD: create 201, detail, update, delete {success:true}', async () => {
    const agent = uid('sk_agent');
    await createAgent(env, agent);
    const res = await req('POST', `/agents/${agent}/skills`, { name: 'summarise', description: 'Summaries', content: '# Summarise\nKeep it short.' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({
      name: 'summarise',
      description: 'Summaries',
      content: '# Summarise\nKeep it short.',
      scope: 'local',
      agentId: agent,
      status: 'active',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      updatedAt: expect.stringMatching(/Z$/),
    });
    expect((await req('GET', `/agents/${agent}/skills/summarise`)).json()).toEqual(res.json());

    const put = await req('PUT', `/agents/${agent}/skills/summarise`, { content: 'New body', status: 'draft' });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ name: 'summarise', description: 'Summaries', content: 'New body', status: 'draft' });

    const del = await req('DELETE', `/agents/${agent}/skills/summarise`);
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ success: true });
    const gone = await req('GET', `/agents/${agent}/skills/summarise`);
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toEqual({ error: `Not found: skill "summarise" of agent "${agent}"` });
    expect((await req('PUT', `/agents/${agent}/skills/summarise`, { content: 'x' })).statusCode).toBe(404);
    expect((await req('DELETE', `/agents/${agent}/skills/summarise`)).statusCode).toBe(404);
  });

  it('content given as a whole SKILL.md: the front matter supplies the description and is taken off', async () => {
    const agent = uid('sk_fm');
    await createAgent(env, agent);
    const res = await req('POST', `/agents/${agent}/skills`, { name: 'fm', content: '---\nname: ignored\ndescription: From the front matter\n---\n\n# Body\n' });
    expect(res.json()).toMatchObject({ name: 'fm', description: 'From the front matter', content: '# Body\n' });
    const bad = await req('POST', `/agents/${agent}/skills`, { name: 'fm2', content: '---\nname: [unclosed\n---\nx' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/front matter is not valid YAML/);
  });

  it('agent-private: 409 duplicate, 400 invalid names and fields, 404 unknown agent', async () => {
    const agent = uid('sk_val');
    await createAgent(env, agent);
    expect((await req('POST', `/agents/${agent}/skills`, { name: 'one', content: 'x' })).statusCode).toBe(201);
    const dup = await req('POST', `/agents/${agent}/skills`, { name: 'one', content: 'y' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json()).toEqual({ error: `Already exists: skill "one" of agent "${agent}"` });
    for (const body of [
      { name: 'has space', content: 'x' },
      { name: 'a'.repeat(65), content: 'x' },
      { name: '../up', content: 'x' },
      { name: '', content: 'x' },
      { name: 'nocontent' },
      { name: 'badstatus', content: 'x', status: 'archived' },
      { content: 'no name' },
    ]) {
      const res = await req('POST', `/agents/${agent}/skills`, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatch(/^Invalid input: body/);
    }
    expect((await req('GET', `/agents/${agent}/skills/bad%20name`)).statusCode).toBe(400);
    for (const [method, url, body] of [
      ['GET', '/agents/ghost/skills', undefined],
      ['GET', '/agents/ghost/skills/x', undefined],
      ['POST', '/agents/ghost/skills', { name: 'x', content: 'x' }],
      ['PUT', '/agents/ghost/skills/x', { content: 'x' }],
      ['DELETE', '/agents/ghost/skills/x', undefined],
    ] as const) {
      const res = await req(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found: agent "ghost"' });
    }
  });

  it('agent-private list is paged (defaults, bounds) and leaves content out', async () => {
    const agent = uid('sk_page');
    await createAgent(env, agent);
    for (const name of ['c', 'a', 'b']) await req('POST', `/agents/${agent}/skills`, { name, content: `body ${name}` });
    const res = await req('GET', `/agents/${agent}/skills`);
    expect(res.json()).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(res.json().data.map((s: { name: string }) => s.name)).toEqual(['a', 'b', 'c']);
    expect(res.json().data[0]).not.toHaveProperty('content');
    expect((await req('GET', `/agents/${agent}/skills?page=2&size=2`)).json()).toMatchObject({ total: 3, page: 2, size: 2, data: [{ name: 'c' }] });
    for (const q of ['page=0', 'size=0', 'size=101']) expect((await req('GET', `/agents/${agent}/skills?${q}`)).statusCode, q).toBe(400);
  });

  it('global routes: both scopes, names unique per scope and agent, scope/agentId filters and selection', async () => {
    const a = uid('gs_a');
    const b = uid('gs_b');
    await createAgent(env, a);
    await createAgent(env, b);
    const name = uid('shared');
    const global = await req('POST', '/skills', { name, description: 'Global one', content: 'G' });
    expect(global.statusCode).toBe(201);
    expect(global.json()).toMatchObject({ name, scope: 'global', content: 'G' });
    expect(global.json()).not.toHaveProperty('agentId');
    expect((await req('POST', '/skills', { name, content: 'again', scope: 'global' })).statusCode).toBe(409);
    // The same name may exist once globally and once per agent.
    expect((await req('POST', '/skills', { name, content: 'A', scope: 'local', agentId: a })).json()).toMatchObject({ scope: 'local', agentId: a });
    expect((await req('POST', `/agents/${b}/skills`, { name, content: 'B' })).statusCode).toBe(201);
    expect((await req('POST', '/skills', { name, content: 'A2', scope: 'local', agentId: a })).statusCode).toBe(409);
    expect((await req('POST', '/skills', { name: 'x', content: 'x', scope: 'local' })).statusCode).toBe(400);
    expect((await req('POST', '/skills', { name: 'x', content: 'x', scope: 'local', agentId: 'ghost' })).statusCode).toBe(404);
    expect((await req('POST', '/skills', { name: 'x', content: 'x', scope: 'galaxy' })).statusCode).toBe(400);

    const names = async (q: string) =>
      ((await req('GET', `/skills?${q}`)).json().data as Array<{ name: string; scope: string; agentId?: string }>)
        .filter((s) => s.name === name)
        .map((s) => `${s.scope}:${s.agentId ?? ''}`);
    expect(await names('size=100')).toEqual(['global:', `local:${a}`, `local:${b}`]);
    expect(await names('scope=global&size=100')).toEqual(['global:']);
    expect(await names('scope=local&size=100')).toEqual([`local:${a}`, `local:${b}`]);
    expect(await names(`scope=local&agentId=${a}`)).toEqual([`local:${a}`]);
    expect(await names(`agentId=${a}`)).toEqual(['global:', `local:${a}`]);
    expect((await req('GET', `/skills?scope=local&agentId=${a}`)).json()).toMatchObject({ total: 1, page: 1, size: 20 });
    for (const q of ['scope=everything', 'page=0', 'size=101', 'agentId=bad%20id']) expect((await req('GET', `/skills?${q}`)).statusCode, q).toBe(400);

    expect((await req('GET', `/skills/${name}`)).json()).toMatchObject({ scope: 'global', content: 'G' });
    expect((await req('GET', `/skills/${name}?agentId=${a}`)).json()).toMatchObject({ scope: 'local', content: 'A' });
    expect((await req('GET', `/skills/${name}?scope=global&agentId=${a}`)).json()).toMatchObject({ scope: 'global' });
    expect((await req('GET', `/skills/${name}?scope=local&agentId=${b}`)).json()).toMatchObject({ content: 'B' });
    expect((await req('GET', `/skills/${name}?scope=local`)).statusCode).toBe(400);
    expect((await req('GET', '/skills/never_made')).statusCode).toBe(404);

    const put = await req('PUT', `/skills/${name}`, { description: 'Changed' });
    expect(put.json()).toMatchObject({ scope: 'global', description: 'Changed', content: 'G' });
    expect((await req('PUT', `/skills/${name}`, { content: 'A!', scope: 'local', agentId: a })).json()).toMatchObject({ content: 'A!' });
    expect((await req('PUT', '/skills/never_made', { content: 'x' })).statusCode).toBe(404);

    expect((await req('DELETE', `/skills/${name}?scope=local&agentId=${b}`)).json()).toEqual({ success: true });
    expect((await req('DELETE', `/skills/${name}?scope=local&agentId=${b}`)).statusCode).toBe(404);
    expect((await req('DELETE', `/skills/${name}?scope=global`)).json()).toEqual({ success: true });
    expect((await req('DELETE', `/skills/${name}`)).statusCode).toBe(404);
    expect((await req('DELETE', `/skills/${name}?scope=sideways`)).statusCode).toBe(400);
    expect(await names('size=100')).toEqual([`local:${a}`]);
  });

  it('POST /skills/copy copies between global and an agent\'s local scope', async () => {
    const agent = uid('copy_agent');
    await createAgent(env, agent);
    const name = uid('copied');
    await req('POST', '/skills', { name, description: 'D', content: 'C', status: 'draft' });

    const toLocal = await req('POST', '/skills/copy', { name, targetScope: 'local', agentId: agent });
    expect(toLocal.statusCode).toBe(201);
    expect(toLocal.json()).toMatchObject({ name, scope: 'local', agentId: agent, description: 'D', content: 'C', status: 'draft' });
    expect((await req('POST', '/skills/copy', { name, targetScope: 'local', agentId: agent })).statusCode).toBe(409);

    const toGlobal = await req('POST', '/skills/copy', { name, targetScope: 'global', agentId: agent, newName: `${name}_2` });
    expect(toGlobal.statusCode).toBe(201);
    expect(toGlobal.json()).toMatchObject({ name: `${name}_2`, scope: 'global', content: 'C' });
    expect((await req('POST', '/skills/copy', { name, targetScope: 'global', agentId: agent })).statusCode).toBe(409);

    expect((await req('POST', '/skills/copy', { name: 'nothing_here', targetScope: 'local', agentId: agent })).statusCode).toBe(404);
    expect((await req('POST', '/skills/copy', { name, targetScope: 'local', agentId: 'ghost' })).statusCode).toBe(404);
    expect((await req('POST', '/skills/copy', { name, targetScope: 'local' })).statusCode).toBe(400);
    expect((await req('POST', '/skills/copy', { name, targetScope: 'nowhere', agentId: agent })).statusCode).toBe(400);
    expect((await req('POST', '/skills/copy', { name, targetScope: 'global', agentId: agent, newName: 'bad name' })).statusCode).toBe(400);
  });

  it('POST /skills/copy with the spec\'s body {name, targetScope, newName}: global -> global, no agentId', async () => {
    const name = uid('g2g');
    await req('POST', '/skills', { name, description: 'D', content: 'Global body' });
    const copy = await req('POST', '/skills/copy', { name, targetScope: 'global', newName: `${name}_copy` });
    expect(copy.statusCode).toBe(201);
    expect(copy.json()).toMatchObject({ name: `${name}_copy`, scope: 'global', description: 'D', content: 'Global body' });
    expect((await req('GET', `/skills/${name}`)).json()).toMatchObject({ name, content: 'Global body' });

    const onto = await req('POST', '/skills/copy', { name, targetScope: 'global' });
    expect(onto.statusCode).toBe(400);
    expect(onto.json().error).toMatch(/newName is required to copy global skill ".*" to global/);
    const noAgent = await req('POST', '/skills/copy', { name, targetScope: 'local', newName: 'x' });
    expect(noAgent.json().error).toBe('Invalid input: agentId is required when targetScope is local: it names the agent that receives the copy');
    expect((await req('POST', '/skills/copy', { name: 'nothing_here', targetScope: 'global', newName: 'elsewhere' })).statusCode).toBe(404);
  });

  it('upload: each <name>/SKILL.md or top-level .md becomes a skill; the answer lists created, updated and skipped', async () => {
    const agent = uid('up_agent');
    await createAgent(env, agent);
    await req('POST', `/agents/${agent}/skills`, { name: 'beta', content: 'old beta' });
    const zip = await zipOf({
      'a/SKILL.md': '---\nname: alpha\ndescription: First skill\n---\n# Alpha\nDo A.',
      'beta/SKILL.md': '# Beta\nNo front matter.',
      'gamma.md': '---\ndescription: Gamma things\n---\nG',
      'delta/SKILL.md': 'active delta',
      'delta/DRAFT.md': 'draft delta',
      'notes/readme.txt': 'not a skill',
      'deep/nested/SKILL.md': 'too deep',
      'bad name/SKILL.md': 'x',
      'broken/SKILL.md': '---\nname: [unclosed\n---\nx',
    });
    const res = await upload(`/agents/${agent}/skills/upload`, zip);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect([...body.created].sort()).toEqual(['alpha', 'delta', 'gamma']);
    expect(body.updated).toEqual(['beta']);
    const reasons = Object.fromEntries(body.skipped.map((s: { entry: string; reason: string }) => [s.entry, s.reason]));
    expect(reasons).toEqual({
      'notes/readme.txt': expect.stringMatching(/not a skill file/),
      'deep/nested/SKILL.md': expect.stringMatching(/not a skill file/),
      'bad name/SKILL.md': expect.stringMatching(/invalid skill name "bad name"/),
      'broken/SKILL.md': expect.stringMatching(/front matter is not valid YAML/),
      'delta/SKILL.md': expect.stringMatching(/DRAFT.md takes precedence/),
    });
    expect((await req('GET', `/agents/${agent}/skills/alpha`)).json()).toMatchObject({ description: 'First skill', content: '# Alpha\nDo A.', status: 'active' });
    expect((await req('GET', `/agents/${agent}/skills/beta`)).json()).toMatchObject({ content: '# Beta\nNo front matter.' });
    expect((await req('GET', `/agents/${agent}/skills/gamma`)).json()).toMatchObject({ description: 'Gamma things', content: 'G' });
    expect((await req('GET', `/agents/${agent}/skills/delta`)).json()).toMatchObject({ content: 'draft delta', status: 'draft' });
  });

  it('upload to the global route: scope field (global default, local with agentId)', async () => {
    const agent = uid('up_global');
    await createAgent(env, agent);
    const name = uid('zipped');
    const zip = await zipOf({ [`${name}/SKILL.md`]: 'hello' });
    const res = await upload('/skills/upload', zip);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ created: [name], updated: [], skipped: [] });
    expect((await req('GET', `/skills/${name}?scope=global`)).json()).toMatchObject({ content: 'hello' });
    expect((await upload('/skills/upload', zip, { scope: 'global' })).json()).toEqual({ created: [], updated: [name], skipped: [] });
    expect((await upload('/skills/upload', zip, { scope: 'local', agentId: agent })).json()).toEqual({ created: [name], updated: [], skipped: [] });
    expect((await req('GET', `/agents/${agent}/skills/${name}`)).statusCode).toBe(200);
    expect((await upload('/skills/upload', zip, { scope: 'local' })).statusCode).toBe(400);
    expect((await upload('/skills/upload', zip, { scope: 'local', agentId: 'ghost' })).statusCode).toBe(404);
    expect((await upload('/skills/upload', zip, { scope: 'sideways' })).statusCode).toBe(400);
    expect((await upload('/agents/ghost/skills/upload', zip)).statusCode).toBe(404);
  });

  it('upload refuses what is not a zip upload: JSON (415), no file part, not a zip (400)', async () => {
    const agent = uid('up_bad');
    await createAgent(env, agent);
    expect((await req('POST', `/agents/${agent}/skills/upload`, { file: 'x' })).statusCode).toBe(415);
    const noFile = multipart([{ name: 'scope', value: 'global' }]);
    const res = await env().app.inject({ method: 'POST', url: '/api/v1/skills/upload', ...noFile });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/"file" part/);
    const junk = await upload(`/agents/${agent}/skills/upload`, Buffer.from('this is not a zip archive at all'));
    expect(junk.statusCode).toBe(400);
    expect(junk.json().error).toMatch(/not a valid zip archive/);
  });

  const hostile: Array<[string, number, RegExp, () => Promise<Buffer>]> = [
    [
      'a zip-slip entry (../evil/SKILL.md)',
      400,
      /archive entry "\.\.\/evil\/SKILL\.md" leaves the archive root/,
      async () => rawZip([{ name: 'good/SKILL.md', data: Buffer.from('fine') }, { name: '../evil/SKILL.md', data: Buffer.from('pwned') }]),
    ],
    ['a zip-slip entry written by jszip', 400, /leaves the archive root/, async () => zipOf({ 'good/SKILL.md': 'fine', '../evil/SKILL.md': 'pwned' })],
    ['an absolute entry name', 400, /is an absolute path/, async () => rawZip([{ name: 'good/SKILL.md', data: Buffer.from('x') }, { name: '/etc/SKILL.md', data: Buffer.from('x') }])],
    ['a backslash entry name', 400, /contains a backslash/, async () => rawZip([{ name: '..\\evil\\SKILL.md', data: Buffer.from('x') }])],
    [
      'a symbolic link',
      400,
      /is a symbolic link/,
      async () => rawZip([{ name: 'good/SKILL.md', data: Buffer.from('x') }, { name: 'link/SKILL.md', data: Buffer.from('/etc/passwd'), unixMode: 0o120777 }]),
    ],
    [
      'more than 1,000 entries',
      413,
      /the archive has 1001 entries; at most 1000 are accepted/,
      async () => rawZip(Array.from({ length: 1001 }, (_, i) => ({ name: `s${i}/SKILL.md`, data: Buffer.from(`skill ${i}`) }))),
    ],
    [
      'entries declaring more than 200 MB in total',
      413,
      /expands to \d+ bytes; at most 209715200/,
      async () =>
        rawZip([{ name: 'good/SKILL.md', data: Buffer.from('x') }, ...[1, 2, 3].map((i) => ({ name: `big${i}.bin`, data: Buffer.from('x'), size: 70 * 1024 * 1024 }))]),
    ],
    [
      'a bomb whose header lies (declares 1 KB, inflates to 64 MB)',
      400,
      /"bomb\/SKILL\.md" expands beyond its declared 1024 bytes/,
      async () =>
        rawZip([{ name: 'good/SKILL.md', data: Buffer.from('fine') }, { name: 'bomb/SKILL.md', data: await deflatedZeros(64 * 1024 * 1024), method: 8, size: 1024 }]),
    ],
  ];
  it.each(hostile)('upload of %s is refused (%i) with nothing written', async (_what, status, message, build) => {
    const agent = uid('hostile');
    await createAgent(env, agent);
    const before = await skillCount();
    const res = await upload(`/agents/${agent}/skills/upload`, await build());
    expect(res.statusCode).toBe(status);
    expect(res.json().error).toMatch(message);
    expect(await skillCount()).toBe(before);
    expect((await req('GET', `/agents/${agent}/skills`)).json().total).toBe(0);
  });

  it('an archive over 50 MB is 413 before it is read', async () => {
    const agent = uid('huge');
    await createAgent(env, agent);
    const res = await upload(`/agents/${agent}/skills/upload`, Buffer.alloc(50 * 1024 * 1024 + 1));
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toMatch(/archive is larger than 52428800 bytes/);
  });
});
