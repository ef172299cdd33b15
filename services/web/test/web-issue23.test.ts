import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import JSZip from 'jszip';
import type { BrowserContext, Page, Route } from 'playwright-core';
import { repoRoot, type FakeModel } from '@agentry/testing';
import { browserTarget } from './browser-target.js';

/**
 * Issue 23, web items 8 to 13, in Debian's Chromium against a real embedded gateway (requireAuth
 * on) and the fake model: failed and stopped turns survive a reload (and never reach the model),
 * errors read as sentences with the detail behind a disclosure, lists show every item with
 * search, sessions have distinct titles, real counts, rename and delete, the login tab is titled,
 * the workspace tree takes arrow keys, long operations show progress, and a `user` login sees
 * owners and disabled controls with the reason. Each test ends in test-output/web/issue23-*.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-issue-23';
const outDir = path.join(repoRoot, 'test-output', 'web');
// Set from the browser target once it is up, for the helpers below.
let fake: FakeModel;
let context: BrowserContext;
let page: Page;
let base: string;
const pageErrors: string[] = [];
/** Pages opened for another login (the last one is screenshotted when a step on it fails). */
const pages: Page[] = [];

const shot = (p: Page, name: string) => p.screenshot({ path: path.join(outDir, `issue23-${name}.png`), fullPage: true });

/** Runs a step; a failure leaves issue23-<name>-failed.png. */
async function step(name: string, fn: () => Promise<void>, on: () => Page = () => page): Promise<void> {
  try {
    await fn();
  } catch (err) {
    await shot(on(), `${name}-failed`).catch(() => {});
    throw err;
  }
}

