import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  describeWithServers,
  freePort,
  skipLoudly,
  startFakeModel,
  startFakeTelegram,
  startTestCluster,
  waitFor,
  type FakeModel,
  type FakePlatform,
  type FakeReply,
  type FakeRequest,
  type TestCluster,
} from '@agentry/testing';

/**
 * deploy/observability, tested for real with Debian's `prometheus` package (`.ci/run` installs
 * it): `promtool` checks and unit-tests the alert rules, and a real Prometheus scrapes a running
 * cluster (gateway, agent-worker, scheduler, channel-connector as processes) while the test
 * makes chats, a failing chat, channel messages and cron fires; then every panel query of the
 * metrics dashboard must return data and every alert rule must evaluate without error. Without
 * the binaries the suite is skipped loudly, and fails under CI=true.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIR = path.join(root, 'deploy/observability');
const RULES = path.join(DIR, 'agentry-alerts.rules.yml');
const RULE_TESTS = path.join(DIR, 'agentry-alerts.test.yml');
const PROVIDER_KEY = 'sk-observability-provider-0123456789';
const API_KEY = 'sk-observability-account-0123456789';
/** Chats the fake model answers specially, by their text: a cron job's runs share the fake, so a scripted queue could go to them. */
const FAILING = 'the provider fails';
const COUNTED = 'count me';
const USAGE = { prompt_tokens: 1234, completion_tokens: 56 };

function replyTo(req: FakeRequest): FakeReply {
  const last = req.body.messages.filter((m) => m.role === 'user').at(-1)?.content;
  if (last === FAILING) return { status: 500 };
  if (last === COUNTED) return { text: 'counted', usage: USAGE };
  return { text: `answer: ${String(last)}` };
}

interface Target {
  expr: string;
  refId: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query?: string }> };
}

const readDashboard = (file: string): Dashboard => JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')) as Dashboard;
const queriesOf = (d: Dashboard) => d.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, datasource: p.datasource?.type, expr: t.expr })));

/** Grafana's variables as a test range has them: rates over a minute (Prometheus scrapes every second here), the range five minutes. */
function substitute(expr: string): string {
  return expr.replaceAll('$__rate_interval', '1m').replaceAll('$__interval', '5s').replaceAll('$__range', '5m');
}

function binary(name: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}
const PROMTOOL = binary('promtool');
const PROMETHEUS = binary('prometheus');
const missing = [PROMTOOL ? '' : 'promtool', PROMETHEUS ? '' : 'prometheus'].filter(Boolean);
const describeWithPrometheus = (name: string, fn: () => void) =>
  missing.length ? skipLoudly(name, `${missing.join(' and ')} not installed (apt-get install prometheus)`, fn) : describe(name, fn);

describe('deploy/observability files', () => {
  it('the logs dashboard asks Loki for lines the services really write, with fields they log', () => {
    const logs = readDashboard('agentry-logs.dashboard.json');
    const queries = queriesOf(logs);
    expect(queries.length).toBeGreaterThan(5);
    const sources = sourceTexts();
    for (const q of queries) {
      expect(q.datasource, q.panel).toBe('loki');
      expect(q.expr, q.panel).toMatch(/\{app="agentry"(, service="[a-z-]+")?\} \| json/);
      for (const [, msg] of q.expr.matchAll(/msg="([^"]+)"/g)) {
        expect(sources.includes(`'${msg}'`), `${q.panel}: no service logs "${msg}"`).toBe(true);
      }
      for (const [, field] of q.expr.matchAll(/\| (\w+) [><]/g)) {
        expect(sources.includes(`${field}`), `${q.panel}: no service logs the field ${field}`).toBe(true);
      }
      for (const [, service] of q.expr.matchAll(/service="([^"]+)"/g)) {
        expect(fs.existsSync(path.join(root, 'services', service!)), `${q.panel}: no service ${service}`).toBe(true);
      }
    }
    expect(logs.templating.list.map((v) => v.name)).toEqual(expect.arrayContaining(['datasource', 'runId']));
  });

  it("docs/operations.md's alerts table is the rules file: same alerts, expressions and durations", () => {
    const docs = fs.readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
    const table = docs.slice(docs.indexOf('\n## Alerts\n'));
    const documented = [...table.matchAll(/^\| `(Agentry\w+)` \| `(.+?)` \|\s*(\w*)\s*\|/gm)].map(([, alert, expr, dur]) => ({ alert, expr: expr!.replaceAll('\\|', '|'), for: dur || undefined }));
    const rules = (parseYaml(fs.readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string; for?: string }> }> }).groups.flatMap((g) => g.rules);
    expect(documented).toEqual(rules.map((r) => ({ alert: r.alert, expr: r.expr, for: r.for })));
  });

  it.each(['agentry-metrics.dashboard.json', 'agentry-logs.dashboard.json'])('%s lays its panels out on the 24-column grid without overlaps, ids unique', (file) => {
    const d = readDashboard(file);
    expect(new Set(d.panels.map((p) => p.id)).size).toBe(d.panels.length);
    const cells = new Map<string, string>();
    for (const p of d.panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
        expect(cells.get(`${x},${y}`), `${p.title} overlaps`).toBeUndefined();
        cells.set(`${x},${y}`, p.title);
      }
    }
  });

  it('the metrics dashboard queries Prometheus through its datasource variable, one query per target', () => {
    const metrics = readDashboard('agentry-metrics.dashboard.json');
    expect(metrics.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    const panels = metrics.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(20);
    for (const p of panels) {
      expect(p.datasource?.type, p.title).toBe('prometheus');
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
    }
  });
});

