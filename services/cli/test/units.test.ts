import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import type { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { humanError } from '@agentry/client';
import { CredentialStore, Prompter, apiKeyFromConfig, buildProgram, cell, credentialsPath, formatObject, formatTable, maskSecret, run, substituteEnv, type CliSetup } from '@agentry/cli';

/** In-process pieces of the CLI: the table formatter, config substitution, the store, help. */
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cli-unit-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function capture(tty = false): Writable & { text: () => string; isTTY?: boolean; columns?: number } {
  let out = '';
  const w = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      out += chunk.toString();
      cb();
    },
  }) as Writable & { text: () => string; isTTY?: boolean; columns?: number };
  w.text = () => out;
  if (tty) {
    w.isTTY = true;
    w.columns = 100;
  }
  return w;
}

function setup(env: Record<string, string> = {}): CliSetup & { out: ReturnType<typeof capture>; err: ReturnType<typeof capture> } {
  const out = capture();
  const err = capture();
  const stdin = new PassThrough();
  stdin.end();
  return { env, cwd: tmp, home: tmp, io: { stdin, stdout: out, stderr: err }, out, err };
}

describe('formatTable', () => {
  it('aligns columns under upper-case headers, right-aligns numbers, cuts long cells, shows empty as -', () => {
    const rows = [
      { name: 'AGENTS.md', size: 367, note: 'line one\nline two' },
      { name: 'notes/', size: undefined, note: 'x'.repeat(30) },
      { name: 'a', size: 5, note: '' },
    ];
    const table = formatTable(rows, [
      { header: 'name', value: (r) => r.name },
      { header: 'size', value: (r) => r.size, align: 'right' },
      { header: 'note', value: (r) => r.note, max: 12 },
    ]);
    expect(table).toBe(['NAME       SIZE  NOTE', 'AGENTS.md   367  line one li…', 'notes/        -  xxxxxxxxxxx…', 'a             5  -', ''].join('\n'));
  });

  it('cells: JSON for objects, one line, booleans and numbers as text', () => {
    expect(cell({ a: 1 })).toBe('{"a":1}');
    expect(cell(true)).toBe('true');
    expect(cell(null)).toBe('-');
    expect(cell('a\r\n\tb')).toBe('a b');
  });

  it('formatObject: key/value lines for flat objects, JSON for nested ones', () => {
    expect(formatObject({ id: 'x', enabled: true, next: null })).toBe('id:      x\nenabled: true\nnext:    -\n');
    expect(formatObject({ a: { b: 1 } })).toBe('{\n  "a": {\n    "b": 1\n  }\n}\n');
  });
});

describe('substituteEnv (the server\'s rules)', () => {
  const env = { SET: 'value', EMPTY: '' };
  it('replaces ${NAME} and ${NAME:-default}; empty counts as unset; $${ is a literal', () => {
    expect(substituteEnv('a ${SET} b', env, 'k')).toBe('a value b');
    expect(substituteEnv('${MISSING:-fallback}', env, 'k')).toBe('fallback');
    expect(substituteEnv('${EMPTY:-fallback}', env, 'k')).toBe('fallback');
    expect(substituteEnv('${MISSING:-}', env, 'k')).toBe('');
    expect(substituteEnv('$${SET} and ${SET}', env, 'k')).toBe('${SET} and value');
  });
  it('names the key and the variable when an unset one has no default', () => {
    expect(() => substituteEnv('x${MISSING}', env, 'channels.api.accounts.a.api_key')).toThrow('channels.api.accounts.a.api_key: environment variable MISSING is not set');
  });
});

describe('apiKeyFromConfig', () => {
  const write = (name: string, text: string) => {
    const file = path.join(tmp, name);
    fs.writeFileSync(file, text);
    return { file, via: '--config' as const };
  };

  it('takes the first enabled account with a key, in file order (numeric ids too)', () => {
    const loc = write(
      'order.yaml',
      ['channels:', '  api:', '    accounts:', '      "9": {enabled: "false", api_key: k9}', '      "2": {name: no key}', '      "1": {api_key: "${K:-k1}"}', '      "0": {api_key: k0}'].join('\n'),
    );
    expect(apiKeyFromConfig(loc, {})).toMatchObject({ key: 'k1', accountId: '1' });
    expect(apiKeyFromConfig(loc, { K: 'from-env' })).toMatchObject({ key: 'from-env' });
  });

  it('offers nothing when the api platform is off or has no accounts; only the keys it reads are substituted', () => {
    expect(apiKeyFromConfig(write('off.yaml', 'channels: {api: {enabled: false, accounts: {a: {api_key: k}}}}'), {})).toBeNull();
    expect(apiKeyFromConfig(write('none.yaml', 'server: {port: 1}'), {})).toBeNull();
    const other = write('other.yaml', 'models: {providers: {p: {api_key: "${PROVIDER_KEY}"}}}\nchannels: {api: {accounts: {a: {api_key: k}}}}');
    expect(apiKeyFromConfig(other, {})).toMatchObject({ key: 'k' });
  });
});

