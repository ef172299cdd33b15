import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { freePort, repoRoot, spawnService, startFakeModel, type FakeModel, type SpawnedService } from '@agentry/testing';

const CHROMIUM = '/usr/bin/chromium';
const OUT_DIR = path.join(repoRoot, 'test-output', 'web');

/**
 * What a browser suite works with: an embedded Agentry (gateway and worker in one spawned
 * process, the built UI, login required unless `bare`) on the fake model, and one Chromium page.
 * Filled in by the `beforeAll` that `browserTarget` registers.
 */
export interface BrowserTarget {
  base: string;
  /** For a second login beside `page` (its own context or page). */
  browser: Browser;
  page: Page;
  context: BrowserContext;
  fake: FakeModel;
  /** Page errors and console errors (failed resource loads aside): a suite expects none. */
  problems: string[];
  /** Every URL the page asked for (to prove nothing goes to another host). */
  requested: string[];
  /** A REST call under /api/v1 as `username` (default the first user). */
  api(method: string, url: string, body?: unknown, username?: string): Promise<{ status: number; text: string }>;
  signIn(username: string, next: string): Promise<void>;
  /** Writes test-output/web/<name>.png. */
  shot(name: string): Promise<void>;
  /** Runs a step; a failure leaves test-output/web/<suite>-<step>.png before it is rethrown. */
  step(name: string, fn: () => Promise<void>): Promise<void>;
}

/**
 * Registers the hooks that start (and stop) a browser target for the enclosing describe. Its
 * screenshots are named `<name>*.png` and an earlier run's are removed first, so none can
 * mislead; after a failed `step`, the server's last output is printed.
 */
export function browserTarget(opts: {
  name: string;
  /**
   * `security.users` (password by name). Without it the file names none, and the server seeds
   * admin/admin as `npm start` does (the suite sees the default-password warning).
   */
  users?: Record<string, string>;
  /** No config.yaml at all, as a fresh `npm start`: an open server with no provider; `fake` is started for the suite to add. */
  bare?: boolean;
  viewport?: { width: number; height: number };
  timeoutMs?: number;
  /** More lines of config.yaml (top-level keys the base does not set, such as `server`). */
  config?: string[];
}): BrowserTarget {
  const t = { problems: [] as string[], requested: [] as string[] } as unknown as BrowserTarget;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), `agentry-${opts.name}-`));
  const logins = opts.users ?? { admin: 'admin' };
  const [firstUser] = Object.keys(logins);
  let failed = false;
  let service: SpawnedService | undefined;
  let browser: Browser | undefined;

  const token = async (username: string) => {
    const res = await fetch(`${t.base}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password: logins[username] }) });
    return ((await res.json()) as { token: string }).token;
  };
  t.api = async (method, url, body, username = firstUser!) => {
    const res = await fetch(`${t.base}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${await token(username)}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, text: await res.text() };
  };
  t.signIn = async (username, next) => {
    await t.page.goto(`${t.base}/login?next=${next}`);
    await t.page.evaluate(() => localStorage.clear());
    await t.page.goto(`${t.base}/login?next=${next}`);
    await t.page.getByLabel('Username').fill(username);
    await t.page.getByLabel('Password').fill(logins[username]!);
    await t.page.getByRole('button', { name: 'Sign in' }).click();
    await t.page.waitForURL(`${t.base}${next}`);
  };
  t.shot = async (name) => {
    fs.mkdirSync(OUT_DIR, { recursive: true });
    await t.page.screenshot({ path: path.join(OUT_DIR, `${name}.png`), fullPage: true });
  };
  t.step = async (name, fn) => {
    try {
      await fn();
    } catch (err) {
      failed = true;
      await t.shot(`${opts.name}-${name}`).catch(() => {});
      throw err;
    }
  };

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is required for the browser tests`);
    for (const f of fs.existsSync(OUT_DIR) ? fs.readdirSync(OUT_DIR) : []) if (f.startsWith(opts.name)) fs.rmSync(path.join(OUT_DIR, f));
    execFileSync(process.execPath, [path.join(repoRoot, 'services/web/scripts/ensure-build.mjs')], { stdio: 'inherit' });
    const providerKey = `sk-fake-key-${opts.name}`;
    t.fake = await startFakeModel(opts.bare ? {} : { apiKey: providerKey });
    const port = await freePort();
    t.base = `http://127.0.0.1:${port}`;
    if (!opts.bare) {
      const users = opts.users ? ['  users:', ...Object.entries(opts.users).map(([name, password]) => `    ${name}: "${password}"`)] : [];
      const config = ['models:', '  default_provider: fake', `  providers: {fake: {base_url: "${t.fake.url}", api_key: "${providerKey}", model: fake-model}}`, 'security:', '  requireAuth: true', ...users, ...(opts.config ?? [])];
      fs.writeFileSync(path.join(cwd, 'config.yaml'), config.join('\n'));
    }
    service = spawnService('services/standalone/src/main.ts', { cwd, env: { PORT: String(port), HOST: '127.0.0.1', AGENTRY_SECRET_KEY: `${opts.name}-master-key-0123456789abcdef` } });
    const [launched] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] }),
      service.waitForLine(/gateway listening/, 150_000),
    ]);
    browser = launched;
    t.browser = launched;
    t.context = await browser.newContext({ viewport: opts.viewport ?? { width: 1400, height: 900 } });
    t.context.setDefaultTimeout(opts.timeoutMs ?? 15_000);
    t.context.on('request', (r) => t.requested.push(r.url()));
    t.page = await t.context.newPage();
    t.page.on('pageerror', (err) => t.problems.push(`pageerror: ${err.message}`));
    t.page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) t.problems.push(m.text());
    });
  }, 240_000);

  afterAll(async () => {
    if (failed) console.error(`[${opts.name}] the server's last output:\n${service?.output().slice(-6000)}`);
    await browser?.close();
    await service?.stop();
    await t.fake?.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  });
  return t;
}