/** The services' sources (and fastify's, whose `request completed` line the gateway writes). */
function sourceTexts(): string {
  const texts: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && e.name !== 'node_modules' && e.name !== 'test') walk(p);
      else if (e.isFile() && /\.(ts|js)$/.test(e.name)) texts.push(fs.readFileSync(p, 'utf8'));
    }
  };
  for (const base of ['libs', 'services']) for (const pkg of fs.readdirSync(path.join(root, base))) {
    const src = path.join(root, base, pkg, 'src');
    if (fs.existsSync(src)) walk(src);
  }
  walk(path.join(root, 'node_modules/fastify/lib'));
  return texts.join('\n');
}

describeWithPrometheus('alert rules under promtool', () => {
  it('promtool check rules passes on the rules file', () => {
    const out = spawnSync(PROMTOOL!, ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(out.status, out.stdout + out.stderr).toBe(0);
    expect(out.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it("the rules' unit tests pass (promtool test rules): each alert fires when it should and not on healthy traffic", () => {
    const out = spawnSync(PROMTOOL!, ['test', 'rules', RULE_TESTS], { encoding: 'utf8', cwd: DIR });
    expect(out.status, out.stdout + out.stderr).toBe(0);
  });
});

describeWithPrometheus('dashboards and alerts against a real Prometheus scraping a cluster', () => {
  describeWithServers('cluster mode', () => {
    let model: FakeModel;
    let tg: FakePlatform;
    let cluster: TestCluster;
    let prom: Prometheus;
    let startedAt: number;

    beforeAll(async () => {
      model = await startFakeModel({ apiKey: PROVIDER_KEY, defaultReply: replyTo });
      tg = await startFakeTelegram();
      cluster = await startTestCluster({
        workers: 1,
        schedulers: 1,
        connectors: 1,
        configLines: [
          // A failed model call fails at once (no retries), so the test sees a provider error quickly.
          'reliability: {provider_retries: 0}',
          // The dashboard's per-agent panels and the test below read the agent label (off by default).
          'metrics: {agent_label: true}',
          'models:',
          '  default_provider: fake',
          `  providers: {fake: {base_url: "${model.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`,
          `channels: {api: {accounts: {obs: {name: Observability, api_key: "${API_KEY}"}}}}`,
        ],
      });
      const { local } = cluster;
      const targets = [
        ...local.gatewayUrls.map((u) => `${u}/metrics`),
        ...local.processes.filter((p) => !local.byRole.gateway.includes(p)).map((p) => local.readyUrl(p).replace(/\/ready$/, '/metrics')),
      ];
      expect(targets).toHaveLength(4);
      startedAt = Date.now() / 1000;
      prom = await startPrometheus(targets);
      await makeTraffic(cluster.baseURL, tg);
    }, 180_000);

    afterAll(async () => {
      await prom?.stop();
      await cluster?.stop();
      await tg?.close();
      await model?.close();
    });

    it('every panel query of the metrics dashboard returns data after a few chats, a failed one, channel messages and cron fires', async () => {
      const queries = queriesOf(readDashboard('agentry-metrics.dashboard.json'));
      const empty = async () => {
        const end = Date.now() / 1000;
        const results = await Promise.all(queries.map(async (q) => ({ q, series: await prom.range(substitute(q.expr), startedAt, end) })));
        return results.filter((r) => !r.series.some((s) => s.values.some(([, v]) => Number.isFinite(Number(v))))).map((r) => `${r.q.panel}: ${r.q.expr}`);
      };
      // The last scrapes may lag the traffic by a second or two.
      let left = await empty();
      const deadline = Date.now() + 20_000;
      while (left.length && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 1000));
        left = await empty();
      }
      expect(left).toEqual([]);
      // The one failed run shows as a rate although it was the first since the worker started
      // (its series began at 0), and so does the first failed channel send.
      const peak = async (expr: string) => Math.max(0, ...(await prom.range(expr, startedAt, Date.now() / 1000)).flatMap((s) => s.values.map(([, v]) => Number(v))).filter(Number.isFinite));
      expect(await peak('sum(rate(agentry_runs_total{status="failed"}[1m]))')).toBeGreaterThan(0);
      expect(await peak('sum(rate(agentry_channel_sends_total{status="failed"}[1m]))')).toBeGreaterThan(0);
    }, 60_000);

    it('agentry_tokens_total counts the usage each model call reported, by agent, provider and kind', async () => {
      const res = await chat(cluster.baseURL, 'tokens', COUNTED);
      expect(res.status).toBe(200);
      const worker = cluster.local.readyUrl(cluster.local.byRole.worker[0]!).replace(/\/ready$/, '/metrics');
      const text = await (await fetch(worker)).text();
      const value = (kind: string) => Number(new RegExp(`^agentry_tokens_total\\{agent="tokens",provider="fake",kind="${kind}"[^}]*\\} (\\d+)`, 'm').exec(text)?.[1]);
      expect([value('prompt'), value('completion')]).toEqual([USAGE.prompt_tokens, USAGE.completion_tokens]);
    });

    it('every alert rule is loaded by Prometheus and evaluates without error; failed channel sends fire their alert', async () => {
      const fileRules = (parseYaml(fs.readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> }).groups.flatMap((g) => g.rules);
      const loaded = await waitFor(async () => {
        const rules = await prom.rules();
        return rules.length === fileRules.length && rules.every((r) => r.health !== 'unknown') ? rules : undefined;
      }, 20_000, 500);
      expect(loaded.filter((r) => r.health !== 'ok' || r.lastError)).toEqual([]);
      expect(loaded.map((r) => r.name).sort()).toEqual(fileRules.map((r) => r.alert).sort());
      for (const rule of fileRules) {
        const answer = await prom.api(`/api/v1/query?query=${encodeURIComponent(rule.expr)}`);
        expect(answer.status, `${rule.alert}: ${JSON.stringify(answer)}`).toBe('success');
      }
      // A send refused with 403 (the first failure since the connector started) fires it at once: it has no `for`.
      const sendsFailing = async () => (await prom.rules()).find((r) => r.name === 'AgentryChannelSendsFailing');
      await waitFor(async () => (await sendsFailing())?.state === 'firing', 10_000, 500).catch(() => undefined);
      const failed = await prom.api(`/api/v1/query?query=${encodeURIComponent('agentry_channel_sends_total')}`);
      expect(await sendsFailing(), JSON.stringify(failed)).toMatchObject({ state: 'firing', alerts: [{ labels: { platform: 'chat_d', severity: 'warning' } }] });
    });
  });
});

async function api(base: string, method: string, p: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, text: await res.text() };
}

async function chat(base: string, agent: string, content: string, stream = false): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: agent, stream, messages: [{ role: 'user', content }] }),
  });
  return { status: res.status, text: await res.text() };
}

