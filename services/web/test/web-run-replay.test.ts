import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { freePort, repoRoot, spawnService, startFakeModel, type FakeModel, type SpawnedService } from '@agentry/testing';

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

const CHROMIUM = '/usr/bin/chromium';
const ADMIN_PASSWORD = 'admin-password-for-run-replay';
const BOB_PASSWORD = 'bob-password-for-run-replay';
const outDir = path.join(repoRoot, 'test-output', 'web');
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-web-replay-'));
let service: SpawnedService | undefined;
let fake: FakeModel | undefined;
let browser: Browser | undefined;
let page: Page;
let base: string;
const problems: string[] = [];

async function step(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    fs.mkdirSync(outDir, { recursive: true });
    await page.screenshot({ path: path.join(outDir, `web-run-replay-${name}.png`), fullPage: true }).catch(() => {});
    throw err;
  }
}

async function api(method: string, url: string, body?: unknown): Promise<{ status: number; text: string }> {
  const login = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
  const { token } = (await login.json()) as { token: string };
  const res = await fetch(`${base}/api/v1${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text() };
}

async function signIn(username: string, password: string, next: string): Promise<void> {
  await page.goto(`${base}/login?next=${next}`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}${next}`);
}

const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);

describe('a real run replayed on the canvas, in Chromium', () => {
  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is required for the browser tests`);
    for (const f of fs.existsSync(outDir) ? fs.readdirSync(outDir) : []) if (f.startsWith('web-run-replay')) fs.rmSync(path.join(outDir, f));
    execFileSync(process.execPath, [path.join(repoRoot, 'services/web/scripts/ensure-build.mjs')], { stdio: 'inherit' });
    fake = await startFakeModel({ apiKey: 'sk-fake-key-run-replay' });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "sk-fake-key-run-replay", model: fake-model}}`,
        'security:',
        '  requireAuth: true',
        '  users:',
        `    admin: "${ADMIN_PASSWORD}"`,
        `    bob: "${BOB_PASSWORD}"`,
      ].join('\n'),
    );
    service = spawnService('services/standalone/src/main.ts', { cwd, env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: 'web-run-replay-master-key-0123456789abcdef' } });
    const [launched] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] }),
      service.waitForLine(/gateway listening/, 60_000),
    ]);
    browser = launched;
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
    });
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

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

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
      fs.mkdirSync(outDir, { recursive: true });
      await page.screenshot({ path: path.join(outDir, 'web-run-replay.png'), fullPage: true });
      expect(problems).toEqual([]);
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
      await page.screenshot({ path: path.join(outDir, 'web-run-replay-not-owner.png'), fullPage: true });
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
      await page.screenshot({ path: path.join(outDir, 'web-run-replay-settings-user.png'), fullPage: true });
      expect(problems).toEqual([]);
    }));
});
