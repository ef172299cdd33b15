import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import JSZip from 'jszip';
import type { Page } from 'playwright-core';
import { repoRoot, type FakeModel } from '@agentry/testing';
import { browserTarget } from './browser-target.js';

/**
 * The first hour on an open server (requireAuth false, admin/admin, as `npm start` comes), in
 * Chromium at 1440x900: the top bar says "open server" instead of offering a login, the
 * default-password warning shows before anyone logs in, an answer streams with a cursor, and a
 * failed or stopped turn can be retried or edited and sent again, with a link to the provider
 * page on a provider failure. Screenshots of each state go to docs/screenshots/ (looked at).
 */

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
const ci = process.env.CI === 'true';
if (!haveChromium && !ci) console.warn(`[web-first-hour] SKIPPED: ${CHROMIUM} is missing (apt-get install chromium); under CI=true this fails.`);

const shots = path.join(repoRoot, 'docs', 'screenshots');
const upstream500 = { status: 500, body: { error: { message: 'fake upstream exploded', type: 'server_error', param: null, code: null } } };

// Set from the browser target once it is up, for the helpers below.
let fake: FakeModel;
let page: Page;
let base: string;

const shot = (name: string) => page.screenshot({ path: path.join(shots, `${name}.png`) });
const userTexts = () => fake.requests.at(-1)!.body.messages.filter((m) => m.role === 'user').map((m) => m.content);

