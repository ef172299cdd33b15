import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { createAgent, describeOnBothEngines, uid, type Env } from './resources-harness.js';

type Entry = { name: string; isDir: boolean; size?: number; modTime?: string };

/** The eight /agents/{agentId}/workspace routes, on both engines. */
describeOnBothEngines('agent workspace', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  const q = (path: string) => `path=${encodeURIComponent(path)}`;
  async function agent(): Promise<string> {
    const id = uid('ws');
    await createAgent(env, id);
    return id;
  }
  const ws = (id: string) => `/agents/${id}/workspace`;
  const entries = async (id: string, path = '') => (await req('GET', `${ws(id)}/entries?${q(path)}`)).json() as Entry[];
  const names = async (id: string, path = '') => (await entries(id, path)).map((e) => `${e.name}${e.isDir ? '/' : ''}`);

  it('a new agent starts with AGENTS.md; entries lists one directory with name, isDir, size and modTime (ISO UTC)', async () => {
    const id = await agent();
    const root = await entries(id);
    expect(root).toEqual([{ name: 'AGENTS.md', isDir: false, size: expect.any(Number), modTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) }]);
    expect(await entries(id, '/')).toEqual(root);
    expect((await req('GET', `${ws(id)}/entries`)).json()).toEqual(root);
  });

  it('POST files creates the file and its parent directories (201); GET file returns {content}', async () => {
    const id = await agent();
    const res = await req('POST', `${ws(id)}/files`, { path: '/docs/./guides/intro.md', content: 'Hello ü' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ path: 'docs/guides/intro.md', name: 'intro.md', isDir: false, size: Buffer.byteLength('Hello ü'), modTime: expect.stringMatching(/Z$/) });
    expect(await names(id)).toEqual(['docs/', 'AGENTS.md']);
    expect(await entries(id, 'docs')).toEqual([{ name: 'guides', isDir: true }]);
    expect(await names(id, 'docs/guides')).toEqual(['intro.md']);
    expect((await req('GET', `${ws(id)}/file?${q('docs/guides/intro.md')}`)).json()).toEqual({ content: 'Hello ü' });
    expect((await req('GET', `${ws(id)}/file?${q('docs/x/../guides/intro.md')}`)).json()).toEqual({ content: 'Hello ü' });

    const dup = await req('POST', `${ws(id)}/files`, { path: 'docs/guides/intro.md', content: 'again' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json()).toEqual({ error: 'Already exists: "docs/guides/intro.md" already exists' });
    expect((await req('POST', `${ws(id)}/files`, { path: 'docs', content: 'x' })).statusCode).toBe(409);
    expect((await req('POST', `${ws(id)}/files`, { path: 'docs/guides/intro.md/inside.txt', content: 'x' })).statusCode).toBe(409);
  });

  it('names are Unicode NFC: the three spellings of "Å" name one file', async () => {
    const id = await agent();
    const [composed, decomposed, angstrom] = ['\u00C5.md', 'A\u030A.md', '\u212B.md'];
    expect((await req('POST', `${ws(id)}/files`, { path: composed, content: 'one' })).statusCode).toBe(201);
    const again = await req('POST', `${ws(id)}/files`, { path: decomposed, content: 'two' });
    expect(again.statusCode).toBe(409);
    expect((await req('PUT', `${ws(id)}/file?${q(angstrom)}`, { content: 'three' })).json()).toMatchObject({ path: composed });
    expect(await names(id)).toEqual(['AGENTS.md', composed]);
    expect((await req('GET', `${ws(id)}/file?${q(decomposed)}`)).json()).toEqual({ content: 'three' });
    expect((await req('POST', `${ws(id)}/dirs`, { path: 'Cafe\u0301' })).json()).toMatchObject({ path: 'Caf\u00E9' });
  });

  it('control characters and bidirectional overrides in a name are 400 {error} naming the character', async () => {
    const id = await agent();
    const refused: Array<[string, string]> = [
      ['invoice\u202Efdp.exe', 'U+202E'],
      ['a\u2066b.txt', 'U+2066'],
      ['mark\u200F.txt', 'U+200F'],
      ['line\nbreak.txt', 'U+000A'],
      ['bell\u0007.txt', 'U+0007'],
      ['c1\u0085.txt', 'U+0085'],
    ];
    for (const [name, code] of refused) {
      for (const res of [
        await req('POST', `${ws(id)}/files`, { path: `docs/${name}`, content: 'x' }),
        await req('PUT', `${ws(id)}/file?${q(name)}`, { content: 'x' }),
        await req('POST', `${ws(id)}/dirs`, { path: name }),
        await req('PATCH', `${ws(id)}/rename?${q('AGENTS.md')}`, { newName: name }),
      ]) {
        expect(res.statusCode, `${JSON.stringify(name)}: ${res.body}`).toBe(400);
        expect(res.json()).toEqual({ error: expect.stringMatching(new RegExp(`^Invalid input: path contains .*${code.replace('+', '\\+')}`)) });
      }
    }
    expect(await names(id)).toEqual(['AGENTS.md']);
  });

  it('PUT file writes (creating parents) and overwrites; it never replaces a directory', async () => {
    const id = await agent();
    const first = await req('PUT', `${ws(id)}/file?${q('a/b/c.txt')}`, { content: 'one' });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ path: 'a/b/c.txt', size: 3 });
    const second = await req('PUT', `${ws(id)}/file?${q('a/b/c.txt')}`, { content: 'two!' });
    expect(second.json()).toMatchObject({ size: 4 });
    expect((await req('GET', `${ws(id)}/file?${q('a/b/c.txt')}`)).json()).toEqual({ content: 'two!' });
    expect((await req('PUT', `${ws(id)}/file?${q('a/b')}`, { content: 'x' })).statusCode).toBe(409);
    expect((await req('PUT', `${ws(id)}/file`, { content: 'x' })).statusCode).toBe(400);
    expect((await req('PUT', `${ws(id)}/file?${q('a/b/c.txt')}`, {})).statusCode).toBe(400);
  });

  it('POST dirs creates a directory and its parents (201); an existing path is 409', async () => {
    const id = await agent();
    const res = await req('POST', `${ws(id)}/dirs`, { path: 'x/y/z' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ path: 'x/y/z', name: 'z', isDir: true });
    expect(await names(id, 'x/y')).toEqual(['z/']);
    expect((await req('POST', `${ws(id)}/dirs`, { path: 'x/y/z' })).statusCode).toBe(409);
    expect((await req('POST', `${ws(id)}/dirs`, { path: 'AGENTS.md' })).statusCode).toBe(409);
    expect((await req('POST', `${ws(id)}/dirs`, { path: 'AGENTS.md/sub' })).statusCode).toBe(409);
    expect((await req('POST', `${ws(id)}/dirs`, { path: '/' })).statusCode).toBe(400);
    expect((await req('GET', `${ws(id)}/entries?${q('AGENTS.md')}`)).statusCode).toBe(400);
    expect((await req('GET', `${ws(id)}/file?${q('x/y')}`)).statusCode).toBe(400);
  });

  it('DELETE entry removes a file, or a directory recursively; the root cannot be deleted', async () => {
    const id = await agent();
    await req('POST', `${ws(id)}/files`, { path: 'tree/a/1.txt', content: '1' });
    await req('POST', `${ws(id)}/files`, { path: 'tree/a/b/2.txt', content: '2' });
    await req('POST', `${ws(id)}/files`, { path: 'treehouse.txt', content: 'not inside tree/' });
    const del = await req('DELETE', `${ws(id)}/entry?${q('tree/a/1.txt')}`);
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ success: true });
    expect(await names(id, 'tree/a')).toEqual(['b/']);
    expect((await req('DELETE', `${ws(id)}/entry?${q('tree')}`)).json()).toEqual({ success: true });
    expect(await names(id)).toEqual(['AGENTS.md', 'treehouse.txt']);
    expect((await req('GET', `${ws(id)}/file?${q('tree/a/b/2.txt')}`)).statusCode).toBe(404);
    expect((await req('DELETE', `${ws(id)}/entry?${q('tree')}`)).statusCode).toBe(404);
    expect((await req('DELETE', `${ws(id)}/entry?${q('/')}`)).statusCode).toBe(400);
    expect((await req('DELETE', `${ws(id)}/entry`)).statusCode).toBe(400);
  });

  it('PATCH rename renames in place, moves directories with their content, and never overwrites', async () => {
    const id = await agent();
    await req('POST', `${ws(id)}/files`, { path: 'src/main.txt', content: 'main' });
    await req('POST', `${ws(id)}/files`, { path: 'src/lib/util.txt', content: 'util' });
    await req('POST', `${ws(id)}/files`, { path: 'other.txt', content: 'other' });

    const file = await req('PATCH', `${ws(id)}/rename?${q('src/main.txt')}`, { newName: 'index.txt' });
    expect(file.statusCode).toBe(200);
    expect(file.json()).toMatchObject({ path: 'src/index.txt', name: 'index.txt', isDir: false, size: 4 });
    expect(await names(id, 'src')).toEqual(['lib/', 'index.txt']);

    const dir = await req('PATCH', `${ws(id)}/rename?${q('src')}`, { newName: 'app' });
    expect(dir.json()).toEqual({ path: 'app', name: 'app', isDir: true });
    expect(await names(id)).toEqual(['app/', 'AGENTS.md', 'other.txt']);
    expect(await names(id, 'app')).toEqual(['lib/', 'index.txt']);
    expect((await req('GET', `${ws(id)}/file?${q('app/lib/util.txt')}`)).json()).toEqual({ content: 'util' });
    expect((await req('GET', `${ws(id)}/entries?${q('src')}`)).statusCode).toBe(404);

    // A newName with a slash is a path from the root: a move, creating the parents.
    const moved = await req('PATCH', `${ws(id)}/rename?${q('app/lib')}`, { newName: 'vendor/libs/lib2' });
    expect(moved.json()).toMatchObject({ path: 'vendor/libs/lib2', isDir: true });
    expect(await names(id, 'vendor/libs/lib2')).toEqual(['util.txt']);
    expect(await names(id, 'app')).toEqual(['index.txt']);

    const clash = await req('PATCH', `${ws(id)}/rename?${q('other.txt')}`, { newName: 'AGENTS.md' });
    expect(clash.statusCode).toBe(409);
    expect((await req('GET', `${ws(id)}/file?${q('AGENTS.md')}`)).json().content).toContain('#');
    expect((await req('PATCH', `${ws(id)}/rename?${q('app')}`, { newName: 'vendor' })).statusCode).toBe(409);
    expect((await req('PATCH', `${ws(id)}/rename?${q('vendor')}`, { newName: 'vendor/inside' })).statusCode).toBe(400);
    expect((await req('PATCH', `${ws(id)}/rename?${q('missing.txt')}`, { newName: 'x' })).statusCode).toBe(404);
    expect((await req('PATCH', `${ws(id)}/rename?${q('other.txt')}`, { newName: '..' })).statusCode).toBe(400);
    expect((await req('PATCH', `${ws(id)}/rename?${q('other.txt')}`, { newName: '' })).statusCode).toBe(400);
    expect((await req('PATCH', `${ws(id)}/rename`, { newName: 'x' })).statusCode).toBe(400);
  });

  it('download sends the bytes with Content-Disposition and a guessed Content-Type', async () => {
    const id = await agent();
    await req('POST', `${ws(id)}/files`, { path: 'report "final" é.md', content: '# Report' });
    const res = await req('GET', `${ws(id)}/download?${q('report "final" é.md')}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/markdown; charset=utf-8');
    expect(res.headers['content-disposition']).toBe(`attachment; filename="report _final_ _.md"; filename*=UTF-8''${encodeURIComponent('report "final" é.md')}`);
    expect(res.body).toBe('# Report');
    await req('POST', `${ws(id)}/files`, { path: 'data.unknownext', content: 'x' });
    expect((await req('GET', `${ws(id)}/download?${q('data.unknownext')}`)).headers['content-type']).toBe('application/octet-stream');
    expect((await req('GET', `${ws(id)}/download?${q('nope.txt')}`)).statusCode).toBe(404);
    expect((await req('GET', `${ws(id)}/download`)).statusCode).toBe(400);
  });

  it('a 5 MB binary file round-trips byte-exact through create -> download (and GET file answers base64)', async () => {
    const id = await agent();
    const bytes = randomBytes(5 * 1024 * 1024);
    bytes[0] = 0xff; // never valid UTF-8
    const res = await req('POST', `${ws(id)}/files`, { path: 'bin/blob.png', content: bytes.toString('base64'), encoding: 'base64' });
    expect(res.statusCode).toBe(201);
    expect(res.json().size).toBe(bytes.length);
    const down = await req('GET', `${ws(id)}/download?${q('bin/blob.png')}`);
    expect(down.statusCode).toBe(200);
    expect(down.headers['content-type']).toBe('image/png');
    expect(Number(down.headers['content-length'])).toBe(bytes.length);
    expect(down.rawPayload.equals(bytes)).toBe(true);
    const json = (await req('GET', `${ws(id)}/file?${q('bin/blob.png')}`)).json();
    expect(json.encoding).toBe('base64');
    expect(Buffer.from(json.content, 'base64').equals(bytes)).toBe(true);
    expect((await entries(id, 'bin'))[0]).toMatchObject({ name: 'blob.png', size: bytes.length });
    expect((await req('POST', `${ws(id)}/files`, { path: 'bad.bin', content: '***', encoding: 'base64' })).statusCode).toBe(400);
  });

  it('a file above workspace.max_file_bytes (10 MB) is 413 and not written', async () => {
    const id = await agent();
    const big = 'a'.repeat(10 * 1024 * 1024 + 1);
    const res = await req('POST', `${ws(id)}/files`, { path: 'big.txt', content: big });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toMatch(/limited to 10485760 bytes/);
    expect((await req('PUT', `${ws(id)}/file?${q('big.txt')}`, { content: big })).statusCode).toBe(413);
    expect(await names(id)).toEqual(['AGENTS.md']);
  });

  const escapes = ['..', '../x', 'a/../../x', '/../etc/passwd', 'a/b/../../../x', 'a\u0000b', 'a\\b', '..\\..\\x'];
  it.each(escapes)('path %j is refused (400) by every route', async (path) => {
    const id = await agent();
    const calls: Array<[string, () => ReturnType<typeof req>]> = [
      ['entries', () => req('GET', `${ws(id)}/entries?${q(path)}`)],
      ['file', () => req('GET', `${ws(id)}/file?${q(path)}`)],
      ['put file', () => req('PUT', `${ws(id)}/file?${q(path)}`, { content: 'x' })],
      ['post files', () => req('POST', `${ws(id)}/files`, { path, content: 'x' })],
      ['post dirs', () => req('POST', `${ws(id)}/dirs`, { path })],
      ['delete', () => req('DELETE', `${ws(id)}/entry?${q(path)}`)],
      ['rename source', () => req('PATCH', `${ws(id)}/rename?${q(path)}`, { newName: 'x' })],
      ['rename target', () => req('PATCH', `${ws(id)}/rename?${q('AGENTS.md')}`, { newName: path.includes('/') || path.includes('\\') || path.includes('\u0000') ? path : `x/${path}/..` })],
      ['download', () => req('GET', `${ws(id)}/download?${q(path)}`)],
    ];
    for (const [what, call] of calls) {
      const res = await call();
      expect(res.statusCode, `${what} ${JSON.stringify(path)}`).toBe(400);
      expect(res.json().error).toMatch(/^Invalid input: /);
    }
    expect(await names(id)).toEqual(['AGENTS.md']);
  });

  it('every route answers 404 for an unknown agent, naming it', async () => {
    for (const [method, url, body] of [
      ['GET', '/agents/ghost/workspace/entries', undefined],
      ['GET', '/agents/ghost/workspace/file?path=a', undefined],
      ['PUT', '/agents/ghost/workspace/file?path=a', { content: 'x' }],
      ['POST', '/agents/ghost/workspace/files', { path: 'a', content: 'x' }],
      ['POST', '/agents/ghost/workspace/dirs', { path: 'a' }],
      ['DELETE', '/agents/ghost/workspace/entry?path=a', undefined],
      ['PATCH', '/agents/ghost/workspace/rename?path=a', { newName: 'b' }],
      ['GET', '/agents/ghost/workspace/download?path=a', undefined],
    ] as const) {
      const res = await req(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found: agent "ghost"' });
    }
  });

  it('unknown paths are 404', async () => {
    const id = await agent();
    expect((await req('GET', `${ws(id)}/entries?${q('no/such/dir')}`)).json()).toEqual({ error: 'Not found: workspace path "no/such/dir"' });
    expect((await req('GET', `${ws(id)}/file?${q('none.txt')}`)).statusCode).toBe(404);
    expect((await req('DELETE', `${ws(id)}/entry?${q('none.txt')}`)).statusCode).toBe(404);
    expect((await req('PATCH', `${ws(id)}/rename?${q('none.txt')}`, { newName: 'x' })).statusCode).toBe(404);
    expect((await req('GET', `${ws(id)}/download?${q('none.txt')}`)).statusCode).toBe(404);
  });
});
