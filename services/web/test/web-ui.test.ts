import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import JSZip from 'jszip';
import type { Page } from 'playwright-core';
import { repoRoot, type FakeModel } from '@agentry/testing';
import { browserTarget } from './browser-target.js';

/**
 * The web UI in Debian's Chromium (playwright-core, headless) against a real embedded gateway
 * (`services/standalone` as `npm start` runs it, requireAuth on, default admin password) and the
 * fake model: log in, create an agent from the template, chat with streamed text and a tool
 * card, edit a workspace file, create and toggle a cron job, add a channel account, use it on a
 * phone, and never talk to another host. The steps share one browser and build on each other.
 * A failing step leaves a screenshot in test-output/web/web-ui-<step>.png.
 */

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
const ci = process.env.CI === 'true';
if (!haveChromium && !ci) console.warn(`[web-ui] SKIPPED: ${CHROMIUM} is missing (apt-get install chromium); under CI=true this fails.`);

// Set from the browser target once it is up, for the helpers below.
let fake: FakeModel;
let page: Page;
let base: string;

async function apiAs(method: string, url: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const login = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: 'admin' }) });
  const { token } = (await login.json()) as { token: string };
  const res = await fetch(`${base}/api/v1${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: await res.json() };
}

const nav = (name: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true });

describe.skipIf(!haveChromium && !ci)('web UI in Chromium', () => {
  // No users in the file: the server seeds admin/admin, as `npm start` comes. A failing step
  // leaves test-output/web/web-ui-<step>.png.
  const t = browserTarget({ name: 'web-ui', viewport: { width: 1280, height: 800 }, timeoutMs: 10_000 });
  const step = t.step;

  beforeAll(() => {
    ({ fake, page, base } = t);
  });

  it('logs in with the keyboard and warns about the default password', () =>
    step('login', async () => {
      await page.goto(`${base}/`);
      await page.waitForURL(/\/login\?next=/);
      // Username is focused and prefilled: Tab to the password, type, Enter submits.
      await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('autocomplete'))).toBe('username');
      await page.keyboard.press('Tab');
      await page.keyboard.type('wrong');
      await page.keyboard.press('Enter');
      await page.getByRole('alert').filter({ hasText: 'wrong username or password' }).waitFor();
      await page.getByLabel('Password').fill('admin');
      await page.keyboard.press('Enter');
      await page.waitForURL(`${base}/chat`);
      await page.getByRole('alert').filter({ hasText: 'default password' }).waitFor();
      await page.getByText('There is no agent to talk to yet').waitFor();
      // The token survives a reload of the tab (sessionStorage).
      await page.reload();
      await page.getByText('There is no agent to talk to yet').waitFor();
    }));

  it('creates an agent from the template and shows validation errors at the field', () =>
    step('create-agent', async () => {
      await nav('Agents').click();
      await page.getByRole('link', { name: 'New agent' }).click();
      await page.getByLabel('Id', { exact: true }).fill('helper');
      await page.getByLabel('Name', { exact: true }).fill('Helper');
      await page.getByRole('button', { name: 'Create agent' }).click();
      await page.waitForURL(`${base}/agents/helper`);
      await page.getByRole('heading', { name: 'Helper', level: 1 }).waitFor();
      // The template names the default provider.
      expect(await page.getByLabel('Provider').inputValue()).toBe('fake');
      expect(await page.getByRole('checkbox', { name: /^read/ }).isChecked()).toBe(true);
      expect(await page.getByRole('checkbox', { name: /^bash/ }).isChecked()).toBe(false);

      // The settings are generated from the ai/agent schema of GET /tools/forms: the prompt is a
      // long text, params a fieldset, and what has no control (failover) JSON checked as typed.
      expect(await page.getByLabel('System prompt').evaluate((e) => e.tagName)).toBe('TEXTAREA');
      await page.getByRole('group', { name: 'Model parameters' }).getByLabel('Temperature').fill('0.5');
      const failover = page.getByLabel('Failover');
      await failover.fill('[{"provider": ');
      await page.locator('.field.has-error').filter({ hasText: 'not valid JSON' }).waitFor();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('alert').filter({ hasText: 'does not parse yet' }).waitFor();
      await failover.fill('');

      // A bad limit: flagged at the field as typed, and Save waits for it, naming it under the button
      // (the server's 400 at its field: the heartbeat interval below).
      const maxStep = page.getByLabel('Max steps (model calls per answer)');
      await maxStep.fill('0');
      await expect.poll(() => maxStep.getAttribute('aria-invalid')).toBe('true');
      await page.locator('.field.has-error').filter({ hasText: 'at least 1' }).waitFor();
      await page.getByRole('list', { name: 'What blocks Save' }).filter({ hasText: 'Max steps (model calls per answer): a whole number, at least 1' }).waitFor();
      expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
      await maxStep.fill('20');
      // A toast of an earlier save may still show: wait for one more than there were.
      const toasts = await page.getByText('Agent saved').count();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Agent saved').nth(toasts).waitFor();
      const saved = await apiAs('GET', '/agents/helper');
      expect(JSON.stringify(saved.json)).toContain('"maxStep":20');
      expect(JSON.stringify(saved.json)).toContain('"params":{"temperature":0.5}');
      expect(JSON.stringify(saved.json)).not.toContain('failover');
    }));

  it('sets the heartbeat in the Settings form: a bad interval at its field, then saved and scheduled', () =>
    step('heartbeat', async () => {
      const heartbeat = page.getByRole('group', { name: 'Heartbeat' });
      const interval = heartbeat.getByLabel('Interval');
      await interval.fill('7m');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.locator('.field.has-error').filter({ hasText: 'must divide 60' }).waitFor();
      await interval.fill('30m');
      const hours = heartbeat.getByRole('group', { name: 'Active hours' });
      await hours.getByLabel('Start').fill('22:00');
      await hours.getByLabel('End').fill('06:00');
      await heartbeat.getByLabel('Time zone').fill('Europe/Berlin');
      // A toast of an earlier save may still show: wait for one more than there were.
      const toasts = await page.getByText('Agent saved').count();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Agent saved').nth(toasts).waitFor();
      const view = await apiAs('GET', '/agents/helper/heartbeat');
      expect(view.json).toMatchObject({
        heartbeat: { interval: '30m', activeHours: { start: '22:00', end: '06:00' }, timezone: 'Europe/Berlin' },
        cronJobId: 'heartbeat:helper',
        schedule: '0 */30 * * * *',
      });
    }));

  it('keeps a secret of the definition through the editor: shown as the marker, saved back unchanged', () =>
    step('agent-secret', async () => {
      const plain = 'Bearer web-ui-mcp-token-4e1f';
      const dsl = (await apiAs('GET', '/agents/helper')).json as { metadata: { nodes: Array<{ type: string; configuration: { tools?: unknown[] } }> } };
      const agentNode = dsl.metadata.nodes.find((n) => n.type === 'ai/agent')!;
      agentNode.configuration.tools = [...(agentNode.configuration.tools ?? []), { type: 'mcp', name: 'docs', config: { url: 'https://mcp.example.com/mcp', headers: { Authorization: plain } } }];
      expect((await apiAs('PUT', '/agents/helper', dsl)).status).toBe(200);

      await page.reload();
      const others = page.getByLabel('Other tools (JSON)');
      await expect.poll(() => others.inputValue()).toContain('"Authorization": "[secret]"');
      expect(await page.content()).not.toContain('web-ui-mcp-token');
      await page.getByRole('group', { name: 'Model parameters' }).getByLabel('Temperature').fill('0.7');
      // A toast of an earlier save may still show: wait for one more than there were.
      const toasts = await page.getByText('Agent saved').count();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Agent saved').nth(toasts).waitFor();
      // The marker is answered only while a secret is stored: the editor's PUT kept it.
      const saved = JSON.stringify((await apiAs('GET', '/agents/helper')).json);
      expect(saved).toContain('"params":{"temperature":0.7}');
      expect(saved).toContain('"headers":{"Authorization":"[secret]"}');
      expect(saved).not.toContain('web-ui-mcp-token');
      // The next steps chat with this agent: it should not try to reach that server.
      const latest = (await apiAs('GET', '/agents/helper')).json as typeof dsl;
      const latestNode = latest.metadata.nodes.find((n) => n.type === 'ai/agent')!;
      latestNode.configuration.tools = latestNode.configuration.tools?.filter((t) => (t as { type?: string }).type !== 'mcp');
      expect((await apiAs('PUT', '/agents/helper', latest)).status).toBe(200);
    }));

  it('disables an agent from the list and enables it again', () =>
    step('agent-toggle', async () => {
      await nav('Agents').click();
      const row = page.locator('tr[data-agent="helper"]');
      const toggle = row.getByRole('checkbox', { name: 'Enable helper' });
      expect(await toggle.isChecked()).toBe(true);
      await toggle.click();
      await row.locator('.badge').filter({ hasText: 'disabled' }).waitFor();
      expect(await toggle.isChecked()).toBe(false);
      const off = (await apiAs('GET', '/agents/helper')).json as { ruleChain: { disabled?: boolean } };
      expect(off.ruleChain.disabled).toBe(true);
      const models = (await apiAs('GET', '/models')).json as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).not.toContain('helper');
      // Still marked after a reload: the list reads the flag from the server.
      await page.reload();
      await row.locator('.badge').filter({ hasText: 'disabled' }).waitFor();

      // The next steps chat with this agent.
      await toggle.click();
      await expect.poll(() => row.locator('.badge').count()).toBe(0);
      expect(await toggle.isChecked()).toBe(true);
      expect(((await apiAs('GET', '/agents/helper')).json as { ruleChain: { disabled?: boolean } }).ruleChain.disabled).toBe(false);
    }));

  it('chats: streams the answer token by token and shows the tool call as a card', () =>
    step('chat', async () => {
      fake.script(
        { toolCalls: [{ name: 'read', arguments: JSON.stringify({ operation: 'file', path: 'AGENTS.md' }) }] },
        { text: ['The ', 'workspace ', 'file ', 'says ', 'hello ', 'from ', '**AGENTS.md**.'], chunkDelayMs: 200 },
      );
      await nav('Chat').click();
      await page.waitForURL(/\/chat\/helper\/web-/);
      const input = page.getByLabel('Message');
      await input.fill('What is in AGENTS.md?');
      await input.press('Enter');

      const card = page.locator('details.tool-card[data-tool="read"]');
      await card.waitFor();
      const answer = page.locator('.turn-assistant .md').last();
      // Partial text while the turn still streams (the Stop button is up), then the whole answer.
      await page.locator('.turn-assistant[data-status="streaming"] .md').filter({ hasText: 'The workspace' }).waitFor();
      await page.getByRole('button', { name: 'Stop' }).waitFor();
      await page.locator('.turn-assistant[data-status="done"]').waitFor();
      expect(await answer.innerText()).toBe('The workspace file says hello from AGENTS.md.');
      expect(await answer.locator('strong').innerText()).toBe('AGENTS.md');

      await expect.poll(() => card.getAttribute('class')).toContain('tool-ok');
      await card.locator('summary').click();
      expect(await card.locator('pre').first().innerText()).toContain('"path": "AGENTS.md"');
      expect(await card.locator('.tool-result').innerText()).toContain('# Helper');
      expect(await card.locator('.tool-duration').innerText()).toMatch(/\d+ (ms|s)$/);

      // The gateway got the agui header and the session id; the fake got the tool loop.
      expect(fake.requests.length).toBe(2);
      expect(fake.requests[1]!.body.messages.some((m) => m.role === 'tool')).toBe(true);

      // A reload shows the stored conversation: the question, the card and the answer.
      await page.reload();
      await page.locator('.turn-user').filter({ hasText: 'What is in AGENTS.md?' }).waitFor();
      await page.locator('details.tool-card[data-tool="read"].tool-ok').waitFor();
      await page.locator('.turn-assistant .md').filter({ hasText: 'hello from AGENTS.md' }).waitFor();
    }));

  it('stops an answer and shows a failed run inline', () =>
    step('chat-stop-error', async () => {
      fake.script({ text: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 150 });
      const input = page.getByLabel('Message');
      await input.fill('Talk for a while');
      await input.press('Enter');
      await page.locator('.turn-assistant[data-status="streaming"] .md').filter({ hasText: 'w1' }).waitFor();
      await page.getByRole('button', { name: 'Stop' }).click();
      await page.locator('.turn-assistant[data-status="stopped"]').waitFor();
      await fake.waitForAbort({ timeoutMs: 5_000 });

      fake.script({ status: 400, body: { error: { message: 'model refuses', type: 'invalid_request_error' } } });
      await input.fill('Fail please');
      await input.press('Enter');
      await page.locator('.turn-assistant[data-status="error"] [role="alert"]').waitFor();
      expect((await page.locator('.turn-assistant[data-status="error"] [role="alert"]').innerText()).length).toBeGreaterThan(0);
    }));

  it('edits a workspace file', () =>
    step('workspace', async () => {
      await nav('Workspace').click();
      await page.waitForURL(`${base}/workspace/helper`);
      await page.getByRole('navigation', { name: 'Files' }).getByRole('button', { name: 'AGENTS.md' }).click();
      const editor = page.getByLabel('Content');
      await expect.poll(() => editor.inputValue()).toContain('# Helper');
      await editor.fill('# Helper\n\nEdited in the browser.\n');
      await page.getByRole('button', { name: 'Save', exact: true }).click();
      await page.getByText('Saved AGENTS.md').waitFor();
      const file = await apiAs('GET', '/agents/helper/workspace/file?path=AGENTS.md');
      expect(file.json).toEqual({ content: '# Helper\n\nEdited in the browser.\n' });

      // Download sends the stored bytes; upload adds a file to the selected folder (the root).
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download' }).click()]);
      expect(download.suggestedFilename()).toBe('AGENTS.md');
      expect(fs.readFileSync(await download.path(), 'utf8')).toBe('# Helper\n\nEdited in the browser.\n');
      await page.getByRole('button', { name: '/ (root)' }).click();
      await page.getByLabel('Upload file').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('uploaded\n') });
      await page.getByRole('navigation', { name: 'Files' }).getByRole('button', { name: 'notes.txt' }).waitFor();
      expect((await apiAs('GET', '/agents/helper/workspace/file?path=notes.txt')).json).toEqual({ content: 'uploaded\n' });
    }));

  it('creates a cron job with a readable schedule and toggles it', () =>
    step('cron', async () => {
      await nav('Cron jobs').click();
      await page.getByRole('button', { name: 'New cron job' }).click();
      const form = page.getByRole('form', { name: 'New cron job' });
      await form.getByLabel('Name', { exact: true }).fill('morning');
      await form.getByLabel(/^Schedule/).fill('0 30 8 * * MON-FRI');
      await form.getByText('at 08:30, on weekdays (Monday to Friday)').waitFor();
      await form.getByLabel('Time zone').fill('UTC');
      await form.getByLabel('Message').fill('Good morning');
      await form.getByRole('button', { name: 'Create cron job' }).click();
      const row = page.locator('tr[data-job="morning"]');
      await row.waitFor();
      expect(await row.locator('.next-run').innerText()).not.toBe('disabled');

      const toggle = row.getByRole('checkbox', { name: 'Enable morning' });
      expect(await toggle.isChecked()).toBe(true);
      await toggle.click();
      await expect.poll(() => row.locator('.next-run').innerText()).toBe('disabled');
      expect(await toggle.isChecked()).toBe(false);
      const jobs = (await apiAs('GET', '/cron')).json as Array<{ name: string; disabled: boolean; schedule: string }>;
      expect(jobs).toEqual([expect.objectContaining({ name: 'morning', disabled: true, schedule: '0 30 8 * * MON-FRI' })]);

      await row.getByRole('button', { name: 'History' }).click();
      await page.getByText('morning has not fired yet.').waitFor();
    }));

  it('adds a channel account with write-only secrets and a binding', () =>
    step('channels', async () => {
      await nav('Channels').click();
      const telegram = page.locator('section[data-platform="chat_d"]');
      await telegram.getByRole('button', { name: 'Add account' }).click();
      const form = page.getByRole('form', { name: 'New Telegram account' });
      await form.getByLabel('Account id').fill('team');
      await form.getByLabel('Name', { exact: true }).fill('Team bot');
      await form.getByLabel('Bot token').fill('123:very-secret-bot-token');
      expect(await form.getByLabel('Bot token').getAttribute('type')).toBe('password');
      await form.getByLabel('Group chats').selectOption('disabled');
      await form.getByLabel('Answer with agent').selectOption('helper');
      await form.getByRole('button', { name: 'Add account' }).click();
      await telegram.locator('li[data-account="team"]').filter({ hasText: 'secrets set' }).waitFor();
      expect(await page.content()).not.toContain('very-secret-bot-token');

      const view = (await apiAs('GET', '/channels/chat_d')).json as { accounts: Record<string, Record<string, unknown>> };
      expect(view.accounts.team).toMatchObject({ id: 'team', name: 'Team bot', groupPolicy: 'disabled', hasSecret: true });
      expect(JSON.stringify(view)).not.toContain('very-secret');
      const bindings = (await apiAs('GET', '/bindings')).json as { bindings: unknown[] };
      expect(bindings.bindings).toEqual([{ agentId: 'helper', match: { default: false, channel: 'chat_d', accountId: 'team' } }]);
      // The binding shows in the bindings section.
      await expect.poll(() => page.locator('.binding-row').count()).toBe(1);
    }));

  it('manages skills (Markdown preview, zip upload, copy to an agent) and tests a provider', () =>
    step('skills-providers', async () => {
      await nav('Skills').click();
      await page.getByRole('button', { name: 'New skill' }).click();
      const editor = page.getByRole('form', { name: 'New skill' });
      await editor.getByLabel('Name', { exact: true }).fill('greet');
      await editor.getByLabel('Description').fill('How to greet');
      await editor.getByLabel('Content (Markdown)').fill('# Greeting\n\nSay **hello**.');
      await editor.getByLabel('Preview').getByRole('heading', { name: 'Greeting' }).waitFor();
      await editor.getByRole('button', { name: 'Create skill' }).click();
      await page.getByRole('heading', { name: 'greet', level: 2 }).waitFor();

      const zip = new JSZip();
      zip.file('wave/SKILL.md', '---\nname: wave\ndescription: Wave back\n---\nWave.\n');
      await page.getByLabel('Upload zip').setInputFiles({ name: 'skills.zip', mimeType: 'application/zip', buffer: await zip.generateAsync({ type: 'nodebuffer' }) });
      await page.getByText('Upload: created wave.').waitFor();

      await page.getByRole('button', { name: 'Copy to…' }).first().click();
      await page.getByRole('form', { name: 'Copy skill greet' }).getByRole('button', { name: 'Copy' }).click();
      await page.getByText('Copied greet to agent helper').waitFor();
      await page.getByLabel('Scope').selectOption('helper');
      await page.getByRole('heading', { name: 'greet', level: 2 }).waitFor();

      await nav('Model providers').click();
      await page.getByRole('button', { name: 'Test connection' }).click();
      await page.getByText(/Connected in \d+ ms; models: fake-model/).waitFor();
      await nav('Settings').click();
      await page.getByRole('heading', { name: 'Server configuration' }).waitFor();
      expect(await page.getByLabel('Default model provider').inputValue()).toBe('fake');
      // The allow-lists: a bad entry and a list that would lock this browser out are refused, a good one is kept.
      const lists = page.getByRole('form', { name: 'Address allow-lists' });
      const saveLists = () => lists.getByRole('button', { name: 'Save allow-lists' }).click();
      await lists.getByLabel('Chat addresses').fill('10.0.0.0/8\nnot-a-cidr');
      await saveLists();
      // The sentence, then the gateway's text behind the closed "Technical detail" disclosure.
      await lists.getByText('not a CIDR or address: "not-a-cidr"').first().waitFor();
      await lists.getByLabel('Chat addresses').fill('');
      await lists.getByLabel('Management addresses').fill('192.0.2.0/24');
      await saveLists();
      await lists.getByText(/would lock you out of management/).first().waitFor();
      await lists.getByLabel('Management addresses').fill('127.0.0.0/8\n::1, 192.0.2.0/24');
      await saveLists();
      await page.getByText('Address allow-lists saved').waitFor();
      expect(((await apiAs('GET', '/config')).json as { security: { allowFrom: unknown } }).security.allowFrom).toEqual({ management: ['127.0.0.0/8', '::1', '192.0.2.0/24'], chat: [] });
      expect((await apiAs('PUT', '/config', { security: { allowFrom: { management: [] } } })).status).toBe(200);
    }));

  it('is usable on a 390-pixel phone screen', async () => {
    const phone = await t.browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    phone.on('request', (r) => t.requested.push(r.url()));
    const small = await phone.newPage();
    try {
      await step('phone', async () => {
        try {
          // A fresh tab: log in again (the token lives in this tab's sessionStorage).
          await small.goto(`${base}/agents`);
          await small.getByLabel('Password').fill('admin');
          await small.getByRole('button', { name: 'Sign in' }).click();
          await small.waitForURL(`${base}/agents`);
          await small.getByRole('link', { name: 'Helper' }).waitFor();
          const overflow = () => small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          expect(await overflow()).toBeLessThanOrEqual(0);
          // The menu is a drawer behind a button.
          const chatLink = small.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Chat', exact: true });
          expect(await chatLink.isVisible()).toBe(false);
          await small.getByRole('button', { name: 'Menu' }).click();
          await chatLink.click();
          await small.waitForURL(/\/chat\/helper\/web-/);
          await small.locator('.turn-assistant .md').filter({ hasText: 'hello from AGENTS.md' }).waitFor();
          expect(await small.getByLabel('Message').isVisible()).toBe(true);
          expect(await overflow()).toBeLessThanOrEqual(0);
          await small.getByRole('button', { name: 'Conversations' }).click();
          await small.getByRole('button', { name: 'New conversation' }).waitFor();
          // The generated agent settings fit too (one column).
          await small.goto(`${base}/agents/helper`);
          await small.getByRole('group', { name: 'Model parameters' }).waitFor();
          expect(await overflow()).toBeLessThanOrEqual(0);
        } catch (err) {
          // The step's own screenshot is of the desktop page: this one shows the phone.
          await small.screenshot({ path: path.join(repoRoot, 'test-output', 'web', 'web-ui-phone-small.png'), fullPage: true }).catch(() => {});
          throw err;
        }
      });
    } finally {
      await phone.close();
    }
  });

  it('never sends a request to a host other than the gateway, and logs no script or CSP error', async () => {
    expect(t.problems).toEqual([]);
    expect(t.requested.length).toBeGreaterThan(10);
    const elsewhere = t.requested.filter((u) => !u.startsWith(`${base}/`) && !u.startsWith('data:') && !u.startsWith('blob:'));
    expect(elsewhere).toEqual([]);
  });
});