describe.skipIf(!haveChromium && !ci)('the first hour in the web UI (open server)', () => {
  // Nothing configured, as a fresh `npm start`: no config file, no provider, no agent.
  const t = browserTarget({ name: 'web-first-hour', bare: true, viewport: { width: 1440, height: 900 }, timeoutMs: 15_000 });

  beforeAll(() => {
    ({ fake, page, base } = t);
    fs.mkdirSync(shots, { recursive: true });
  });

  it('shows the first steps on an empty server and ticks each one as it is done', async () => {
    await page.goto(`${base}/chat`);
    const steps = page.getByRole('region', { name: 'Get started' });
    await steps.waitFor();
    const done = () => steps.locator('li[data-done="true"] strong').allInnerTexts();
    expect(await done()).toEqual([]);
    expect(await steps.getByRole('link', { name: 'Model providers' }).getAttribute('href')).toBe('/providers');
    expect(await steps.getByRole('link', { name: 'New agent' }).getAttribute('href')).toBe('/agents/new');
    // One column of marks, the step whose hint wraps included (measured at 1440x900).
    const marks = await steps.locator('.first-steps-mark').evaluateAll((els) => els.map((e) => `${e.getBoundingClientRect().left} ${e.getBoundingClientRect().width}`));
    expect(new Set(marks).size).toBe(1);
    await shot('first-steps-empty');

    // An open server: no login needed to add the provider and create the agent.
    const provider = await fetch(`${base}/api/v1/config/models/providers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'fake', base_url: fake.url, model: 'fake-model' }),
    });
    expect(provider.status, await provider.clone().text()).toBe(201);
    await page.reload();
    await steps.waitFor();
    expect(await done()).toEqual(['Add a model provider']);
    const created = await fetch(`${base}/api/v1/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        ruleChain: { id: 'helper', name: 'Helper', root: true },
        metadata: {
          firstNodeIndex: 0,
          nodes: [
            { id: 'agent', type: 'ai/agent', name: 'Agent', configuration: { systemPrompt: 'You help.' } },
            { id: 'end', type: 'end', name: 'End' },
          ],
          connections: [{ fromId: 'agent', toId: 'end', type: 'Success' }],
        },
      }),
    });
    expect(created.status, await created.clone().text()).toBeLessThan(300);
    await page.goto(`${base}/chat/helper`);
    await steps.waitFor();
    expect(await done()).toEqual(['Add a model provider', 'Create an agent']);
    await shot('first-steps-chat-left');
  }, 60_000);

  it('says "open server" instead of "Log in" and warns about the default password before any login', async () => {
    await page.goto(`${base}/chat/helper`);
    const open = page.getByRole('banner').getByRole('link', { name: 'open server' });
    await open.waitFor();
    expect(await open.getAttribute('title')).toMatch(/does not require a login/);
    expect(await page.getByRole('banner').getByRole('link', { name: 'Log in' }).count()).toBe(0);
    const warning = page.getByRole('alert').filter({ hasText: 'default password' });
    await warning.waitFor();
    // Changing it needs admin's login: the link goes through the login page.
    expect(await warning.getByRole('link', { name: 'Change it now' }).getAttribute('href')).toBe(`/login?next=${encodeURIComponent('/settings#account')}`);
    await shot('open-server-topbar');
  }, 60_000);

  it('streams with a cursor after the last word, gone once the answer is done', async () => {
    fake.script({ text: ['The ', 'answer ', 'is ', 'coming ', 'slowly ', 'but ', 'surely.'], chunkDelayMs: 600 });
    await page.getByLabel('Message').fill('stream please');
    await page.keyboard.press('Enter');
    const streaming = page.locator('.turn-assistant[data-status="streaming"] .md p').last();
    await page.getByText('The answer').waitFor();
    const cursor = () => streaming.evaluate((el) => getComputedStyle(el, '::after').content);
    expect(await cursor()).toBe('"▍"');
    await shot('chat-streaming-cursor');
    await page.locator('.turn-assistant[data-status="done"]').getByText('surely.').waitFor();
    // The first chat was the last step: a new conversation shows no checklist.
    const other = await page.context().newPage();
    await other.goto(`${base}/chat/helper/a-new-conversation`);
    await other.getByText('Send a message to start').waitFor();
    await other.waitForLoadState('networkidle');
    expect(await other.getByRole('region', { name: 'Get started' }).count()).toBe(0);
    await other.close();
    const done = page.locator('.turn-assistant[data-status="done"] .md p').last();
    expect(await done.evaluate((el) => getComputedStyle(el, '::after').content)).toBe('none');
  }, 60_000);

  it('a provider failure links to the provider page; Retry sends the turn again and gets the answer', async () => {
    fake.script(upstream500, upstream500, upstream500);
    await page.getByLabel('Message').fill('please answer');
    await page.keyboard.press('Enter');
    const failed = page.locator('.turn-assistant[data-status="error"]').last();
    await failed.getByText(/fake upstream exploded/).first().waitFor();
    expect(await failed.getByRole('link', { name: 'Check the model provider' }).getAttribute('href')).toBe('/providers');
    await shot('chat-failed-turn-retry');
    const asked = fake.requests.length;
    await failed.getByRole('button', { name: 'Retry' }).click();
    // The fake echoes the last user message: the same text went again.
    await page.locator('.turn-assistant[data-status="done"]').last().getByText('please answer').waitFor();
    expect(fake.requests.length).toBe(asked + 1);
    expect(userTexts()).toEqual(['stream please', 'please answer']);
    // The failed turn offers nothing any more: its retry is the last answer now.
    expect(await failed.getByRole('button', { name: 'Retry' }).count()).toBe(0);
  }, 60_000);

  it('says which provider attempt is under way while the server retries, and drops it once the answer comes', async () => {
    fake.script({ status: 503, body: { error: { message: 'warming up', type: 'server_error', param: null, code: null } } }, { text: 'recovered at last', delayMs: 2500 });
    await page.getByLabel('Message').fill('try again please');
    await page.keyboard.press('Enter');
    const streaming = page.locator('.turn-assistant[data-status="streaming"]').last();
    await streaming.getByText('Thinking… (attempt 2 of 3: provider error (HTTP 503))').waitFor();
    await shot('chat-provider-retry');
    const done = page.locator('.turn-assistant[data-status="done"]').last();
    await done.getByText('recovered at last').waitFor();
    expect(await done.getByText(/attempt 2 of 3/).count()).toBe(0);
  }, 60_000);

  it('a stopped turn can be edited and sent again', async () => {
    fake.script({ text: Array.from({ length: 30 }, (_, i) => `w${i} `), chunkDelayMs: 300 });
    await page.getByLabel('Message').fill('a long one');
    await page.keyboard.press('Enter');
    await page.getByText('w0 w1').waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    const stopped = page.locator('.turn-assistant[data-status="stopped"]').last();
    await stopped.getByText('Stopped before the answer was complete.').waitFor();
    await stopped.getByRole('button', { name: 'Edit and resend' }).click();
    const input = page.getByLabel('Message');
    expect(await input.inputValue()).toBe('a long one');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('chat-input');
    await input.fill('a short one');
    await page.keyboard.press('Enter');
    await page.locator('.turn-assistant[data-status="done"]').last().getByText('a short one').waitFor();
    expect(userTexts().at(-1)).toBe('a short one');
  }, 60_000);

  it('Skills: a zip dropped on the page is uploaded, anything else refused with a sentence; a skill name opens the skill', async () => {
    await page.goto(`${base}/skills`);
    const zone = page.getByRole('region', { name: 'Drop a zip of skills' });
    await zone.waitFor();
    const dropFile = async (name: string, bytes: Uint8Array, type: string) => {
      const data = await page.evaluateHandle(
        ({ name, bytes, type }) => {
          const dt = new DataTransfer();
          dt.items.add(new File([new Uint8Array(bytes)], name, { type }));
          return dt;
        },
        { name, bytes: [...bytes], type },
      );
      await zone.dispatchEvent('dragover', { dataTransfer: data });
      await zone.dispatchEvent('drop', { dataTransfer: data });
    };
    await dropFile('notes.txt', new TextEncoder().encode('hello'), 'text/plain');
    await zone.getByText('notes.txt is not a .zip').waitFor();

    const zip = new JSZip();
    zip.file('greet/SKILL.md', '---\ndescription: Greet people\n---\nSay **hello** warmly.\n');
    await dropFile('skills.zip', await zip.generateAsync({ type: 'uint8array' }), 'application/zip');
    await page.getByText('Upload: created greet.').waitFor();
    expect(await zone.getByText('is not a .zip').count()).toBe(0);
    await shot('skills-drop-zone');

    // The name is a button: on an open server it opens the editor with the skill's content.
    const name = page.getByRole('button', { name: 'greet', exact: true });
    await name.click();
    expect(await name.getAttribute('aria-expanded')).toBe('true');
    await expect.poll(() => page.getByLabel('Content (Markdown)').inputValue()).toContain('Say **hello** warmly.');
    await name.click();
    expect(await page.getByLabel('Content (Markdown)').count()).toBe(0);
  }, 60_000);

  it("Workspace: a file open keeps its folder's New file and Upload buttons", async () => {
    await page.goto(`${base}/workspace/helper`);
    const pane = page.getByRole('region', { name: 'Selected entry' });
    await pane.getByRole('button', { name: 'New file' }).click();
    await pane.getByLabel('New file name').fill('notes/first.md');
    await pane.getByRole('button', { name: 'Create' }).click();
    await pane.getByRole('heading', { name: 'notes/first.md' }).waitFor();
    // The file is open, and its folder's actions are still there.
    await pane.getByText('In notes/:').waitFor();
    expect(await pane.getByText('Upload file').count()).toBe(1);
    await shot('workspace-file-open-folder-bar');
    await pane.getByRole('button', { name: 'New file' }).click();
    await pane.getByLabel('New file name').fill('second.md');
    await pane.getByRole('button', { name: 'Create' }).click();
    await pane.getByRole('heading', { name: 'notes/second.md' }).waitFor();
  }, 60_000);

  // Last: it turns this server's chat key-only.
  it('Channels warns before the first API key turns chat key-only; a message typed before the login redirect survives it', async () => {
    await page.goto(`${base}/channels`);
    const apiSection = page.locator('section[data-platform="api"]');
    await apiSection.getByRole('button', { name: 'Add account' }).click();
    const form = page.getByRole('form', { name: 'New API account' });
    await form.getByText('This makes chat key-only.').waitFor();
    await shot('channels-first-api-key-warning');
    await form.getByLabel('Account id').fill('app');
    await form.getByRole('button', { name: 'Add account' }).click();
    await apiSection.locator('li[data-account="app"]').waitFor();
    // A second key changes nothing more: no warning.
    await apiSection.getByRole('button', { name: 'Add account' }).click();
    await page.getByRole('form', { name: 'New API account' }).getByLabel('Account id').waitFor();
    expect(await page.getByText('This makes chat key-only.').count()).toBe(0);

    await page.goto(`${base}/chat/helper`);
    await page.getByLabel('Message').fill('my carefully typed question');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/login\?next=/);
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill('admin');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/chat\/helper/);
    await expect.poll(() => page.getByLabel('Message').inputValue()).toBe('my carefully typed question');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.turn-assistant[data-status="done"]').last().getByText('my carefully typed question').waitFor();
    // Sent and answered: the next visit starts with an empty composer.
    await page.reload();
    await page.getByLabel('Message').waitFor();
    expect(await page.getByLabel('Message').inputValue()).toBe('');
  }, 60_000);
});
