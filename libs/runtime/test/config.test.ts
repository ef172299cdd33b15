import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findConfigFile, loadConfig, substituteEnv } from '@agentry/runtime';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-config-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

function load(argv: string[] = [], env: Record<string, string> = {}) {
  return loadConfig({ argv, env, cwd: dir });
}

describe('config file discovery', () => {
  it('uses built-in defaults when no file exists', () => {
    const { config, source, paths } = load();
    expect(source).toBeNull();
    expect(config.server).toMatchObject({ host: '0.0.0.0', port: 9527 });
    expect(config.data.root_dir).toBe('./data');
    expect(config.security.requireAuth).toBe(false);
    expect(paths.rootDir).toBe(path.join(dir, 'data'));
    expect(paths.logsDir).toBe(path.join(dir, 'data', 'logs'));
  });

  it('prefers --config, then AGENTRY_CONFIG, then ./config.yaml', () => {
    write('config.yaml', 'server: {port: 1001}\n');
    write('env.yaml', 'server: {port: 1002}\n');
    write('flag.yaml', 'server: {port: 1003}\n');
    expect(load().config.server.port).toBe(1001);
    expect(load([], { AGENTRY_CONFIG: 'env.yaml' }).config.server.port).toBe(1002);
    expect(load(['--config', 'flag.yaml'], { AGENTRY_CONFIG: 'env.yaml' }).config.server.port).toBe(1003);
    expect(load(['--config=flag.yaml']).config.server.port).toBe(1003);
  });

  it('names a missing file', () => {
    expect(() => findConfigFile({ argv: ['--config', 'nope.yaml'], env: {}, cwd: dir })).toThrow(/config file nope.yaml does not exist/);
  });
});

describe('substitution', () => {
  it('replaces ${NAME} and ${NAME:-default}', () => {
    write('config.yaml', 'server:\n  host: ${H}\n  port: ${P:-1234}\nsecurity:\n  requireAuth: ${AUTH}\n  users:\n    admin: "${PW}:sk-${KEY:-x}"\n    bob: "${BOB:-123}"\n');
    const { config } = load([], { H: '127.0.0.1', PW: 'secret', AUTH: 'true' });
    expect(config.server.host).toBe('127.0.0.1');
    // Strings convert where the schema wants a number or boolean; a password of digits stays a string.
    expect(config.server.port).toBe(1234);
    expect(config.security.requireAuth).toBe(true);
    expect(config.security.users.admin).toBe('secret:sk-x');
    expect(config.security.users.bob).toBe('123');
  });

  it('fails naming the variable and the key when a variable is unset', () => {
    write('config.yaml', 'security:\n  users:\n    admin: ${ADMIN_PASSWORD}\n');
    expect(() => load()).toThrow('security.users.admin: environment variable ADMIN_PASSWORD is not set');
  });

  it('keeps $${ as a literal', () => {
    expect(substituteEnv('a$${B}c', {})).toBe('a${B}c');
  });
});

describe('validation', () => {
  it('rejects bad YAML with the line', () => {
    write('config.yaml', 'server:\n  port: [1\n');
    expect(() => load()).toThrow(/config.yaml: bad YAML at line \d+/);
  });

  it('names a bad type', () => {
    write('config.yaml', 'server:\n  port: "abc"\n');
    expect(() => load()).toThrow('config.yaml: server.port: must be integer');
  });

  it('names an unknown key', () => {
    write('config.yaml', 'server:\n  prot: 1\n');
    expect(() => load()).toThrow('unknown key server.prot');
  });

  it('checks that the default provider exists', () => {
    write('config.yaml', 'models:\n  default_provider: nope\n  providers:\n    p: {base_url: "http://x"}\n');
    expect(() => load()).toThrow('models.default_provider: "nope" is not one of models.providers');
  });

  it('accepts providers with http(s) URLs only', () => {
    write('config.yaml', 'models:\n  providers:\n    p1: {base_url: "ftp://x"}\n');
    expect(() => load()).toThrow(/models.providers.p1.base_url/);
  });

  it('rejects a top level that is not a mapping', () => {
    write('config.yaml', '- 1\n- 2\n');
    expect(() => load()).toThrow('the top level must be a mapping');
  });
});

describe('environment overrides', () => {
  it('PORT and HOST override the file', () => {
    write('config.yaml', 'server: {port: 1001, host: 0.0.0.0}\n');
    const { config } = load([], { PORT: '2002', HOST: '127.0.0.1' });
    expect(config.server).toMatchObject({ port: 2002, host: '127.0.0.1' });
  });

  it('rejects a PORT that is not a port', () => {
    expect(() => load([], { PORT: 'eighty' })).toThrow('PORT: "eighty" is not a port number');
  });
});
