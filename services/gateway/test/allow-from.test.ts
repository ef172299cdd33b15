import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressList, validateConfig } from '@agentry/runtime';
import { addressListOf } from '../src/auth/allow-from.js';
import { startHarness, type Harness } from './auth-harness.js';

/**
 * `security.allowFrom` on one gateway: both lists, IPv4, IPv6 and IPv4-mapped IPv6, the
 * address `server.trust_proxy` gives, editing through PUT /config (and the lock-out it refuses),
 * and every route of the route table under one of the two lists. The cluster test is
 * allow-from-cluster.test.ts.
 */

const MANAGEMENT = ['10.0.0.0/8', '::1'];
const CHAT = ['192.168.1.0/24', '2001:db8::/32'];
const yaml = (extra = '') => `
security:
  users: {admin: "admin-password-1234"}
  allowFrom:
    management: [${MANAGEMENT.map((c) => `"${c}"`).join(', ')}]
    chat: [${CHAT.map((c) => `"${c}"`).join(', ')}]
${extra}`;

/** An error's message in either shape: `{error}`, or OpenAI's object on the OpenAI routes. */
const messageOf = (body: { error: string | { message: string } }) => (typeof body.error === 'string' ? body.error : body.error.message);

describe('security.allowFrom', { timeout: 30_000 }, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(yaml());
  });
  afterAll(async () => {
    await h?.close();
  });

  const from = (remoteAddress: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    h.app.inject({ method, url: `/api/v1${url}`, remoteAddress, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  const login = (remoteAddress: string) => from(remoteAddress, 'POST', '/auth/login', { username: 'admin', password: 'admin-password-1234' });

  it('chat routes answer the chat list only, IPv4, IPv6 and IPv4-mapped alike', async () => {
    for (const ok of ['192.168.1.5', '::ffff:192.168.1.9', '2001:db8::5', '2001:db8:ffff::1']) {
      expect((await from(ok, 'GET', '/models')).statusCode, ok).toBe(200);
    }
    for (const refused of ['10.1.2.3', '::ffff:10.1.2.3', '192.168.2.1', '2001:db9::1', '::1']) {
      const res = await from(refused, 'GET', '/models');
      expect(res.statusCode, refused).toBe(403);
      expect(res.json().error).toMatchObject({ message: `Not allowed: address ${refused} is not in security.allowFrom.chat`, type: 'permission_error' });
    }
    expect((await from('10.1.2.3', 'POST', '/chat/completions', { model: 'x', messages: [] })).statusCode).toBe(403);
    expect((await from('10.1.2.3', 'POST', '/responses', { model: 'x', input: 'hi' })).statusCode).toBe(403);
    expect((await from('10.1.2.3', 'GET', '/models/anything')).statusCode).toBe(403);
    expect(h.logs.some((l) => l.includes('address refused by the allow-list') && l.includes('"list":"security.allowFrom.chat"') && l.includes('10.1.2.3'))).toBe(true);
  });

  it('management routes, login included, answer the management list only; /health and /ready anyone, /metrics the management list', async () => {
    expect((await login('10.20.30.40')).statusCode).toBe(200);
    expect((await login('::1')).statusCode).toBe(200);
    expect((await login('::ffff:10.0.0.7')).statusCode).toBe(200);
    const refused = await login('192.168.1.5');
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ error: 'Not allowed: address 192.168.1.5 is not in security.allowFrom.management' });
    expect((await from('192.168.1.5', 'GET', '/config')).statusCode).toBe(403);
    expect((await from('2001:db8::5', 'GET', '/agents')).statusCode).toBe(403);
    for (const probe of ['/health', '/ready']) {
      expect((await h.app.inject({ method: 'GET', url: probe, remoteAddress: '198.51.100.1' })).statusCode, probe).not.toBe(403);
    }
    // Without metrics.token, /metrics is management: the allow-list applies to it.
    const metrics = await h.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '198.51.100.1' });
    expect(metrics.statusCode).toBe(403);
    expect(metrics.json()).toEqual({ error: 'Not allowed: address 198.51.100.1 is not in security.allowFrom.management (set metrics.token to scrape /metrics from elsewhere)' });
    expect(metrics.body).not.toContain('agentry_');
    expect((await h.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '10.9.8.7' })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '::1' })).statusCode).toBe(200);
  });

  it('X-Forwarded-For is ignored without server.trust_proxy', async () => {
    const res = await from('10.1.2.3', 'GET', '/models', undefined, { 'x-forwarded-for': '192.168.1.5' });
    expect(res.statusCode).toBe(403);
    expect(messageOf(res.json())).toContain('address 10.1.2.3 ');
  });

  it('GET /config shows the lists; PUT /config edits them, refusing bad CIDRs and a lock-out', async () => {
    const shown = await from('10.0.0.1', 'GET', '/config');
    expect(shown.json().security.allowFrom).toEqual({ management: MANAGEMENT, chat: CHAT });

    const bad = await from('10.0.0.1', 'PUT', '/config', { security: { allowFrom: { chat: ['10.0.0.0/33', 'nope', '10.1/8', '192.168.0.0/16'], management: ['fe80::/129'] } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe(
      'Invalid input: security.allowFrom.management: not a CIDR or address: "fe80::/129"; security.allowFrom.chat: not a CIDR or address: "10.0.0.0/33", "nope", "10.1/8"',
    );

    const lockout = await from('10.0.0.1', 'PUT', '/config', { security: { allowFrom: { management: ['192.168.0.0/16'] } } });
    expect(lockout.statusCode).toBe(400);
    expect(lockout.json().error).toContain('does not include your address 10.0.0.1');
    expect(h.runtime.config.current.security.allowFrom.management).toEqual(MANAGEMENT);

    const opened = await from('10.0.0.1', 'PUT', '/config', { security: { allowFrom: { chat: [] } } });
    expect(opened.statusCode).toBe(200);
    expect(opened.json().security.allowFrom).toEqual({ management: MANAGEMENT, chat: [] });
    expect((await from('10.1.2.3', 'GET', '/models')).statusCode).toBe(200);

    const moved = await from('10.0.0.1', 'PUT', '/config', { security: { allowFrom: { management: ['10.0.0.1', '192.168.1.0/24'], chat: CHAT } } });
    expect(moved.statusCode).toBe(200);
    expect((await login('192.168.1.5')).statusCode).toBe(200);
    expect((await login('10.0.0.2')).statusCode).toBe(403);
    expect((await from('10.1.2.3', 'GET', '/models')).statusCode).toBe(403);
    expect((await from('10.0.0.1', 'PUT', '/config', { security: { allowFrom: { management: MANAGEMENT } } })).statusCode).toBe(200);
  });

  it('every route of the table is under one of the lists, except the public ones that opt out', async () => {
    const table = h.app.routeAccess;
    expect(table.length).toBeGreaterThan(50);
    const outside = table.filter((r) => addressListOf(r.access, r.addressList) === undefined).map((r) => `${r.method} ${r.url}`);
    for (const r of table) if (r.addressList === 'none') expect(r.access, `${r.method} ${r.url}`).toBe('public');
    expect(outside.every((r) => /^(GET|HEAD) \/(health|ready|metrics)$|^OPTIONS \*$|^(GET|HEAD|POST) \/api\/v1\/channels\/:platform\/accounts\/:accountId\/events$/.test(r)), outside.join(', ')).toBe(true);
    expect(addressListOf('public')).toBe('management');
    // Each covered route, called from an address on neither list, is refused by the list its access names.
    let checked = 0;
    for (const r of table) {
      const list = addressListOf(r.access, r.addressList);
      if (list === undefined) continue;
      const url = r.url.replace(/:[A-Za-z]+/g, 'x').replace(/\*$/, 'x');
      const res = await h.app.inject({ method: r.method as 'GET', url, remoteAddress: '198.51.100.7' });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
      if (r.method !== 'HEAD') expect(messageOf(res.json()), `${r.method} ${r.url}`).toBe(`Not allowed: address 198.51.100.7 is not in security.allowFrom.${list}`);
      checked++;
    }
    expect(checked).toBeGreaterThan(50);
  });
});

describe('security.allowFrom behind a proxy (server.trust_proxy)', { timeout: 30_000 }, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(yaml('server: {trust_proxy: "127.0.0.1"}'));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('decides on the forwarded address when the peer is a trusted proxy', async () => {
    const models = (remoteAddress: string, xff: string) => h.app.inject({ method: 'GET', url: '/api/v1/models', remoteAddress, headers: { 'x-forwarded-for': xff } });
    expect((await models('127.0.0.1', '192.168.1.44')).statusCode).toBe(200);
    expect((await models('127.0.0.1', '2001:db8::9')).statusCode).toBe(200);
    const refused = await models('127.0.0.1', '198.51.100.2');
    expect(refused.statusCode).toBe(403);
    expect(messageOf(refused.json())).toContain('address 198.51.100.2 ');
    // A peer that is not the trusted proxy cannot claim an address.
    const spoofed = await models('10.9.9.9', '192.168.1.44');
    expect(spoofed.statusCode).toBe(403);
    expect(messageOf(spoofed.json())).toContain('address 10.9.9.9 ');
  });
});

describe('AddressList and the file', () => {
  it('matches IPv4-mapped entries and addresses both ways; zones are dropped', () => {
    const mapped = new AddressList(['::ffff:10.0.0.0/104']);
    expect(mapped.allows('10.1.1.1')).toBe(true);
    expect(mapped.allows('::ffff:10.1.1.1')).toBe(true);
    expect(mapped.allows('11.0.0.1')).toBe(false);
    expect(new AddressList(['127.0.0.1']).allows('::1')).toBe(false);
    expect(new AddressList(['fe80::/10']).allows('fe80::1%eth0')).toBe(true);
    expect(new AddressList([]).allows('203.0.113.1')).toBe(true);
    expect(new AddressList(['0.0.0.0/0']).allows('2001:db8::1')).toBe(false);
    expect(new AddressList(['10.0.0.0/8']).allows('not-an-address')).toBe(false);
  });

  it('a file with an invalid CIDR is refused at start, naming it', () => {
    expect(() => validateConfig({ security: { allowFrom: { management: ['10.0.0.0/8', '300.1.1.1/8'] } } }, 'config.yaml', { file: true })).toThrow(
      'config.yaml: security.allowFrom.management: not a CIDR or address: "300.1.1.1/8"',
    );
  });
});