/**
 * What the dashboard shows, caused for real: agents, chats (streamed and not, spread over a few
 * scrapes so rates are not zero), a chat whose provider fails, Telegram messages answered through
 * the connector (one retried after a 500, one refused with 403), and a cron job firing every second.
 */
async function makeTraffic(base: string, tg: FakePlatform): Promise<void> {
  const agent = (id: string) => ({
    ruleChain: { id, name: id },
    metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', systemPrompt: 'Be brief.' } }], connections: [] },
  });
  for (const id of ['obs', 'tokens', 'ticker']) {
    const created = await api(base, 'POST', '/agents', agent(id));
    expect(created.status, created.text).toBe(201);
  }
  const account = await api(base, 'POST', '/channels/chat_d/accounts', { id: 'tg', name: 'Bot', dm_policy: 'allow', group_policy: 'disabled', ...tg.account, binding: { agentId: 'obs' } });
  expect(account.status, account.text).toBe(201);
  const cron = await api(base, 'POST', '/cron', { name: 'Every second', schedule: '* * * * * *', message: 'tick', target: 'ticker' });
  expect(cron.status, cron.text).toBe(201);

  for (let i = 0; i < 4; i++) {
    const res = await chat(base, 'obs', `hello ${i}`, i % 2 === 0);
    expect(res.status, res.text).toBe(200);
    await new Promise((r) => setTimeout(r, 1200));
  }
  const failing = await chat(base, 'obs', FAILING);
  expect(failing.status, failing.text).toBe(502);

  let seq = 0;
  const dm = async (text: string) => {
    const { headers, body } = tg.inbound({ eventId: `e${++seq}`, chatId: `chat${seq}`, chatType: 'dm', senderId: `u${seq}`, text });
    expect((await fetch(`${base}/channels/chat_d/accounts/tg/events`, { method: 'POST', headers, body })).status).toBe(200);
  };
  await dm('first');
  await waitFor(async () => tg.sent.length >= 1, 20_000);
  tg.failNext(1, { status: 500 });
  await dm('retried');
  await waitFor(async () => tg.sent.length >= 2, 20_000);
  tg.failNext(1, { status: 403, body: { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' } });
  await dm('refused');
  await new Promise((r) => setTimeout(r, 2000));
}

interface PromRule {
  name: string;
  health: string;
  state?: string;
  lastError?: string;
  alerts?: Array<{ labels: Record<string, string> }>;
}

interface Prometheus {
  api(p: string): Promise<{ status: string; data?: unknown; error?: string }>;
  range(query: string, start: number, end: number): Promise<Array<{ metric: Record<string, string>; values: Array<[number, string]> }>>;
  rules(): Promise<PromRule[]>;
  stop(): Promise<void>;
}

/** Debian's prometheus on loopback: a free port, a temp data dir, 1 s scrapes of the given /metrics URLs, the alert rules loaded. */
async function startPrometheus(metricsUrls: string[]): Promise<Prometheus> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-prometheus-'));
  const targets = metricsUrls.map((u) => new URL(u));
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
    rule_files: [RULES],
    scrape_configs: targets.map((u, i) => ({ job_name: `agentry-${i}`, metrics_path: u.pathname, static_configs: [{ targets: [u.host] }] })),
  };
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), JSON.stringify(config));
  const port = await freePort();
  let output = '';
  const proc: ChildProcess = spawn(
    PROMETHEUS!,
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  proc.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (proc.exitCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const call = async (p: string) => (await (await fetch(`${base}${p}`)).json()) as { status: string; data?: unknown; error?: string };
  try {
    await waitFor(async () => proc.exitCode === null && (await fetch(`${base}/-/ready`).then((r) => r.ok, () => false)), 30_000, 200);
    // Every target scraped once and up before the traffic starts.
    await waitFor(async () => {
      const t = (await call('/api/v1/targets')).data as { activeTargets: Array<{ health: string }> };
      return t.activeTargets.length === targets.length && t.activeTargets.every((a) => a.health === 'up');
    }, 30_000, 250);
  } catch (err) {
    await stop();
    throw new Error(`prometheus did not come up or scrape: ${(err as Error).message}\n${output}`);
  }
  return {
    api: call,
    range: async (query, start, end) => {
      const answer = await call(`/api/v1/query_range?query=${encodeURIComponent(query)}&start=${start}&end=${end}&step=1`);
      if (answer.status !== 'success') throw new Error(`${query}: ${answer.error}`);
      return (answer.data as { result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> }).result;
    },
    rules: async () => ((await call('/api/v1/rules')).data as { groups: Array<{ rules: PromRule[] }> }).groups.flatMap((g) => g.rules),
    stop,
  };
}
