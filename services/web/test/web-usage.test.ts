import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { freePort, repoRoot, spawnService, startFakeModel, type FakeModel, type SpawnedService } from '@agentry/testing';

/**
 * The Usage page (issue 26 item 2), in Chromium against an embedded gateway and worker with the
 * fake model: after chats by an admin and by a user, the admin sees tokens per day drawn as a
 * chart and the totals by agent, provider and who asked; the user sees only its own. Leaves
 * test-output/web/web-usage.png and web-usage-user.png.
 */

const CHROMIUM = '/usr/bin/chromium';
const ADMIN_PASSWORD = 'admin-password-for-usage';
const BOB_PASSWORD = 'bob-password-for-usage';
const outDir = path.join(repoRoot, 'test-output', 'web');
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-web-usage-'));
let service: SpawnedService | undefined;
let fake: FakeModel | undefined;
let browser: Browser | undefined;
let page: Page;
let base: string;
const problems: string[] = [];

async function token(username: string, password: string): Promise<string> {
  const res = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) });
  return ((await res.json()) as { token: string }).token;
}

async function call(method: string, url: string, jwt: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}/api/v1${url}`, {
    method,
    headers: { authorization: `Bearer ${jwt}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text() };
}

async function chat(jwt: string, prompt: number, completion: number): Promise<void> {
  fake!.script({ text: 'counted', usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
  const res = await call('POST', '/chat/completions', jwt, { model: 'metered', messages: [{ role: 'user', content: 'count me' }] });
  expect(res.status, res.text).toBe(200);
}

async function signIn(username: string, password: string): Promise<void> {
  await page.context().clearCookies();
  await page.goto(`${base}/login?next=/usage`);
  await page.evaluate(() => localStorage.clear());
  await page.goto(`${base}/login?next=/usage`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}/usage`);
}

async function shot(name: string): Promise<void> {
  fs.mkdirSync(outDir, { recursive: true });
  await page.screenshot({ path: path.join(outDir, `${name}.png`), fullPage: true });
}

describe('the Usage page, in Chromium', () => {
  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is required for the browser tests`);
    execFileSync(process.execPath, [path.join(repoRoot, 'services/web/scripts/ensure-build.mjs')], { stdio: 'inherit' });
    fake = await startFakeModel({ apiKey: 'sk-fake-key-usage-page' });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    fs.writeFileSync(
      path.join(cwd, 'config.yaml'),
      [
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", api_key: "sk-fake-key-usage-page", model: fake-model}}`,
        'security:',
        '  requireAuth: true',
        '  users:',
        `    admin: "${ADMIN_PASSWORD}"`,
        `    bob: "${BOB_PASSWORD}"`,
      ].join('\n'),
    );
    service = spawnService('services/standalone/src/main.ts', { cwd, env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: 'web-usage-master-key-0123456789abcdef' } });
    const [launched] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] }),
      service.waitForLine(/gateway listening/, 60_000),
    ]);
    browser = launched;
    const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
    });
    const admin = await token('admin', ADMIN_PASSWORD);
    const created = await call('POST', '/agents', admin, {
      ruleChain: { id: 'metered', name: 'Metered' },
      metadata: { nodes: [{ id: 'answer', type: 'ai/agent', configuration: { systemPrompt: 'Answer briefly.' } }], connections: [] },
    });
    expect(created.status, created.text).toBe(201);
    await chat(admin, 1000, 200);
    await chat(admin, 500, 100);
    await chat(await token('bob', BOB_PASSWORD), 40, 2);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('an admin sees tokens per day as a chart and the totals by agent, provider and who asked', async () => {
    await signIn('admin', ADMIN_PASSWORD);
    const chart = page.getByRole('region', { name: 'Tokens per day' });
    await chart.getByText('1,842 tokens in this period.').waitFor();
    // uPlot drew its canvas and its legend with both series.
    expect(await chart.locator('.uplot canvas').count()).toBe(1);
    expect(await chart.locator('.u-legend').innerText()).toMatch(/Prompt tokens[\s\S]*Completion tokens/);
    const row = (section: string, key: string) => page.getByRole('region', { name: section }).getByRole('row').filter({ hasText: key });
    expect((await row('By agent', 'metered').innerText()).split('\t')).toEqual(['metered', '1,540', '302', '1,842', '3']);
    expect((await row('By provider', 'fake').innerText()).split('\t')).toEqual(['fake', '1,540', '302', '1,842', '3']);
    expect((await row('By who asked', 'admin (user)').innerText()).split('\t')).toEqual(['admin (user)', '1,500', '300', '1,800', '2']);
    expect((await row('By who asked', 'bob (user)').innerText()).split('\t')).toEqual(['bob (user)', '40', '2', '42', '1']);
    await page.getByLabel('Period').selectOption('7');
    await chart.getByText('1,842 tokens in this period.').waitFor();
    await shot('web-usage');
    expect(problems).toEqual([]);
  });

  it('a user sees only its own usage, without the by-principal table', async () => {
    await signIn('bob', BOB_PASSWORD);
    const chart = page.getByRole('region', { name: 'Tokens per day' });
    await chart.getByText('42 tokens in this period.').waitFor();
    expect(await page.getByRole('region', { name: 'By who asked' }).count()).toBe(0);
    expect((await page.getByRole('region', { name: 'By agent' }).getByRole('row').filter({ hasText: 'metered' }).innerText()).split('\t')).toEqual(['metered', '40', '2', '42', '1']);
    await shot('web-usage-user');
    expect(problems).toEqual([]);
  });
});
