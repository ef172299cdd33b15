import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { repoRoot } from '@agentry/testing';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * A real run replayed on the canvas (issue 23 item 14, issue 28 item 3, issue 41's replay), in
 * Chromium at 1440x900 against an embedded gateway and worker with the fake model: the user chats
 * with a two-node agent (jsTransform in debugMode -> ai/agent), opens its canvas, picks the run
 * from the replay tab's recent runs (GET /agents/{id}/runs, GET /runs/{id}/steps) and sees each
 * node marked with its place, relation and time, and the transform's message in and out. Then a
 * run that failed in its chain: listed by its first words as failed, in red; its failed step red
 * with the error, on the canvas and in the step list beside it; a step or a node clicked shows
 * what it got and passed on. A user who does not own the agent sees its owner and Save/Delete
 * disabled with the reason, and the admin-only controls of Channels and Settings disabled with
 * theirs. Leaves test-output/web/web-run-replay*.png and docs/screenshots/replay-failed-run.png.
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
/** styles.css's --danger and --ok in the light scheme (headless Chromium's). */
const RED = 'rgb(180, 35, 24)';
const colourOf = (l: Locator) => l.evaluate((el) => getComputedStyle(el).color);
/** The `data` of the messages in and out the step detail shows (RuleGo messages as JSON). */
const messagesShown = async () => (await page.locator('.step-detail pre').allTextContents()).map((text) => (JSON.parse(text) as { data: unknown }).data);
const boxOf = async (l: Locator) => {
  const b = await l.boundingBox();
  if (!b) throw new Error('not shown');
  return b;
};

describe('a real run replayed on the canvas, in Chromium', () => {
  t = browserTarget({ name: 'web-run-replay', users: { admin: ADMIN_PASSWORD, bob: BOB_PASSWORD }, viewport: { width: 1440, height: 900 } });

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
    // The second node fails before the agent answers: the run fails, its steps are kept.
    const failing = await api('POST', '/agents', {
      ruleChain: { id: 'checker', name: 'Order checker' },
      metadata: {
        nodes: [
          { id: 'prep', type: 'jsTransform', debugMode: true, configuration: { jsScript: 'return {msg: String(msg).toUpperCase(), metadata: metadata, msgType: msgType};' } },
          { id: 'check', type: 'jsTransform', debugMode: true, configuration: { jsScript: "throw new Error('no order number in ' + msg);" } },
          { id: 'reply', type: 'ai/agent', configuration: { systemPrompt: 'Answer briefly.' } },
        ],
        connections: [
          { fromId: 'prep', toId: 'check', type: 'Success' },
          { fromId: 'check', toId: 'reply', type: 'Success' },
        ],
      },
    });
    expect(failing.status, failing.text).toBe(201);
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
      await page.getByRole('tab', { name: 'Replay a run' }).click();
      // The run named by what was asked, and how it ended.
      const run = page.locator('.run-item', { hasText: 'hello canvas' });
      await run.waitFor();
      expect(await run.locator('.badge').textContent()).toBe('ok');
      expect(await run.locator('.run-meta').textContent()).toMatch(/ · api · [\d.]+ m?s$/);
      await run.click();
      await page.getByText(/^2 steps, [\d.]+ m?s in all\.$/).waitFor();
      expect(await flowNode('shout').locator('.canvas-node-run').textContent()).toMatch(/^#1 · Success · [\d.]+ m?s$/);
      expect(await flowNode('answer').locator('.canvas-node-run').textContent()).toMatch(/^#2 · Success · [\d.]+ m?s$/);
      expect(await flowNode('answer').locator('.canvas-node').getAttribute('class')).toContain('ran');
      expect(await page.locator('.react-flow__edge.followed').count()).toBe(1);
      // debugMode: the transform's message in and out, as the run recorded them.
      await page.locator('.replay-steps button', { hasText: 'shout' }).click();
      await page.locator('.step-detail h4', { hasText: 'Step #1' }).waitFor();
      expect(await messagesShown()).toEqual(['hello canvas', 'HELLO CANVAS']);
      // The ai/agent node ran without debugMode: the panel says its messages were not kept.
      await flowNode('answer').click();
      await page.locator('.step-detail', { hasText: 'Step #2' }).getByText('Input and output were not kept').waitFor();
      await t.shot('web-run-replay');
      expect(t.problems).toEqual([]);
    }));

  it('replays a failed run: listed by its first words as failed, its failed step red with the error beside the canvas, a step or node clicked shows its input and output', () =>
    step('failed', async () => {
      await page.goto(`${base}/chat/checker`);
      await page.getByLabel('Message').fill('where is my parcel');
      await page.getByLabel('Message').press('Enter');
      await page.locator('.turn-assistant[data-status="error"]').waitFor();

      await page.goto(`${base}/agents/checker`);
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await page.getByRole('tab', { name: 'Replay a run' }).click();
      const run = page.locator('.run-item', { hasText: 'where is my parcel' });
      await run.waitFor();
      const badge = run.locator('.badge');
      expect(await badge.textContent()).toBe('failed');
      expect(await colourOf(badge)).toBe(RED);
      // Not cut off: the words fit their row, the row fits the panel.
      const words = run.locator('.run-words');
      expect(await words.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
      const side = await boxOf(page.locator('.canvas-side'));
      const row = await boxOf(run);
      expect(row.x + row.width).toBeLessThanOrEqual(side.x + side.width + 1);

      await run.click();
      await page.getByText(/^2 steps, [\d.]+ m?s in all\.$/).waitFor();
      await page.getByText(/^The run failed: .*no order number in WHERE IS MY PARCEL/).waitFor();
      // The steps beside the canvas, above the fold of a 1440x900 screen.
      const list = page.locator('.replay-steps');
      const flow = await boxOf(page.locator('.canvas-flow'));
      const listBox = await boxOf(list);
      expect(listBox.x).toBeGreaterThanOrEqual(flow.x + flow.width);
      expect(listBox.y + listBox.height).toBeLessThanOrEqual(900);
      const failedStep = list.locator('li').nth(1);
      expect(await failedStep.getAttribute('class')).toBe('failed');
      expect(await failedStep.locator('.badge').textContent()).toBe('failed');
      expect(await colourOf(failedStep.locator('.step-error'))).toBe(RED);
      expect(await failedStep.locator('.step-error').textContent()).toContain('no order number in WHERE IS MY PARCEL');
      expect(await list.locator('li').first().getAttribute('class')).toBe('ok');
      // On the canvas: the failed node red (its Failure line too), the agent never reached.
      expect(await flowNode('check').locator('.canvas-node').getAttribute('class')).toContain('ran failed');
      expect(await flowNode('check').locator('.canvas-node-run').textContent()).toMatch(/^#2 · Failure · [\d.]+ m?s$/);
      expect(await colourOf(flowNode('check').locator('.canvas-node-run'))).toBe(RED);
      expect(await flowNode('check').locator('.canvas-node-error').textContent()).toContain('no order number');
      expect(await flowNode('reply').locator('.canvas-node').getAttribute('class')).toContain('not-run');
      // A failed run opens on its failed step: the error, and what the node got.
      const detail = page.locator('.step-detail');
      await detail.locator('h4', { hasText: 'Step #2' }).waitFor();
      expect((await messagesShown())[0]).toBe('WHERE IS MY PARCEL');
      await t.shot('web-run-replay-failed');
      await page.screenshot({ path: path.join(repoRoot, 'docs', 'screenshots', 'replay-failed-run.png') });
      // A step clicked: its node selected and its input and output shown.
      await list.locator('li').first().locator('button').click();
      await detail.locator('h4', { hasText: 'Step #1' }).waitFor();
      expect(await messagesShown()).toEqual(['where is my parcel', 'WHERE IS MY PARCEL']);
      expect(await flowNode('prep').getAttribute('class')).toContain('selected');
      // A node clicked on the canvas: its step.
      await flowNode('check').click();
      await detail.locator('h4', { hasText: 'Step #2' }).waitFor();
      await flowNode('reply').click();
      await page.getByText('Node reply did not run in this run.').waitFor();
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
      await page.getByRole('tab', { name: 'Replay a run' }).click();
      await page.getByLabel('Run steps (JSON)').waitFor();
      expect(await page.locator('.run-list-wrap').count()).toBe(0);

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
