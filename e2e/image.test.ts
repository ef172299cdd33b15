/**
 * The image (deploy/Dockerfile), built and run in containers with podman or docker, whichever
 * engine works here (docs/deploying.md, "What is verified"):
 *
 * 1. the cluster on the host network against the test Postgres (a private database) and Redis (a
 *    private prefix): `migrate`, two gateways, two agent-workers, a scheduler and a
 *    channel-connector, each container locked down the way the Kubernetes manifests lock pods
 *    down; the official `openai` SDK through both gateways (stream, non-stream, tool calls), a
 *    cron fire, an answer sent out to a fake Telegram; the `bash` tool in that container; then
 *    SIGTERM to each, which must end `clean` within server.shutdown_timeout_ms;
 * 2. every Deployment and the migration Job of the rendered overlays (dev, prod) run as their
 *    manifest says: args, env from the rendered ConfigMap/Secret (test values), runAsUser,
 *    readOnlyRootFilesystem with the declared emptyDir mounts as tmpfs, capabilities dropped,
 *    no-new-privileges; each declared probe asked on its declared port and path.
 *
 * Without a working engine the suite is skipped loudly, and fails under CI=true.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  cleanupRedisPrefix,
  createTestDatabase,
  describeWithServers,
  freePort,
  redisUrl,
  skipLoudly,
  startFakeModel,
  startFakeTelegram,
  uniqueRedisPrefix,
  waitFor,
  type FakeModel,
  type FakePlatform,
  type TestDatabase,
} from '@agentry/testing';
import { buildImage, detectCompose, detectEngine, forceRemove, repoRoot, runContainer, stopContainer, streamedChat, waitForHttp, type Container, type Engine } from './containers.js';
import { arr, at, containersOf, isObj, obj, podSpec, renderKustomization, str, type Obj, type Resource } from './kustomize.js';

const IMAGE = process.env.AGENTRY_TEST_IMAGE ?? 'localhost/agentry:test';
const SIZE_BUDGET_BYTES = 300 * 1000 * 1000;
const SHUTDOWN_TIMEOUT_MS = 10_000;
const MASTER_KEY = 'image-test-master-key-0123456789abcdef';
const API_KEY = 'sk-image-test-key-0123456789abcdef';

// The compose stack's proxy configuration needs no container engine, only nginx.
if (spawnSync('nginx', ['-v']).error) skipLoudly('deploy/nginx.conf', 'nginx is not installed (apt-get install nginx-light)', () => it('needs nginx', () => {}));
else describe('deploy/nginx.conf', () => nginxSuite());

const found = detectEngine();
const TITLE = 'the image in containers';

if ('reason' in found) {
  skipLoudly(TITLE, found.reason, () => {
    it('needs a container engine', () => {});
  });
} else {
  describeWithServers(`${TITLE} (${found.name})`, () => imageSuite(found));
}

/** A folder the container's uid can read, holding `files`, for a read-only bind mount. */
function mountDir(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-image-'));
  fs.chmodSync(dir, 0o755);
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text, { mode: 0o644 });
  return dir;
}

/** A writable tmpfs as Kubernetes mounts an emptyDir: any user may write, programs may run. */
const tmpfsFlag = (e: Engine, mountPath: string, sizeLimit?: string): string[] => {
  const size = sizeLimit ? `,size=${sizeLimit.replace(/i$/, '').toLowerCase()}` : '';
  return ['--tmpfs', `${mountPath}:rw,exec,mode=1777${size}`];
};
/** podman adds writable /tmp, /run, /var/tmp to a --read-only container unless told not to. */
const readOnlyFlags = (e: Engine): string[] => (e.name === 'podman' ? ['--read-only', '--read-only-tmpfs=false'] : ['--read-only']);

function imageSuite(engine: Engine): void {
  let built: { seconds: number; sizeBytes: number };

  beforeAll(() => {
    built = buildImage(engine, IMAGE);
    console.log(`image ${IMAGE}: built in ${built.seconds.toFixed(0)} s, ${(built.sizeBytes / 1e6).toFixed(0)} MB`);
  }, 20 * 60_000);

  it(`is at most ${SIZE_BUDGET_BYTES / 1e6} MB`, () => {
    expect(built.sizeBytes).toBeGreaterThan(0);
    expect(built.sizeBytes).toBeLessThanOrEqual(SIZE_BUDGET_BYTES);
  });

  describe('the cluster on the host network, every container locked down', () => clusterSuite(engine));
  for (const overlay of ['dev', 'prod'] as const) describe(`k8s/overlays/${overlay}: each workload run as its manifest says`, () => manifestSuite(engine, overlay));
  const compose = detectCompose(engine);
  const composeTitle = 'docker-compose.yml with deploy/compose.host-backends.yml';
  if ('reason' in compose) skipLoudly(composeTitle, compose.reason, () => it('needs a compose tool', () => {}));
  else describe(`${composeTitle} (${compose.argv[0]})`, () => composeSuite(compose.argv));
}

