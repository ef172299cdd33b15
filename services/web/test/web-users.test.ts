import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { browserTarget } from './browser-target.js';

/**
 * The Users page in Chromium against a real embedded gateway that requires authentication: an
 * admin creates, disables, enables, re-passwords and deletes a user, the last-admin rule shows at
 * the page, and a user-role login sees neither the link nor the list. Each step checks what the
 * page did through the API. A failing step leaves test-output/web/web-users-<step>.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-web-users';

describe('the Users page in Chromium', () => {
  const t = browserTarget({ name: 'web-users', users: { admin: ADMIN_PASSWORD }, viewport: { width: 1280, height: 800 }, timeoutMs: 10_000 });

  async function api(method: string, url: string, body?: unknown, as = { username: 'admin', password: ADMIN_PASSWORD }) {
    const login = await fetch(`${t.base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(as) });
    if (!login.ok) return { status: login.status, json: (await login.json()) as unknown };
    const { token } = (await login.json()) as { token: string };
    const res = await fetch(`${t.base}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, json: (await res.json()) as unknown };
  }
  const userNamed = async (name: string) => ((await api('GET', '/users')).json as { users: Array<{ username: string; disabled: boolean; role: string }> }).users.find((u) => u.username === name);
  const loginStatus = async (username: string, password: string) => (await api('GET', '/auth/api-key', undefined, { username, password })).status;

  /** Signs in from the login page as any user (alice is made by the suite, not the target). */
  async function signIn(p: Page, username: string, password: string): Promise<void> {
    await p.goto(`${t.base}/login`);
    await p.getByLabel('Username').fill(username);
    await p.getByLabel('Password').fill(password);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForURL(`${t.base}/chat`);
  }

  const row = (name: string) => t.page.locator(`tr[data-user="${name}"]`);

  it('an admin creates a user with a role from the Users page', () =>
    t.step('create', async () => {
      await signIn(t.page, 'admin', ADMIN_PASSWORD);
      await t.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Users', exact: true }).click();
      await t.page.waitForURL(`${t.base}/users`);
      await row('admin').waitFor();
      expect(await row('admin').textContent()).toMatch(/file/);

      await t.page.getByRole('button', { name: 'New user' }).click();
      const form = t.page.getByRole('form', { name: 'New user' });
      await form.getByLabel('Username').fill('alice');
      await form.getByLabel('Role').selectOption('admin');
      await form.getByLabel('Password').fill('short');
      await form.locator('.field.has-error').filter({ hasText: 'at least 8 characters' }).waitFor();
      await form.getByRole('button', { name: 'Create user' }).click();
      await form.getByRole('alert').filter({ hasText: 'password must be at least 8 characters' }).waitFor();
      await form.getByLabel('Password').fill('alice-password');
      await form.getByRole('button', { name: 'Create user' }).click();
      await row('alice').waitFor();
      expect(await row('alice').getByLabel('Role of alice').inputValue()).toBe('admin');
      expect(await userNamed('alice')).toMatchObject({ role: 'admin', disabled: false });
      expect(await loginStatus('alice', 'alice-password')).toBe(200);
    }));

  it('disables and enables a user, changes its role, and resets its password', () =>
    t.step('change', async () => {
      // The switch follows the server's answer, so it is clicked and its state awaited.
      const enabled = row('alice').getByRole('checkbox', { name: 'Enable alice' });
      await enabled.click();
      await expect.poll(() => enabled.isChecked()).toBe(false);
      expect(await userNamed('alice')).toMatchObject({ disabled: true });
      expect(await loginStatus('alice', 'alice-password')).toBe(403);
      await enabled.click();
      await expect.poll(() => enabled.isChecked()).toBe(true);
      expect(await userNamed('alice')).toMatchObject({ disabled: false });

      await row('alice').getByLabel('Role of alice').selectOption('user');
      await expect.poll(async () => (await userNamed('alice'))?.role).toBe('user');

      await row('alice').getByRole('button', { name: 'Reset password' }).click();
      const reset = t.page.getByRole('form', { name: 'New password for alice' });
      await reset.getByLabel('New password for alice').fill('alice-new-password');
      await reset.getByRole('button', { name: 'Set password' }).click();
      await reset.waitFor({ state: 'detached' });
      expect(await loginStatus('alice', 'alice-password')).toBe(401);
      expect(await loginStatus('alice', 'alice-new-password')).toBe(200);
    }));

  it('shows the last-admin refusal and keeps the admin enabled', () =>
    t.step('last-admin', async () => {
      const enabled = row('admin').getByRole('checkbox', { name: 'Enable admin' });
      await enabled.click();
      await t.page.getByRole('alert').filter({ hasText: 'At least one enabled admin must remain' }).waitFor();
      expect(await enabled.isChecked()).toBe(true);
      expect(await userNamed('admin')).toMatchObject({ disabled: false });
      // A file user has no Delete: the configuration file is where it is removed.
      expect(await row('admin').getByRole('button', { name: 'Delete' }).count()).toBe(0);
    }));

  it('a user-role login sees no Users link and no list', () =>
    t.step('non-admin', async () => {
      const other = await t.browser.newPage();
      other.setDefaultTimeout(10_000);
      try {
        await signIn(other, 'alice', 'alice-new-password');
        const main = other.getByRole('navigation', { name: 'Main' });
        await main.getByRole('link', { name: 'Agents', exact: true }).waitFor();
        expect(await main.getByRole('link', { name: 'Users', exact: true }).count()).toBe(0);
        await other.goto(`${t.base}/users`);
        await other.getByText('Only an admin manages users.').waitFor();
        expect(await other.locator('tr[data-user]').count()).toBe(0);
      } finally {
        await other.close();
      }
    }));

  it('deletes a user after confirming', () =>
    t.step('delete', async () => {
      t.page.once('dialog', (d) => void d.accept());
      await row('alice').getByRole('button', { name: 'Delete' }).click();
      await row('alice').waitFor({ state: 'detached' });
      expect(await userNamed('alice')).toBeUndefined();
      expect(await loginStatus('alice', 'alice-new-password')).toBe(401);
      expect(t.problems).toEqual([]);
    }));
});