const tokens: Record<string, string> = {};
/** The API's JSON as the steps read it (shapes are checked by the assertions). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test reads of varied answers
type Json = any;
async function api(method: string, url: string, body?: unknown, as = 'admin'): Promise<{ status: number; json: Json }> {
  if (!tokens[as]) {
    const password = as === 'admin' ? ADMIN_PASSWORD : `${as}-password-23`;
    const login = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: as, password }) });
    tokens[as] = ((await login.json()) as { token: string }).token;
  }
  const res = await fetch(`${base}/api/v1${url}`, {
    method,
    headers: { authorization: `Bearer ${tokens[as]}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: await res.json() };
}

async function createAgent(id: string, as = 'admin'): Promise<void> {
  const { workspaceFiles: _files, ...template } = (await api('GET', '/agent-template', undefined, as)).json;
  const res = await api('POST', '/agents', { ...template, ruleChain: { ...template.ruleChain, id, name: `Agent ${id}` } }, as);
  if (res.status !== 201) throw new Error(`creating ${id}: ${res.status} ${JSON.stringify(res.json)}`);
}

async function signIn(p: Page, username: string, password: string): Promise<void> {
  await p.goto(`${base}/login`);
  await p.getByLabel('Username').fill(username);
  await p.getByLabel('Password').fill(password);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.waitForURL(`${base}/chat**`);
}

async function send(text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
}

const sessionMessages = async (agentId: string) => {
  const list = (await api('GET', `/sessions?agentId=${agentId}&size=100`)).json.data as Array<{ id: string }>;
  return (await Promise.all(list.map(async (s) => (await api('GET', `/sessions/${s.id}/messages`)).json as Array<{ content: string; status?: string }>))).flat();
};

describe('issue 23, web items 8-13, in Chromium', () => {
  // Screenshots are issue23-*.png: the target's name, so an earlier run's are removed first.
  const t = browserTarget({ name: 'issue23', users: { admin: ADMIN_PASSWORD }, viewport: { width: 1280, height: 900 }, timeoutMs: 15_000 });

  beforeAll(async () => {
    ({ fake, context, page, base } = t);
    await createAgent('helper');
    expect((await api('POST', '/users', { username: 'carol', password: 'carol-password-23', role: 'user' })).status).toBe(201);
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('dialog', (d) => void d.accept());
    await signIn(page, 'admin', ADMIN_PASSWORD);
  }, 60_000);

  it('8: a failed and a stopped turn stay visible after a reload, marked, and never go to the model', () =>
    step('8', async () => {
      await page.goto(`${base}/chat/helper`);
      await send('hello there');
      await page.locator('.turn-assistant[data-status="done"]').filter({ hasText: 'hello there' }).waitFor();
      fake.script({ status: 400, body: { error: { message: 'model refuses', type: 'invalid_request_error' } } });
      await send('please break');
      await page.locator('.turn-assistant[data-status="error"]').waitFor();
      fake.script({ text: Array.from({ length: 60 }, (_, i) => `w${i} `), chunkDelayMs: 150 });
      await send('tell a long story');
      await page.locator('.turn-assistant').last().filter({ hasText: 'w2' }).waitFor();
      await page.getByRole('button', { name: 'Stop' }).click();
      await page.locator('.turn-assistant[data-status="stopped"]').waitFor();
      // The worker keeps the stopped turn once it has stopped: wait for it, then reload.
      await expect.poll(async () => (await sessionMessages('helper')).some((m) => m.status === 'stopped'), { timeout: 10_000 }).toBe(true);

      await page.reload();
      await page.locator('.turn-user').filter({ hasText: 'please break' }).waitFor();
      await page.locator('.turn-user').filter({ hasText: 'tell a long story' }).waitFor();
      const failed = page.locator('.turn-assistant[data-status="error"]');
      await expect.poll(() => failed.locator('[role="alert"]').innerText()).toContain("The model provider 'fake' failed: HTTP 400 model refuses");
      const stopped = page.locator('.turn-assistant[data-status="stopped"]');
      expect(await stopped.innerText()).toMatch(/w0 w1[\s\S]*Stopped before the answer was complete/);

      // The next turn's context: the completed turn only.
      await send('and now?');
      await page.locator('.turn-assistant[data-status="done"]').filter({ hasText: 'and now?' }).waitFor();
      const sent = fake.requests.at(-1)!.body.messages.map((m) => m.content);
      expect(sent).toContain('hello there');
      expect(sent).not.toContain('please break');
      expect(sent).not.toContain('tell a long story');
      await shot(page, '8-failed-and-stopped-turns-after-reload');
    }));

  it('9: an error is a sentence, the technical detail behind a disclosure', () =>
    step('9', async () => {
      const failed = page.locator('.turn-assistant[data-status="error"]');
      const detail = failed.locator('details.error-detail');
      expect(await detail.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
      await detail.locator('summary', { hasText: 'Technical detail' }).click();
      expect(await detail.locator("code").innerText()).toMatch(/^chain "helper", node "[^"]+" \(ai\/agent\): Upstream failure: provider "fake" \(model fake-model\): HTTP 400/);
      await failed.scrollIntoViewIfNeeded();
      await shot(page, '9-human-error-with-detail');
    }));

  it('10: lists show every item (over 100 agents and skills) with search', () =>
    step('10', async () => {
      const ids = Array.from({ length: 104 }, (_, i) => `bulk-${String(i).padStart(3, '0')}`);
      for (let i = 0; i < ids.length; i += 8) await Promise.all(ids.slice(i, i + 8).map((id) => createAgent(id)));
      const skills = Array.from({ length: 103 }, (_, i) => `skill-${String(i).padStart(3, '0')}`);
      for (let i = 0; i < skills.length; i += 8) {
        await Promise.all(skills.slice(i, i + 8).map(async (name) => expect((await api('POST', '/skills', { name, scope: 'global', content: `# ${name}\nDo ${name}.`, description: `about ${name}` })).status).toBe(201)));
      }
      await page.goto(`${base}/agents`);
      await page.locator('tr[data-agent="bulk-103"]').waitFor();
      expect(await page.locator('tr[data-agent]').count()).toBe(105);
      await page.getByText('105 agents').waitFor();
      await page.getByLabel('Search agents').fill('bulk-10');
      await expect.poll(() => page.locator('tr[data-agent]').count()).toBe(4);
      await page.getByText('4 of 105 agents').waitFor();

      await page.goto(`${base}/skills`);
      await page.locator('.skill-list > li').nth(102).waitFor();
      expect(await page.locator('.skill-list > li').count()).toBe(103);
      await page.getByLabel('Search skills').fill('skill-10');
      await expect.poll(() => page.locator('.skill-list > li').count()).toBe(3);
      await page.goto(`${base}/agents`);
      await page.getByLabel('Search agents').fill('bulk-10');
      await expect.poll(() => page.locator('tr[data-agent]').count()).toBe(4);
      await shot(page, '10-all-agents-with-search');
    }));

  it('11: sessions count turns, hide empty ones, have distinct titles, and can be renamed and deleted', () =>
    step('11', async () => {
      for (let i = 0; i < 2; i++) {
        await page.goto(`${base}/chat/helper`);
        await page.getByRole('button', { name: 'New conversation' }).click();
        await send('Same question');
        await page.locator('.turn-assistant[data-status="done"]').waitFor();
        // Titles repeat; the time tells them apart (to the second).
        await new Promise((r) => setTimeout(r, 1100));
      }
      // An opened conversation with nothing sent is not listed.
      await page.getByRole('button', { name: 'New conversation' }).click();
      await page.getByText('Send a message to start').waitFor();
      const names = page.locator('.session-list .session-name');
      await expect.poll(() => names.count()).toBe(3);
      const titles = await names.allInnerTexts();
      expect(titles.filter((t) => t.startsWith('Same question · '))).toHaveLength(2);
      expect(new Set(titles).size).toBe(3);
      // The first conversation: 4 turns completed or kept (hello, break, story, and now) = 8 messages with text but one empty failed answer.
      const first = page.locator('.session-list li').filter({ hasText: 'hello there' });
      expect(await first.locator('.session-meta').innerText()).toMatch(/^7 messages · /);

      await first.getByRole('link').click();
      await page.getByRole('button', { name: 'Rename' }).click();
      await page.getByLabel('Conversation title').fill('Renamed chat');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.locator('.session-list .session-name', { hasText: 'Renamed chat' }).waitFor();
      await page.locator('h1.conversation-title', { hasText: 'Renamed chat' }).waitFor();

      await page.locator('.session-list li').filter({ hasText: 'Same question' }).first().getByRole('link').click();
      await page.getByRole('button', { name: 'Delete' }).click();
      await expect.poll(() => names.count()).toBe(2);
      expect((await api('GET', '/sessions?agentId=helper&nonEmpty=true')).json.total).toBe(2);
      // Deleting leaves a fresh conversation open, with no error about the one that went.
      await page.locator('h1.conversation-title', { hasText: 'New conversation' }).waitFor();
      expect(await page.locator('.conversation [role="alert"]').count()).toBe(0);
      await shot(page, '11-sessions-renamed-and-deleted');
    }));

  it('12: the login tab is titled, the workspace tree takes arrow keys, uploads and provider tests show progress', () =>
    step('12', async () => {
      const anon = await context.browser()!.newPage();
      await anon.goto(`${base}/login`);
      await expect.poll(() => anon.title()).toBe('Log in · Agentry');
      await anon.close();

      expect((await api('PUT', `/agents/helper/workspace/file?path=${encodeURIComponent('docs/a.md')}`, { content: '# a' })).status).toBeLessThan(300);
      await page.goto(`${base}/workspace/helper`);
      const root = page.locator('button.tree-item[data-path=""]');
      await page.locator('button.tree-item[data-path="docs"]').waitFor();
      await root.focus();
      const focused = () => page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.path ?? null);
      await page.keyboard.press('ArrowDown');
      expect(await focused()).toBe('docs');
      await page.keyboard.press('ArrowRight');
      await expect.poll(() => page.locator('button.tree-item[data-path="docs"]').getAttribute('aria-expanded')).toBe('true');
      await page.locator('button.tree-item[data-path="docs/a.md"]').waitFor();
      await page.keyboard.press('ArrowRight');
      expect(await focused()).toBe('docs/a.md');
      await page.keyboard.press('ArrowLeft');
      expect(await focused()).toBe('docs');
      await page.keyboard.press('End');
      expect(await focused()).not.toBe('docs');
      await page.keyboard.press('Home');
      expect(await focused()).toBe('');
      await page.keyboard.press('ArrowDown');
      await page.keyboard.press('ArrowLeft');
      await page.keyboard.press('ArrowDown');
      await page.keyboard.press('ArrowUp');
      expect(await focused()).toBe('docs');
      await page.keyboard.press('Enter');
      await shot(page, '12a-workspace-tree-keyboard');

      // Slow both operations down in the browser so that their progress can be seen.
      const hold = async (route: Route) => {
        await new Promise((r) => setTimeout(r, 1500));
        await route.continue();
      };
      await page.route('**/api/v1/skills/upload', hold);
      await page.route('**/api/v1/config/models/providers/*/test', hold);
      await page.goto(`${base}/skills`);
      const zip = new JSZip();
      zip.file('wave/SKILL.md', '---\nname: wave\ndescription: Wave back\n---\nWave.\n');
      await page.getByLabel('Upload zip').setInputFiles({ name: 'skills.zip', mimeType: 'application/zip', buffer: await zip.generateAsync({ type: 'nodebuffer' }) });
      await page.locator('.progress', { hasText: 'Uploading skills.zip' }).waitFor();
      await shot(page, '12b-zip-upload-progress');
      await page.getByText('Upload: created wave.').waitFor();
      expect(await page.locator('.progress').count()).toBe(0);

      await page.goto(`${base}/providers`);
      await page.locator('[data-provider="fake"]').getByRole('button', { name: 'Test connection' }).click();
      await page.locator('.progress', { hasText: 'Testing the connection to fake' }).waitFor();
      await shot(page, '12c-provider-test-progress');
      await page.locator('[data-provider="fake"] .test-result', { hasText: 'Connected in' }).waitFor();
      await page.unroute('**/api/v1/skills/upload');
      await page.unroute('**/api/v1/config/models/providers/*/test');
    }));

  it('13: owners are shown, and a user sees what it may not change disabled with the reason', () =>
    step(
      '13',
      async () => {
        await createAgent('carols', 'carol');
        const carol = await context.browser()!.newPage();
        pages.push(carol);
        await signIn(carol, 'carol', 'carol-password-23');
        await carol.goto(`${base}/agents`);
        // "r": in "helper" and "carols", in no bulk agent nor their owner: the two rows this step is about.
        await carol.getByLabel('Search agents').fill('r');
        await expect.poll(() => carol.locator('tr[data-agent]').count()).toBe(2);
        const helper = carol.locator('tr[data-agent="helper"]');
        await helper.waitFor();
        expect(await helper.locator('td.owner').innerText()).toMatch(/^admin/);
        expect(await helper.getByRole('checkbox').isDisabled()).toBe(true);
        expect(await helper.locator('label.switch').getAttribute('title')).toBe('Only admin (its owner) or an admin may change this agent.');
        await helper.getByText('read-only for you').waitFor();
        const own = carol.locator('tr[data-agent="carols"]');
        expect(await own.locator('td.owner').innerText()).toBe('carol');
        expect(await own.getByRole('checkbox').isDisabled()).toBe(false);
        // The Users link is an admin's; the page says so to anyone else.
        expect(await carol.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Users' }).count()).toBe(0);
        await shot(carol, '13a-user-sees-owners-and-disabled-switches');

        await carol.goto(`${base}/workspace/helper`);
        await carol.getByText('Only admin (its owner) or an admin may change this agent. Its workspace is open to its owner and admins only.').waitFor();
        expect(await carol.locator('button.tree-item').count()).toBe(0);

        await carol.goto(`${base}/skills`);
        await carol.getByText('Only an admin may change global skills.').waitFor();
        expect(await carol.getByRole('button', { name: 'New skill' }).isDisabled()).toBe(true);
        expect(await carol.getByLabel('Upload zip').isDisabled()).toBe(true);
        await carol.getByLabel('Scope').selectOption('carols');
        await expect.poll(() => carol.getByRole('button', { name: 'New skill' }).isDisabled()).toBe(false);
        expect(await carol.getByText('Only an admin may change global skills.').count()).toBe(0);

        await carol.goto(`${base}/providers`);
        await carol.getByText('Only an admin may change model providers.').waitFor();
        expect(await carol.locator('[data-provider="fake"]').getByRole('button', { name: 'Test connection' }).isDisabled()).toBe(true);
        expect(await carol.getByRole('button', { name: 'Add provider' }).getAttribute('title')).toBe('Only an admin may change model providers.');
        await shot(carol, '13b-user-sees-provider-controls-disabled');

        await page.goto(`${base}/users`);
        await page.locator('tr[data-user="carol"]').waitFor();
        await page.goto(`${base}/agents`);
        await page.getByLabel('Search agents').fill('carols');
        expect(await page.locator('tr[data-agent="carols"]').getByRole('checkbox').isDisabled()).toBe(false);
        expect(await page.locator('tr[data-agent="carols"] td.owner').innerText()).toBe('carol');
        await page.goto(`${base}/users`);
        await page.locator('tr[data-user="carol"]').waitFor();
        await shot(page, '13c-admin-users-page');
        expect(pageErrors).toEqual([]);
      },
      () => pages.at(-1) ?? page,
    ));
});