// ---------------------------------------------------------------------------------------------

/**
 * The Agentry services of docker-compose.yml, started by the compose tool from the file itself,
 * with the host's Postgres and Redis through the documented override (deploy/compose.host-backends.yml).
 */
function composeSuite(argv: string[]): void {
  const project = `agentry-img-${process.pid}`;
  const files = ['-f', 'docker-compose.yml', '-f', 'deploy/compose.host-backends.yml'];
  const services = ['migrate', 'gateway', 'agent-worker', 'scheduler', 'channel-connector'];
  let db: TestDatabase;
  let env: Record<string, string>;
  const ports: Record<string, number> = {};
  let secretsDir: string;
  // podman-compose echoes each `podman run` with its `-e NAME=value` flags.
  const redact = (text: string) => [env.AGENTRY_DATABASE_URL!].reduce((t, secret) => t.split(secret).join('<redacted>'), text);
  const compose = (args: string[], timeoutMs = 180_000) => {
    const out = spawnSync(argv[0]!, [...argv.slice(1), '-p', project, ...files, ...args], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, ...env },
    });
    if (out.status !== 0) throw new Error(redact(`${argv.join(' ')} ${args.join(' ')}: exit ${out.status}\n${out.stdout}\n${out.stderr}`));
    return out.stdout;
  };

  beforeAll(async () => {
    db = await createTestDatabase({ migrated: false });
    for (const s of services.slice(1)) ports[s] = await freePort();
    // The base file's secrets, as deploy/make-secrets.sh makes them (the Postgres password goes unused).
    secretsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-image-secrets-'));
    const made = spawnSync('sh', ['deploy/make-secrets.sh'], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, AGENTRY_SECRETS_DIR: secretsDir } });
    expect(made.status, made.stderr).toBe(0);
    env = {
      AGENTRY_IMAGE: IMAGE,
      AGENTRY_SECRETS_DIR: secretsDir,
      AGENTRY_DATABASE_URL: db.url,
      AGENTRY_REDIS_URL: redisUrl(),
      AGENTRY_REDIS_PREFIX: uniqueRedisPrefix(),
      AGENTRY_GATEWAY_PORT: String(ports.gateway),
      AGENTRY_WORKER_PORT: String(ports['agent-worker']),
      AGENTRY_SCHEDULER_PORT: String(ports.scheduler),
      AGENTRY_CONNECTOR_PORT: String(ports['channel-connector']),
    };
  });
  afterAll(async () => {
    if (env) {
      try {
        compose(['down', '-v', '-t', '0']);
      } catch (err) {
        console.warn(`compose down: ${(err as Error).message}`);
      }
      // podman-compose 1.0 leaves the project's network behind.
      if (argv[0] === 'podman-compose') spawnSync('podman', ['network', 'rm', '-f', `${project}_default`], { timeout: 30_000 });
    }
    await db?.drop();
    if (env) await cleanupRedisPrefix(redisUrl(), env.AGENTRY_REDIS_PREFIX!);
    if (secretsDir) fs.rmSync(secretsDir, { recursive: true, force: true });
  }, 120_000);

  it('starts migrate and the four services from the compose file; each reports ready; each stops clean', async () => {
    const started = Date.now();
    compose(['up', '-d', ...services]);
    const ready = await Promise.all(services.slice(1).map((s) => waitForHttp(`http://127.0.0.1:${ports[s]}/ready`, started, 90_000)));
    console.log(`compose: ${services.slice(1).map((s, i) => `${s} ready after ${ready[i]} ms`).join(', ')}`);
    // Cluster-mode services never migrate on start (they wait for the schema): ready means the
    // compose file's migrate service ran.
    const gateway = `http://127.0.0.1:${ports.gateway}/api/v1`;
    expect((await fetch(`${gateway}/models`)).status).toBe(401);
    compose(['stop', '-t', '30', ...services.slice(1)], 120_000);
    for (const s of services.slice(1)) {
      const logs = compose(['logs', s]);
      expect(logs, s).toMatch(/"clean":true,"msg":"shutdown complete"/);
    }
  }, 5 * 60_000);
}

