import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/**
 * `group_policy` of an `api` account (issue 22, item 14): it governs group chats, and a chat
 * completion is never one (the spec's request has no field that says so), so it is kept and
 * shown but refuses no API chat. README (Channels) says so; this pins it.
 */

const ADMIN_PASSWORD = 'Adm1n-pass-word';
const KEY = 'sk-group-off-account-key-0123456789';
const YAML = `
security:
  requireAuth: true
  users:
    admin: "${ADMIN_PASSWORD}"
channels:
  api:
    accounts:
      grp: {name: Group chats off, api_key: "${KEY}", dm_policy: allow, group_policy: disabled}
`;

describe('group_policy of an api account', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(YAML);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is kept and shown, and a chat with the account key is still admitted', async () => {
    const admin = await login(h.app, 'admin', ADMIN_PASSWORD);
    const account = await h.app.inject({ method: 'GET', url: '/api/v1/channels/api/accounts/grp', headers: bearer(admin) });
    expect(account.json()).toMatchObject({ id: 'grp', dmPolicy: 'allow', groupPolicy: 'disabled' });
    const chat = await h.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(KEY), payload: {} });
    expect(chat.statusCode).toBe(200);
    expect(chat.json()).toEqual({ principal: { kind: 'account', platform: 'api', accountId: 'grp' } });
  });
});
