import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCuttingProxy, type CuttingProxy } from '@agentry/testing';
import { browserTarget } from './browser-target.js';

/**
 * The chat page when the network drops in the middle of an answer (issue 27 item 1), in
 * Chromium: the page is served and talks to the gateway through a TCP proxy that cuts the chat
 * stream's connection after a few words. The client resumes the stream by itself; the turn
 * shows the whole answer once, marked as resumed. Leaves test-output/web/web-resume.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-resume';

describe('a chat stream that drops, in Chromium', () => {
  const t = browserTarget({ name: 'web-resume', users: { admin: ADMIN_PASSWORD } });
  let proxy: CuttingProxy;

  beforeAll(async () => {
    const created = await t.api('POST', '/agents', {
      ruleChain: { id: 'talker', name: 'Talker' },
      metadata: { nodes: [{ id: 'answer', type: 'ai/agent', configuration: { systemPrompt: 'Answer at length.' } }], connections: [] },
    });
    expect(created.status, created.text).toBe(201);
    proxy = await startCuttingProxy(t.base, { cutAfter: '"content":"w3 "' });
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
  });

  it('shows the whole answer once, with a note that the connection was resumed', () =>
    t.step('chat', async () => {
      const page = t.page;
      await page.goto(`${proxy.url}/login?next=/chat/talker`);
      await page.getByLabel('Username').fill('admin');
      await page.getByLabel('Password').fill(ADMIN_PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(new RegExp(`^${proxy.url}/chat/talker`));

      const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
      t.fake.script({ text: words, chunkDelayMs: 50 });
      await page.getByLabel('Message').fill('count slowly');
      await page.getByLabel('Message').press('Enter');
      const turn = page.locator('.turn-assistant').last();
      await page.locator('.turn-assistant[data-status="done"]').waitFor();

      expect(proxy.cuts()).toBe(1);
      expect(await turn.locator('.md').innerText()).toBe(words.join('').trim());
      expect(await turn.locator('.resumed').innerText()).toBe('Connection lost and resumed.');
      const resumes = proxy.requests().filter((r) => /^GET \/api\/v1\/runs\/[0-9a-f]{32}\/events$/.test(r));
      expect(resumes).toHaveLength(1);
      await t.shot('web-resume');

      // The stored conversation has the answer once as well (the run was not cancelled by the drop).
      await page.reload();
      await page.locator('.turn-user').filter({ hasText: 'count slowly' }).waitFor();
      const stored = page.locator('.turn-assistant .md').last();
      await stored.filter({ hasText: 'w29' }).waitFor();
      expect(await stored.innerText()).toBe(words.join('').trim());
      expect(await page.locator('.resumed').count()).toBe(0);
      expect(t.problems).toEqual([]);
    }));
});