// ---------------------------------------------------------------------------------------------

interface Role {
  role: 'gateway' | 'agent-worker' | 'scheduler' | 'channel-connector';
  port: number;
  container?: Container;
  readyMs?: number;
}

function clusterSuite(engine: Engine): void {
  let fake: FakeModel;
  let tg: FakePlatform;
  let db: TestDatabase;
  let prefix: string;
  let configDir: string;
  const roles: Role[] = [];
  const all: Container[] = [];
  let env: Record<string, string>;

  const lockedDown = (): string[] => [
    '--network=host',
    '--user',
    '1000:1000',
    ...readOnlyFlags(engine),
    ...tmpfsFlag(engine, '/tmp', '256Mi'),
    '--cap-drop=ALL',
    '--security-opt=no-new-privileges',
    '-v',
    `${configDir}:/etc/agentry:ro`,
  ];
  const gateways = () => roles.filter((r) => r.role === 'gateway');
  const api = (i: number) => `http://127.0.0.1:${gateways()[i]!.port}/api/v1`;
  const rest = async (i: number, method: string, route: string, body?: unknown) => {
    const res = await fetch(`${api(i)}${route}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
  const workersOutput = () => roles.filter((r) => r.role === 'agent-worker').map((r) => r.container!.output()).join('\n');
  /**
   * Runs a test's chats; when one fails, prints what explains it (a flake included): each
   * gateway's and worker's log and the agent's stored runs, whose status and output tell a lost
   * answer (run succeeded with the whole text) from a short one (the worker's own output).
   */
  const explained = async (agentId: string, chats: () => Promise<void>): Promise<void> => {
    try {
      await chats();
    } catch (err) {
      const runs = await db.handle.db
        .selectFrom('runs')
        .select(['id', 'status', 'output', 'error', 'attempts', 'streamed', 'reply_to', 'created_at', 'finished_at'])
        .where('agent_id', '=', agentId)
        .orderBy('seq')
        .execute()
        .catch((e: unknown) => `unreadable: ${(e as Error).message}`);
      const logs = roles
        .filter((r) => r.role === 'gateway' || r.role === 'agent-worker')
        .map((r) => `----- ${r.role} on port ${r.port} (${r.container!.name})\n${r.container!.output()}`);
      console.error([`----- runs of agent ${agentId}: ${JSON.stringify(runs, null, 1)}`, ...logs].join('\n'));
      throw err;
    }
  };

  beforeAll(async () => {
    fake = await startFakeModel({ defaultReply: (req) => ({ text: `answer: ${String(req.body.messages.at(-1)?.content ?? '')}` }) });
    tg = await startFakeTelegram();
    db = await createTestDatabase({ migrated: false });
    prefix = uniqueRedisPrefix();
    configDir = mountDir({
      'config.yaml': [
        `server: {shutdown_timeout_ms: ${SHUTDOWN_TIMEOUT_MS}}`,
        'models:',
        '  default_provider: fake',
        `  providers: {fake: {base_url: "${fake.url}", model: fake-model}}`,
        `channels: {api: {accounts: {image: {api_key: "${API_KEY}"}}}}`,
      ].join('\n'),
    });
    env = {
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl(),
      REDIS_PREFIX: prefix,
      AGENTRY_SECRET_KEY: MASTER_KEY,
      AGENTRY_CONFIG: '/etc/agentry/config.yaml',
      HOST: '127.0.0.1',
      HEALTH_HOST: '127.0.0.1',
    };

    const migrate = runContainer(engine, { name: 'agentry-migrate', image: IMAGE, args: ['migrate'], env, flags: lockedDown() });
    all.push(migrate);
    expect(await migrate.exited(), migrate.output()).toBe(0);

    for (const role of ['gateway', 'gateway', 'agent-worker', 'agent-worker', 'scheduler', 'channel-connector'] as const) roles.push({ role, port: await freePort() });
    await Promise.all(
      roles.map(async (r) => {
        const portVar = r.role === 'gateway' ? 'PORT' : 'HEALTH_PORT';
        r.container = runContainer(engine, { name: `agentry-${r.role}`, image: IMAGE, args: [r.role], env: { ...env, [portVar]: String(r.port) }, flags: lockedDown() });
        all.push(r.container);
        r.readyMs = await waitForHttp(`http://127.0.0.1:${r.port}/ready`, r.container.startedAt, 90_000);
      }),
    );
    console.log(`cold start to /ready, six containers at once: ${roles.map((r) => `${r.role} ${r.readyMs} ms`).join(', ')}`);

    const agent = (id: string, tools: unknown[]) =>
      rest(0, 'POST', '/agents', {
        ruleChain: { id, name: id },
        metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model', tools } }], connections: [] },
      });
    for (const [id, tools] of [
      ['imgbot', [{ type: 'builtin', name: 'write' }, { type: 'builtin', name: 'read' }]],
      ['shell', [{ type: 'builtin', name: 'bash' }]],
      ['shell_bwrap', [{ type: 'builtin', name: 'bash', config: { sandbox: 'bwrap' } }]],
    ] as const) {
      const res = await agent(id, [...tools]);
      expect(res.status, res.text).toBe(201);
    }
  }, 5 * 60_000);

  afterAll(async () => {
    forceRemove(engine, all);
    await db?.drop();
    await cleanupRedisPrefix(redisUrl(), prefix);
    await fake?.close();
    await tg?.close();
    if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
  });

  it('answers the openai SDK through both gateways, streamed and not', async () => {
    await explained('imgbot', async () => {
      for (const i of [0, 1]) {
        const client = new OpenAI({ baseURL: api(i), apiKey: API_KEY });
        const plain = await client.chat.completions.create({ model: 'imgbot', messages: [{ role: 'user', content: `plain ${i}` }] });
        expect(plain.choices[0]!.message.content).toBe(`answer: plain ${i}`);
        // The finish_reason tells a whole stream (the image's Node once ended the body before the events of its last turn).
        expect(await streamedChat(client, 'imgbot', `streamed ${i}`)).toEqual({ text: `answer: streamed ${i}`, finish: 'stop' });
      }
    });
  });

  it('runs tool calls in a worker container (write, then read back what was written)', async () => {
    const client = new OpenAI({ baseURL: api(1), apiKey: API_KEY });
    const before = fake.requests.length;
    fake.script(
      { toolCalls: [{ id: 'w1', name: 'write', arguments: JSON.stringify({ path: 'notes/image.txt', content: 'written in a container' }) }] },
      { toolCalls: [{ id: 'r1', name: 'read', arguments: JSON.stringify({ path: 'notes/image.txt' }) }] },
      { text: 'read it' },
    );
    await explained('imgbot', async () => {
      const res = await client.chat.completions.create({ model: 'imgbot', messages: [{ role: 'user', content: 'write and read' }] });
      expect(res.choices[0]!.message.content).toBe('read it');
      const last = fake.requests.slice(before).at(-1)!;
      const toolResults = last.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
      expect(toolResults).toHaveLength(2);
      expect(toolResults[1]).toContain('written in a container');
    });
  });

  it('fires a cron job (scheduler container) that a worker container runs', async () => {
    const created = await rest(0, 'POST', '/cron', { name: 'image tick', schedule: '* * * * * *', message: 'cron tick from the image', target: 'imgbot' });
    expect(created.status, created.text).toBe(201);
    await waitFor(async () => fake.requests.some((r) => String(r.body.messages.at(-1)?.content) === 'cron tick from the image'), 20_000, 200);
    expect((await rest(0, 'DELETE', `/cron/${String(created.json.id)}`)).status).toBe(200);
  });

  it('answers an inbound Telegram message through the channel-connector container (outbound send)', async () => {
    const opened = await rest(0, 'POST', '/channels/chat_d/accounts', {
      id: 'tg',
      dm_policy: 'allow',
      group_policy: 'disabled',
      ...tg.account,
      binding: { agentId: 'imgbot' },
    });
    expect(opened.status, opened.text).toBe(201);
    const { headers, body } = tg.inbound({ eventId: 'e1', chatId: '7001', chatType: 'dm', senderId: '7001', text: 'hello from telegram' });
    const posted = await fetch(`${api(1)}/channels/chat_d/accounts/tg/events`, { method: 'POST', headers, body });
    expect(posted.status).toBe(200);
    await waitFor(async () => tg.sent.some((m) => m.chatId === '7001'), 30_000, 100);
    expect(tg.sent.filter((m) => m.chatId === '7001').map((m) => m.text)).toEqual(['answer: hello from telegram']);
  });

  /**
   * Inside the locked-down container, bubblewrap needs user namespaces that a container runtime
   * usually withholds. Either the command runs sandboxed (it sees its own PID 1, not tini, and
   * none of the worker's environment), or the tool refuses: never unsandboxed without a word.
   */
  it('the bash tool runs sandboxed or refuses; never silently unsandboxed', async () => {
    const client = new OpenAI({ baseURL: api(0), apiKey: API_KEY });
    const probe = 'echo "pid1=$(tr "\\0" " " </proc/1/cmdline)"; grep -qa AGENTRY_SECRET_KEY /proc/*/environ 2>/dev/null && echo SECRET-VISIBLE; echo done';
    const outcomes: Record<string, string> = {};
    for (const model of ['shell', 'shell_bwrap']) {
      const before = fake.requests.length;
      fake.script({ toolCalls: [{ id: `b-${model}`, name: 'bash', arguments: JSON.stringify({ command: probe }) }] }, { text: 'ran' });
      await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'run the probe' }] });
      const result = String(fake.requests.slice(before).at(-1)!.body.messages.find((m) => m.role === 'tool')?.content ?? '');
      expect(result, `${model}: no tool result`).not.toBe('');
      const ran = /pid1=/.test(result);
      const unsandboxed = ran && /tini|agentry/.test(/pid1=([^\n\\]*)/.exec(result)?.[1] ?? '');
      if (!ran) {
        expect(result, model).toMatch(model === 'shell_bwrap' ? /the sandbox is required \(sandbox: bwrap\) but/ : /sandbox/i);
        outcomes[model] = 'refused';
      } else if (unsandboxed) {
        // Only `auto` may fall back, and only with the warning in the worker's log.
        expect(model, `${model} ran unsandboxed: ${result}`).toBe('shell');
        expect(workersOutput()).toMatch(/bash tool runs commands unsandboxed/);
        outcomes[model] = 'unsandboxed, with the warning';
      } else {
        expect(result, `${model}: the sandbox showed the worker's secrets`).not.toContain('SECRET-VISIBLE');
        outcomes[model] = 'sandboxed';
      }
    }
    console.log(`bash tool in the locked-down container: ${JSON.stringify(outcomes)}`);
  });

  it(`every container stops on SIGTERM, clean, within server.shutdown_timeout_ms (${SHUTDOWN_TIMEOUT_MS} ms)`, async () => {
    const results = await Promise.all(roles.map(async (r) => ({ role: r.role, ...(await stopContainer(r.container!, SHUTDOWN_TIMEOUT_MS)) })));
    console.log(`SIGTERM to exit: ${results.map((r) => `${r.role} ${r.wallMs} ms (service ${r.ms} ms)`).join(', ')}`);
    for (const r of results) {
      expect(r, r.role).toMatchObject({ code: 0, clean: true });
      expect(r.ms!, r.role).toBeLessThanOrEqual(SHUTDOWN_TIMEOUT_MS);
    }
  }, 60_000);
}

