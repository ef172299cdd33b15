import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * A real run replayed on the canvas (issue 23 item 14, issue 28 item 3), in Chromium against an
 * embedded gateway and worker with the fake model: the user chats with a two-node agent
 * (jsTransform in debugMode -> ai/agent), opens its canvas, picks the run from the replay
 * panel's recent runs (GET /agents/{id}/runs, GET /runs/{id}/steps) and sees each node marked
 * with its place, relation and time, and the transform's message in and out. A user who does not
 * own the agent sees its owner and Save/Delete disabled with the reason, and the admin-only
 * controls of Channels and Settings disabled with theirs. Leaves
 * test-output/web/web-run-replay.png (and web-run-replay-<step>.png when a step fails).
 */

const ADMIN_PASSWORD = 'admin-password-for-run-replay';
const BOB_PASSWORD = 'bob-password-for-run-replay';
let page: Page;
let base: string;
let t: BrowserTarget;
const api = (method: string, url: string, body?: unknown) => t.api(method, url, body);
const step = (name: string, fn: () => Promise<void>) => t.step(name, fn);
const signIn = (username: string, _password: string, next: string) => t.signIn(username, next);




const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);

describe('a real run replayed on the canvas, in Chromium', () => {
  t = browserTarget({ name: 'web-run-replay', users: { admin: ADMIN_PASSWORD, bob: BOB_PASSWORD } });

  beforeAll(async () => {
    ({ page, base } = t);
    const created = await api('POST', '/agents', {
      ruleChain: { id: 'shouty', name: 'Shouty' },
      metadata: {
        nodes: [
          { id: 'shout', type: 'jsTransform', debugMode: true, configuration: { jsScript: 'return {msg: String(msg).toUpperCase(), metadata: metadata, msgType: msgType};' } },
          { id: 'answer', type: 'ai/agent', configuration: { systemPrompt: 'Answer briefly.' } },
        ],
        connections: [{ fromId: 'shout', toId: 'answer', type: 'Success' }],
      },
    });
    expect(created.status, created.text).toBe(201);
  }, 180_000);

  it('chats with the agent, then picks that run on the canvas and sees each node with its relation and time', () =>
    step('replay', async () => {
      await signIn('admin', ADMIN_PASSWORD, '/chat/shouty');
      await page.getByLabel('Message').fill('hello canvas');
      await page.getByLabel('Message').press('Enter');
      // The fake model echoes what reached it: the transformed message.
      await page.locator('.turn-assistant[data-status="done"]').filter({ hasText: 'HELLO CANVAS' }).waitFor();

      await page.goto(`${base}/agents/shouty`);
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await page.getByText('Replay a run').click();
      const picker = page.getByLabel('Recent run');
      await expect.poll(async () => (await picker.locator('option').allTextContents()).join('|')).toMatch(/succeeded · api · \d+ ms/);
      await page.getByRole('button', { name: 'Replay run' }).click();
      await page.getByText(/^2 steps, [\d.]+ ms in all\.$/).waitFor();
      expect(await flowNode('shout').locator('.canvas-node-run').textContent()).toMatch(/^#1 · Success · [\d.]+ ms$/);
      expect(await flowNode('answer').locator('.canvas-node-run').textContent()).toMatch(/^#2 · Success · [\d.]+ ms$/);
      expect(await flowNode('answer').locator('.canvas-node').getAttribute('class')).toContain('ran');
      expect(await page.locator('.react-flow__edge.followed').count()).toBe(1);
      // debugMode: the transform's message in and out, as the run recorded them.
      await page.getByText('Message in and out').click();
      await page.locator('.replay-steps pre', { hasText: 'HELLO CANVAS' }).waitFor();
      expect(await page.locator('.replay-steps pre').textContent()).toContain('hello canvas');
      await t.shot('web-run-replay');
      expect(t.problems).toEqual([]);
    }));

  it("shows another user the agent's owner, with Save and Delete disabled and the reason, and admin-only controls disabled", () =>
    step('not-owner', async () => {
      await page.evaluate(() => sessionStorage.clear());
      await signIn('bob', BOB_PASSWORD, '/agents/shouty');
      await page.locator('.agent-owner', { hasText: 'admin' }).waitFor();
      const reason = 'Only admin (its owner) or an admin may change this agent.';
      await page.getByText(reason).first().waitFor();
      expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: 'Delete' }).isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: 'Delete' }).getAttribute('title')).toBe(reason);
      await t.shot('web-run-replay-not-owner');
      // Its runs are the owner's and admins' to list: the canvas offers bob the paste box only.
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await page.getByText('Replay a run').click();
      await page.getByLabel('Run steps (JSON)').waitFor();
      expect(await page.getByLabel('Recent run').count()).toBe(0);

      // Server-wide controls: disabled for a user, with the reason (their routes are admin routes).
      await page.goto(`${base}/channels`);
      const channelsWhy = 'Only an admin may change channel accounts and bindings.';
      await page.getByText(channelsWhy).first().waitFor();
      expect(await page.getByRole('button', { name: 'Add account' }).first().isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: 'Add binding' }).getAttribute('title')).toBe(channelsWhy);
      await page.goto(`${base}/settings`);
      await page.getByText('Only an admin may change the server configuration.').waitFor();
      expect(await page.getByRole('button', { name: 'Save configuration' }).isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: 'Save allow-lists' }).isDisabled()).toBe(true);
      await t.shot('web-run-replay-settings-user');
      expect(t.problems).toEqual([]);
    }));
});