describe('CredentialStore', () => {
  it('lives under XDG_CONFIG_HOME or ~/.config', () => {
    expect(credentialsPath({}, '/home/u')).toBe('/home/u/.config/agentry/credentials.json');
    expect(credentialsPath({ XDG_CONFIG_HOME: '/x' }, '/home/u')).toBe('/x/agentry/credentials.json');
    expect(credentialsPath({ XDG_CONFIG_HOME: 'relative' }, '/home/u')).toBe('/home/u/.config/agentry/credentials.json');
  });

  it('keeps logins per server in a 0600 file (fixing looser modes), and forgets them', () => {
    const file = path.join(tmp, 'store', 'agentry', 'credentials.json');
    const store = new CredentialStore(file);
    expect(store.get('http://a')).toBeUndefined();
    store.set('http://a', { username: 'u', token: 't', expireAt: '2030-01-01T00:00:00.000Z' });
    store.set('http://b', { username: 'v', token: 's', expireAt: '2030-01-01T00:00:00.000Z' });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    fs.chmodSync(file, 0o644);
    store.set('http://a', { username: 'u', token: 't2', expireAt: '2030-01-01T00:00:00.000Z' });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(store.get('http://a')).toEqual({ username: 'u', token: 't2', expireAt: '2030-01-01T00:00:00.000Z' });
    expect(store.delete('http://a')).toBe(true);
    expect(store.delete('http://a')).toBe(false);
    expect(Object.keys(store.all())).toEqual(['http://b']);
    expect(store.clear()).toBe(true);
    fs.writeFileSync(file, '{not json');
    expect(() => store.get('http://a')).toThrow(/is not valid JSON; delete it and log in again/);
  });
});

describe('errors people read (issue 23, item 3)', () => {
  it("humanError: a provider's failure as a sentence, the API's message kept as the detail", () => {
    const api = 'chain "support", node "node_agent" (ai/agent): Upstream failure: provider "fake" (model fake-model): HTTP 500: fake upstream exploded (3 attempts)';
    expect(humanError(api)).toEqual({ message: "the model provider 'fake' failed: HTTP 500 fake upstream exploded (3 attempts)", detail: api });
    // Failover: every provider tried, in order; a sub-chain's prefix goes too.
    const failover = 'chain "outer", node "n" (flow): chain "inner", node "a" (ai/agent): Upstream failure: provider "a" (model m1): HTTP 500: boom; provider "b" (model m2): connection failed: ECONNREFUSED (2 attempts)';
    expect(humanError(failover).message).toBe("the model provider 'a' failed: HTTP 500 boom; then the model provider 'b' failed: connection failed: ECONNREFUSED (2 attempts)");
    // A node's own failure loses only the where; a message without internals stays as it is.
    expect(humanError('chain "c", node "s" (js/script): The script failed: x is not defined')).toEqual({ message: 'The script failed: x is not defined', detail: 'chain "c", node "s" (js/script): The script failed: x is not defined' });
    expect(humanError('Not found: agent "x"')).toEqual({ message: 'Not found: agent "x"' });
  });

  it('maskSecret keeps the kind and the last four', () => {
    expect(maskSecret('sk-abcdefghijklmnop0001')).toBe('sk-...0001');
    expect(maskSecret('abcdefghijklmnopqrstuvwxyz')).toBe('abc...wxyz');
    expect(maskSecret('short')).toBe('sh...');
  });
});

describe('help', () => {
  /** Every command path: ['agents'], ['agents', 'list'], ... */
  function paths(cmd: Command, prefix: string[] = []): string[][] {
    return cmd.commands.filter((c) => c.name() !== 'help').flatMap((c) => [[...prefix, c.name()], ...paths(c, [...prefix, c.name()])]);
  }

  it('every command has --help with an example of itself', async () => {
    const s0 = setup();
    const all = paths(buildProgram(s0, new Prompter(s0.io), []));
    expect(all.length).toBeGreaterThan(40);
    for (const p of all) {
      const s = setup();
      expect(await run([...p, '--help'], s), p.join(' ')).toBe(0);
      expect(s.out.text(), p.join(' ')).toMatch(new RegExp(`Examples:\\n(?: {2}\\$ .*\\n)*? {2}\\$ (\\S+=\\S+ )?agentry ${p.join(' ')}\\b`));
    }
  });

  it('every noun takes the same verbs: list (ls), show (get), create, update, delete (rm)', async () => {
    const nouns: Record<string, string[]> = {
      agents: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm', 'enable', 'disable'],
      rules: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm'],
      skills: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm'],
      cron: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm'],
      sessions: ['list', 'ls', 'show', 'get', 'delete', 'rm'],
      users: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm'],
      providers: ['list', 'ls', 'show', 'get', 'create', 'add', 'update', 'delete', 'rm', 'test', 'set-key'],
      channels: ['list', 'ls', 'show', 'get', 'create', 'update', 'delete', 'rm'],
      bindings: ['list', 'ls', 'create', 'update', 'delete', 'rm'],
      workspace: ['list', 'ls', 'show', 'get', 'cat', 'create', 'update', 'put', 'delete', 'rm'],
    };
    for (const [noun, verbs] of Object.entries(nouns)) {
      for (const verb of verbs) {
        const s = setup();
        expect(await run([noun, verb, '--help'], s), `${noun} ${verb}`).toBe(0);
        expect(s.out.text(), `${noun} ${verb}`).toMatch(new RegExp(`^Usage: agentry ${noun} `));
      }
    }
  });

  it('exit statuses: 0 for help and version, 2 for usage errors', async () => {
    const v = setup();
    expect(await run(['--version'], v)).toBe(0);
    expect(v.out.text()).toBe('0.1.0\n');
    const u = setup();
    expect(await run(['agents', 'get'], u)).toBe(2);
    expect(u.err.text()).toBe("error: missing required argument 'id'\n");
    const g = setup();
    expect(await run(['agents'], g)).toBe(2);
    expect(g.err.text()).toMatch(/^Usage: agentry agents/);
    const e = setup();
    expect(await run(['agents', 'list', '--bogus'], e)).toBe(2);
    expect(e.err.text()).toBe("error: unknown option '--bogus'\n");
  });
});