// ---------------------------------------------------------------------------------------------

/** The Secret's keys get these values; a key without one fails the test. */
function secretTestValues(db: TestDatabase, toContainer: (url: string) => string): Record<string, string> {
  return { DATABASE_URL: toContainer(db.url), REDIS_URL: toContainer(redisUrl()), AGENTRY_SECRET_KEY: MASTER_KEY, AGENTRY_ADMIN_PASSWORD: 'k8s-test-admin-password', AGENTRY_METRICS_TOKEN: '' };
}

interface Workload {
  resource: Resource;
  kind: 'Deployment' | 'Job';
  name: string;
  pod: Obj;
  container: Obj;
}

function manifestSuite(engine: Engine, overlay: 'dev' | 'prod'): void {
  const rendered = renderKustomization(path.join(repoRoot, 'k8s/overlays', overlay)).resources;
  const byKind = (kind: string) => rendered.filter((r) => r.doc.kind === kind);
  const workloads: Workload[] = [...byKind('Job'), ...byKind('Deployment')].map((r) => {
    const pod = podSpec(r.doc)!;
    const containers = containersOf(pod);
    if (containers.length !== 1) throw new Error(`${r.source}: ${String(r.doc.kind)} has ${containers.length} containers; the test runs one per pod`);
    return { resource: r, kind: r.doc.kind as 'Deployment' | 'Job', name: String(at(r.doc, 'metadata', 'name')), pod, container: containers[0]! };
  });
  const configMaps = new Map(byKind('ConfigMap').map((r) => [String(at(r.doc, 'metadata', 'name')), obj(r.doc.data) as Record<string, string>]));
  const secrets = new Map(
    byKind('Secret').map((r) => [
      String(at(r.doc, 'metadata', 'name')),
      Object.keys(obj(r.doc.data)),
    ]),
  );
  // podman: each container in its own network namespace (slirp4netns) where it listens on its
  // declared ports as in a pod, published on free loopback ports; the host's loopback (Postgres,
  // Redis) is 10.0.2.2 there. docker has no such mode: the host network, the declared ports.
  const isolated = engine.name === 'podman';
  const toContainer = (url: string) => (isolated ? url.replace(/@(127\.0\.0\.1|localhost)([:/])/, '@10.0.2.2$2').replace(/\/\/(127\.0\.0\.1|localhost)([:/])/, '//10.0.2.2$2') : url);

  let db: TestDatabase;
  let prefix: string;
  const dirs: string[] = [];
  const running: Container[] = [];

  beforeAll(async () => {
    db = await createTestDatabase({ migrated: false });
    prefix = uniqueRedisPrefix();
  });
  afterAll(async () => {
    forceRemove(engine, running);
    await db?.drop();
    await cleanupRedisPrefix(redisUrl(), prefix);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  /** The engine flags and environment that the workload's manifest asks for. */
  async function specOf(w: Workload): Promise<{ flags: string[]; env: Record<string, string>; args: string[]; ports: Map<string | number, number> }> {
    const c = w.container;
    const where = `${w.resource.source} (${overlay}): ${w.kind}/${w.name}`;
    const values = secretTestValues(db, toContainer);
    const secretEnv = (name: string, key?: string): Record<string, string> => {
      const keys = secrets.get(name);
      if (!keys) throw new Error(`${where}: Secret ${name} is not rendered`);
      const out: Record<string, string> = {};
      for (const k of key ? [key] : keys) {
        if (!keys.includes(k)) throw new Error(`${where}: Secret ${name} has no key ${k}`);
        if (values[k] === undefined) throw new Error(`${where}: Secret key ${k} has no test value (add it to secretTestValues)`);
        out[k] = values[k];
      }
      return out;
    };
    // Not in the manifests: keeps this test's queues apart from other tests on the same Redis.
    const env: Record<string, string> = { REDIS_PREFIX: prefix };
    for (const e of arr(c.envFrom).filter(isObj)) {
      if (isObj(e.secretRef)) Object.assign(env, secretEnv(String(e.secretRef.name)));
      else if (isObj(e.configMapRef)) Object.assign(env, configMaps.get(String(e.configMapRef.name)) ?? {});
      else throw new Error(`${where}: envFrom ${JSON.stringify(e)} is not supported by this test`);
    }
    for (const e of arr(c.env).filter(isObj)) {
      const name = String(e.name);
      if (typeof e.value === 'string') env[name] = e.value;
      else if (isObj(at(e, 'valueFrom', 'secretKeyRef'))) Object.assign(env, { [name]: secretEnv(String(at(e, 'valueFrom', 'secretKeyRef', 'name')), String(at(e, 'valueFrom', 'secretKeyRef', 'key')))[String(at(e, 'valueFrom', 'secretKeyRef', 'key'))]! });
      else if (isObj(at(e, 'valueFrom', 'configMapKeyRef'))) env[name] = configMaps.get(String(at(e, 'valueFrom', 'configMapKeyRef', 'name')))?.[String(at(e, 'valueFrom', 'configMapKeyRef', 'key'))] ?? '';
      else throw new Error(`${where}: env ${name} has a source this test does not support`);
    }

    const podSc = obj(w.pod.securityContext);
    const sc = obj(c.securityContext);
    const user = sc.runAsUser ?? podSc.runAsUser;
    const group = sc.runAsGroup ?? podSc.runAsGroup;
    if (user === undefined) throw new Error(`${where}: no runAsUser (the test would run the image's USER, not the manifest's)`);
    const flags: string[] = ['--user', `${String(user)}${group === undefined ? '' : `:${String(group)}`}`];
    if (sc.readOnlyRootFilesystem === true) flags.push(...readOnlyFlags(engine));
    const drop = arr(at(sc, 'capabilities', 'drop')).map(String);
    if (drop.includes('ALL')) flags.push('--cap-drop=ALL');
    else for (const cap of drop) flags.push(`--cap-drop=${cap}`);
    for (const cap of arr(at(sc, 'capabilities', 'add')).map(String)) flags.push(`--cap-add=${cap}`);
    if (sc.allowPrivilegeEscalation === false) flags.push('--security-opt=no-new-privileges');

    const volumes = new Map(arr(w.pod.volumes).filter(isObj).map((v) => [String(v.name), v]));
    for (const m of arr(c.volumeMounts).filter(isObj)) {
      const v = volumes.get(String(m.name));
      const mountPath = String(m.mountPath);
      if (!v) throw new Error(`${where}: volumeMount ${String(m.name)} has no volume`);
      if (isObj(v.emptyDir)) flags.push(...tmpfsFlag(engine, mountPath, str(v.emptyDir.sizeLimit)));
      else if (isObj(v.configMap)) {
        const data = configMaps.get(String(v.configMap.name));
        if (!data) throw new Error(`${where}: ConfigMap ${String(v.configMap.name)} is not rendered`);
        const dir = mountDir(data);
        dirs.push(dir);
        flags.push('-v', `${dir}:${mountPath}:${m.readOnly === true ? 'ro' : 'rw'}`);
      } else throw new Error(`${where}: volume ${String(m.name)} is of a kind this test does not mount`);
    }

    const ports = new Map<string | number, number>();
    if (isolated) {
      flags.push('--network=slirp4netns:allow_host_loopback=true');
      for (const p of arr(c.ports).filter(isObj)) {
        const host = await freePort();
        ports.set(Number(p.containerPort), host);
        if (p.name) ports.set(String(p.name), host);
        flags.push('-p', `127.0.0.1:${host}:${String(p.containerPort)}`);
      }
    } else {
      flags.push('--network=host');
      for (const p of arr(c.ports).filter(isObj)) {
        ports.set(Number(p.containerPort), Number(p.containerPort));
        if (p.name) ports.set(String(p.name), Number(p.containerPort));
      }
    }
    const command = arr(c.command).map(String);
    if (command.length > 0) flags.push('--entrypoint', command[0]!);
    const args = [...command.slice(1), ...arr(c.args).map(String)];
    return { flags, env, args, ports };
  }

  /** Asks one declared probe until it passes (2xx, or exit 0 for exec) within its own budget. */
  async function probe(w: Workload, running: Container, kind: string, p: Obj, ports: Map<string | number, number>): Promise<void> {
    const timeoutMs = Number(p.timeoutSeconds ?? 1) * 1000;
    // Kubernetes' own budget for a probe to pass: the delay, then failureThreshold tries a period apart.
    const budgetMs = probeBudgetMs(kind, p);
    const where = `${w.kind}/${w.name} ${kind}`;
    if (isObj(p.httpGet)) {
      const declared = p.httpGet.port as string | number;
      const port = ports.get(typeof declared === 'string' && /^\d+$/.test(declared) ? Number(declared) : declared);
      if (port === undefined) throw new Error(`${where}: port ${String(declared)} is not a declared container port`);
      const url = `http://127.0.0.1:${port}${String(p.httpGet.path ?? '/')}`;
      await waitForHttp(url, Date.now(), budgetMs, timeoutMs).catch((err: Error) => {
        throw new Error(`${where}: ${err.message}\n${running.output()}`);
      });
    } else if (isObj(p.exec)) {
      const cmd = arr(p.exec.command).map(String);
      await waitFor(async () => {
        try {
          engine.run(['exec', running.name, ...cmd], { timeoutMs });
          return true;
        } catch {
          return false;
        }
      }, budgetMs, 500);
    } else throw new Error(`${where}: a probe kind this test does not run (${Object.keys(p).join(', ')})`);
  }

  const config = (): Record<string, unknown> => {
    const cm = [...configMaps.values()].find((d) => 'config.yaml' in d);
    return obj(parseYaml(cm?.['config.yaml'] ?? '') as unknown);
  };

  it('the migration Job runs to completion', async () => {
    const jobs = workloads.filter((w) => w.kind === 'Job');
    expect(jobs.map((j) => j.name)).toHaveLength(1);
    const job = jobs[0]!;
    const spec = await specOf(job);
    const c = runContainer(engine, { name: `k8s-${overlay}-${job.name}`, image: IMAGE, args: spec.args, env: spec.env, flags: spec.flags });
    running.push(c);
    const deadline = Number(at(job.resource.doc, 'spec', 'activeDeadlineSeconds') ?? 600) * 1000;
    const code = await Promise.race([c.exited(), new Promise<string>((r) => setTimeout(() => r('deadline'), deadline))]);
    expect(code, c.output()).toBe(0);
  }, 120_000);

  it('each Deployment starts, answers every declared probe, has a writable temp dir on a read-only root, runs its preStop hook and stops clean on SIGTERM', async () => {
    const deployments = workloads.filter((w) => w.kind === 'Deployment');
    expect(deployments.length).toBeGreaterThanOrEqual(4);
    const shutdownMs = Number(at(config(), 'server', 'shutdown_timeout_ms'));
    expect(shutdownMs).toBeGreaterThan(0);
    const timings: string[] = [];
    await Promise.all(
      deployments.map(async (w) => {
        const spec = await specOf(w);
        const c = runContainer(engine, { name: `k8s-${overlay}-${w.name}`, image: IMAGE, args: spec.args, env: spec.env, flags: spec.flags });
        running.push(c);
        const declared = (['startupProbe', 'livenessProbe', 'readinessProbe'] as const).filter((k) => isObj(w.container[k]));
        expect(declared, `${w.name} declares no probes`).not.toEqual([]);
        for (const kind of declared) await probe(w, c, kind, obj(w.container[kind]), spec.ports);
        const readyMs = Date.now() - c.startedAt;
        // Uploads and the bash tool's scratch copies go to os.tmpdir(): it must be writable
        // under a read-only root, as the service's user, and the root itself must not be.
        engine.run(['exec', c.name, 'node', '-e', "require('fs').rmSync(require('fs').mkdtempSync(require('path').join(require('os').tmpdir(), 'probe-')), { recursive: true })"]);
        if (obj(w.container.securityContext).readOnlyRootFilesystem === true) {
          expect(() => engine.run(['exec', c.name, 'touch', '/app/written-by-the-test']), `${w.name}: the root file system is writable`).toThrow();
        }
        const preStop = arr(at(w.container, 'lifecycle', 'preStop', 'exec', 'command')).map(String);
        if (preStop.length > 0) engine.run(['exec', c.name, ...preStop], { timeoutMs: 60_000 });
        const grace = Number(at(w.pod, 'terminationGracePeriodSeconds') ?? 30) * 1000;
        const stopped = await stopContainer(c, grace);
        timings.push(`${w.name}: probes passed ${readyMs} ms after start, stopped in ${stopped.wallMs} ms`);
        expect(stopped, `${w.name}\n${c.output()}`).toMatchObject({ code: 0, clean: true });
        expect(stopped.ms!, w.name).toBeLessThanOrEqual(shutdownMs);
        expect(stopped.wallMs, w.name).toBeLessThan(grace);
      }),
    );
    console.log(`k8s/overlays/${overlay}: ${timings.join('; ')}`);
  }, 5 * 60_000);
}

// ---------------------------------------------------------------------------------------------

/**
 * How long a probe may take to pass in this test. Startup and liveness: Kubernetes' own budget
 * (the delay, then failureThreshold tries a period apart), past which it restarts the container.
 * Readiness: a failing readiness probe restarts nothing (the pod only stays out of its Service
 * and Kubernetes keeps probing), so its threshold is no deadline; a loaded CI box once took over
 * its 10 s for the channel-connector's `/ready`, so it gets the startup probe's order of time.
 */
function probeBudgetMs(kind: string, p: Obj): number {
  const k8sMs = (Number(p.initialDelaySeconds ?? 0) + Number(p.periodSeconds ?? 10) * Number(p.failureThreshold ?? 3)) * 1000;
  return kind === 'readinessProbe' ? Math.max(k8sMs, 90_000) : k8sMs;
}

function nginxSuite(): void {
  it('accepts deploy/nginx.conf (nginx -t)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-nginx-'));
    try {
      // What docker-compose.yml's proxy writes at start from the container's /etc/resolv.conf,
      // next to the main configuration (the folder deploy/nginx.conf includes it from).
      fs.mkdirSync(path.join(dir, 'agentry-runtime'));
      fs.writeFileSync(path.join(dir, 'agentry-runtime/resolver.conf'), 'resolver 127.0.0.11 valid=10s ipv6=off;\n');
      // The official image's nginx.conf in short: the file is its conf.d/default.conf, inside http {}.
      fs.writeFileSync(
        path.join(dir, 'nginx.conf'),
        `pid ${dir}/nginx.pid;\nerror_log stderr;\nevents {}\nhttp {\n  access_log off;\n  include ${path.join(repoRoot, 'deploy/nginx.conf')};\n}\n`,
      );
      const out = spawnSync('nginx', ['-t', '-p', dir, '-c', path.join(dir, 'nginx.conf')], { encoding: 'utf8' });
      expect(out.status, `${out.stdout}${out.stderr}`).toBe(0);
      expect(out.stderr).toMatch(/test is successful/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
