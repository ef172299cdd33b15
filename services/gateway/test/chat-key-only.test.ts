import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, login, startHarness, type Harness } from './auth-harness.js';

/**
 * The Channels page warns before the first API key makes an open server's chat key-only (issue
 * 42). The warning reads `chatNeedsKey` of `GET /auth/status` (services/web/app/lib/permissions.ts
 * `chatStillOpen`); this pins that the flag is what the chat guard enforces, in every state that
 * could make them differ: no key, a disabled api account, an enabled one, the same disabled
 * again, a user's own API key.
 */

const ADMIN_PASSWORD = 'Adm1n-pass-word-open';
const YAML = `
security:
  requireAuth: false
  jwtSecret: chat-key-only-jwt-secret-0123456789-abcdef
  users:
    admin: "${ADMIN_PASSWORD}"
`;

let h: Harness;
beforeAll(async () => {
  h = await startHarness(YAML);
});
afterAll(async () => {
  await h?.close();
});

/** What the page is told, and what an anonymous chat gets. */
async function state(): Promise<{ chatNeedsKey: boolean | undefined; anonymousChat: number }> {
  const status = (await h.app.inject({ method: 'GET', url: '/api/v1/auth/status' })).json() as { chatNeedsKey?: boolean };
  const chat = await h.app.inject({ method: 'POST', url: '/api/v1/test-chat', payload: {} });
  return { chatNeedsKey: status.chatNeedsKey, anonymousChat: chat.statusCode };
}
const OPEN = { chatNeedsKey: false, anonymousChat: 200 };
const KEY_ONLY = { chatNeedsKey: true, anonymousChat: 401 };
// The credential index reloads on the change's announcement, a moment after the write.
const settlesTo = (expected: typeof OPEN) => expect.poll(state, { timeout: 10_000 }).toEqual(expected);

describe("an open server's chat lock, as the Channels page is told it", () => {
  it('is open with no key, and stays open for a disabled api account', async () => {
    expect(await state()).toEqual(OPEN);
    const made = await h.app.inject({ method: 'POST', url: '/api/v1/channels/api/accounts', payload: { id: 'sleeper', enabled: false } });
    expect(made.statusCode, made.body).toBe(201);
    await settlesTo(OPEN);
  });

  it('locks when an api account is enabled, and opens again when it is disabled', async () => {
    const on = await h.app.inject({ method: 'PUT', url: '/api/v1/channels/api/accounts/sleeper', payload: { enabled: true } });
    expect(on.statusCode, on.body).toBe(200);
    await settlesTo(KEY_ONLY);
    const off = await h.app.inject({ method: 'PUT', url: '/api/v1/channels/api/accounts/sleeper', payload: { enabled: false } });
    expect(off.statusCode, off.body).toBe(200);
    await settlesTo(OPEN);
  });

  it("locks when a user makes an API key of their own (no account at all): the page's warning counts it", async () => {
    const jwt = await login(h.app, 'admin', ADMIN_PASSWORD);
    const key = await h.app.inject({ method: 'POST', url: '/api/v1/auth/api-key', headers: bearer(jwt) });
    expect(key.statusCode, key.body).toBe(200);
    await settlesTo(KEY_ONLY);
    // That key chats; no key does not.
    const { apiKey } = key.json() as { apiKey: string };
    expect((await h.app.inject({ method: 'POST', url: '/api/v1/test-chat', headers: bearer(apiKey), payload: {} })).statusCode).toBe(200);
  });
});
