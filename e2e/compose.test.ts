/**
 * docker-compose.yml as shipped, the whole stack on Docker (docs/deploying.md, "What is verified"):
 * Postgres, Redis and nginx containers (the stand-in images of
 * ../shared/tools/containers/backend-images.sh, under the tags the file names), `migrate`, two
 * gateways, two agent-workers, the scheduler and the connector from the Agentry image, secrets
 * from files that deploy/make-secrets.sh makes. Nothing of the file is overridden: only its
 * variables are set (the image, the secrets' folder, the published port). A model provider
 * (e2e/compose-fake-model.mjs) runs in one more container on the stack's network.
 *
 * 1. every service healthy by its own health check, `migrate` exited 0, every container locked
 *    down as the file says, no secret in any container's configuration (`docker inspect`);
 * 2. chats through nginx, streamed and not, reach both gateways;
 * 3. a worker container killed (SIGKILL) mid-stream: the client gets a clean error event or the
 *    whole answer, never a silent cut or a hang;
 * 4. `down`, then `up` again: the data (the admin's password, an agent) is still there.
 *
 * Docker only (docker-compose 1.29 or Compose v2); podman runs the image in e2e/image.test.ts.
 * Without Docker, the compose tool or the stand-in images the suite is skipped loudly, and fails
 * under CI=true.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { freePort, skipLoudly, waitFor } from '@agentry/testing';
import { buildImage, repoRoot, streamedChat, type Engine } from './containers.js';

const IMAGE = process.env.AGENTRY_TEST_IMAGE ?? 'localhost/agentry:test';
const TITLE = 'docker-compose.yml, the whole stack on Docker';
const SECRET_NAMES = ['agentry_secret_key', 'postgres_password', 'admin_password'] as const;

function docker(args: string[], opts: { timeoutMs?: number; env?: Record<string, string> } = {}): string {
  const out = spawnSync('docker', args, { encoding: 'utf8', timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024, cwd: repoRoot, env: { ...process.env, ...opts.env } });
  if (out.status !== 0) throw new Error(`docker ${args.join(' ')} failed (${out.error?.message ?? `exit ${out.status}`}):\n${out.stdout}\n${out.stderr}`);
  return out.stdout;
}
const dockerEngine: Engine = { name: 'docker', run: docker };

/** `docker compose` (v2) or `docker-compose` (1.29), and the backend images the file names; or why not. */
function detect(): { compose: string[] } | { reason: string } {
  const info = spawnSync('docker', ['info'], { encoding: 'utf8', timeout: 30_000 });
  if (info.status !== 0) return { reason: `no working Docker engine (${(info.error?.message ?? info.stderr).trim().split('\n').at(-1)}); .ci/run installs Debian's docker.io and starts dockerd` };
  let compose: string[] | undefined;
  if (spawnSync('docker', ['compose', 'version'], { timeout: 30_000 }).status === 0) compose = ['docker', 'compose'];
  else if (spawnSync('docker-compose', ['version'], { timeout: 30_000 }).status === 0) compose = ['docker-compose'];
  if (!compose) return { reason: 'neither `docker compose` nor docker-compose is installed (apt-get install docker-compose)' };
  const file = parseYaml(fs.readFileSync(path.join(repoRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, { image?: string; build?: unknown }> };
  const backends = Object.values(file.services).filter((s) => !s.build && s.image).map((s) => s.image!);
  const missing = backends.filter((image) => spawnSync('docker', ['image', 'inspect', image], { timeout: 30_000 }).status !== 0);
  if (missing.length > 0) return { reason: `Docker lacks ${missing.join(', ')}: run ../shared/tools/containers/backend-images.sh from the project root (no registry here)` };
  return { compose };
}

const found = detect();
if ('reason' in found) skipLoudly(TITLE, found.reason, () => it('needs Docker and compose', () => {}));
else describe(`${TITLE} (${found.compose.join(' ')})`, () => composeSuite(found.compose));

interface Inspected {
  Id: string;
  Name: string;
  Config: { Env: string[]; Labels: Record<string, string>; User: string };
  State: { Status: string; ExitCode: number; Health?: { Status: string } };
  HostConfig: { CapDrop: string[] | null; ReadonlyRootfs: boolean; SecurityOpt: string[] | null; Memory: number; NanoCpus: number; LogConfig: { Config: Record<string, string> }; Tmpfs: Record<string, string> | null };
  NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
}

/** One SSE response read to its end: the events, the text of the deltas, how it ended. */
async function readSse(res: Response, onEvent?: (data: string) => void): Promise<{ events: string[]; text: string; done: boolean; error?: string; finish?: string }> {
  const events: string[] = [];
  let text = '';
  let finish: string | undefined;
  let error: string | undefined;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(part, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = event.split('\n').find((l) => l.startsWith('data: '))?.slice(6);
      if (data === undefined) continue;
      events.push(data);
      onEvent?.(data);
      if (data === '[DONE]') continue;
      const parsed = JSON.parse(data) as { error?: { message?: string }; choices?: { delta?: { content?: string }; finish_reason?: string | null }[] };
      if (parsed.error) error = parsed.error.message ?? JSON.stringify(parsed.error);
      text += parsed.choices?.[0]?.delta?.content ?? '';
      finish ??= parsed.choices?.[0]?.finish_reason ?? undefined;
    }
  }
  return { events, text, done: events.at(-1) === '[DONE]', ...(error ? { error } : {}), ...(finish ? { finish } : {}) };
}

function composeSuite(argv: string[]): void {
  // Compose keeps [a-z0-9_-] of a project name; the network is <project>_default.
  const project = `agentrycompose${process.pid}`;
  let secretsDir: string;
  let secrets: Record<(typeof SECRET_NAMES)[number], string>;
  let port: number;
  let env: Record<string, string>;
  let fakeName: string | undefined;
  let fakePort: number;
  let token: string;

  const compose = (args: string[], timeoutMs = 300_000): string => {
    const out = spawnSync(argv[0]!, [...argv.slice(1), '-p', project, '-f', 'docker-compose.yml', ...args], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, ...env },
    });
    if (out.status !== 0) throw new Error(`${argv.join(' ')} ${args.join(' ')}: exit ${out.status ?? out.error?.message}\n${out.stdout}\n${out.stderr}`);
    return out.stdout + out.stderr;
  };
  const containers = (): Inspected[] => {
    const ids = docker(['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`]).split('\n').filter(Boolean);
    return ids.length === 0 ? [] : (JSON.parse(docker(['inspect', ...ids])) as Inspected[]);
  };
  const serviceOf = (c: Inspected) => c.Config.Labels['com.docker.compose.service']!;
  const api = () => `http://127.0.0.1:${port}/api/v1`;
  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${api()}${route}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, json: (text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
  /**
   * Logs in as admin with the secret file's password, until the token holds on both gateways.
   * Known race, not this suite's to fix (services/gateway/src/auth/seed.ts): two gateways
   * starting together both import the file's admin, the second import bumps token_version, and a
   * gateway's credential index catches up only at its next reload (30 s): until then a token
   * minted by one gateway can be "invalid" at the other. Printed whenever it happens.
   */
  const login = async () => {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      token = '';
      const res = await call('POST', '/auth/login', { username: 'admin', password: secrets.admin_password });
      expect(res.status, res.text).toBe(200);
      token = String(res.json.token);
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await call('GET', '/agents'));
      const refused = answers.filter((a) => a.status !== 200);
      if (refused.length === 0) return;
      console.warn(`login attempt ${attempt}: ${refused.length} of 6 requests through nginx refused the new token (${refused[0]!.text}): the gateways' seeding race, retrying`);
      expect(Date.now() - started, 'the token never held on both gateways').toBeLessThan(90_000);
      await new Promise((r) => setTimeout(r, 5_000));
    }
  };
  /** Every long-running service healthy by its own check and `migrate` exited 0: what `up --wait` waits for. */
  const waitHealthy = async (label: string) => {
    const started = Date.now();
    let last = '';
    await waitFor(
      async () => {
        const all = containers();
        last = all.map((c) => `${serviceOf(c)}=${c.State.Health?.Status ?? c.State.Status}${c.State.Status === 'exited' ? `(${c.State.ExitCode})` : ''}`).sort().join(' ');
        const migrate = all.find((c) => serviceOf(c) === 'migrate');
        if (migrate?.State.Status === 'exited' && migrate.State.ExitCode !== 0) throw new Error(`migrate exited ${migrate.State.ExitCode}: ${docker(['logs', migrate.Id])}`);
        return all.length === 10 && all.every((c) => (serviceOf(c) === 'migrate' ? c.State.Status === 'exited' : c.State.Health?.Status === 'healthy'));
      },
      240_000,
      1_000,
    ).catch((err: Error) => {
      throw new Error(`${label}: not all healthy (${last}): ${err.message}\n${logs()}`);
    });
    console.log(`compose ${label}: every service healthy ${((Date.now() - started) / 1000).toFixed(0)} s after \`up -d\` returned (${last})`);
  };
  const logs = () => {
    try {
      return compose(['logs', '--no-color', '--tail', '40'], 60_000);
    } catch (err) {
      return (err as Error).message;
    }
  };
  const startFake = async () => {
    fakeName = `${project}-fake-model`;
    fakePort = await freePort();
    docker([
      'run', '-d', '--rm', '--name', fakeName, '--network', `${project}_default`, '--network-alias', 'fake-model',
      '-p', `127.0.0.1:${fakePort}:8080`, '--user', '1000:1000', '--read-only', '--cap-drop', 'ALL',
      '-v', `${path.join(repoRoot, 'e2e/compose-fake-model.mjs')}:/opt/fake-model.mjs:ro`, '--entrypoint', 'node', IMAGE, '/opt/fake-model.mjs',
    ]);
    await waitFor(async () => (await fetch(`http://127.0.0.1:${fakePort}/inflight`).catch(() => undefined))?.ok === true, 30_000, 200);
  };
  const stopFake = () => {
    if (fakeName) spawnSync('docker', ['rm', '-f', fakeName], { timeout: 60_000 });
    fakeName = undefined;
  };
  const up = async (label: string) => {
    const started = Date.now();
    compose(['up', '-d', '--no-build']);
    console.log(`compose ${label}: \`up -d\` returned after ${((Date.now() - started) / 1000).toFixed(0)} s`);
    await waitHealthy(label);
    await startFake();
  };

  beforeAll(async () => {
    if (spawnSync('docker', ['image', 'inspect', IMAGE], { timeout: 30_000 }).status !== 0) {
      const built = buildImage(dockerEngine, IMAGE);
      console.log(`image ${IMAGE}: built with docker in ${built.seconds.toFixed(0)} s`);
    }
    secretsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-compose-secrets-'));
    const made = spawnSync('sh', ['deploy/make-secrets.sh'], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, AGENTRY_SECRETS_DIR: secretsDir } });
    expect(made.status, made.stderr).toBe(0);
    secrets = Object.fromEntries(SECRET_NAMES.map((n) => [n, fs.readFileSync(path.join(secretsDir, n), 'utf8')])) as typeof secrets;
    port = await freePort();
    env = { AGENTRY_IMAGE: IMAGE, AGENTRY_SECRETS_DIR: secretsDir, AGENTRY_PORT: String(port), AGENTRY_BIND: '127.0.0.1' };
    await up('first start');
    await login();
    const provider = await call('POST', '/config/models/providers', { id: 'fake', base_url: 'http://fake-model:8080/v1', model: 'fake-model' });
    expect(provider.status, provider.text).toBe(201);
    const agent = await call('POST', '/agents', {
      ruleChain: { id: 'composebot', name: 'composebot' },
      metadata: { nodes: [{ id: 'a', type: 'ai/agent', configuration: { provider: 'fake', model: 'fake-model' } }], connections: [] },
    });
    expect(agent.status, agent.text).toBe(201);
  }, 15 * 60_000);

  afterAll(() => {
    stopFake();
    if (env) {
      try {
        compose(['down', '-v', '-t', '5'], 180_000);
      } catch (err) {
        console.warn(`compose down: ${(err as Error).message}`);
      }
    }
    if (secretsDir) fs.rmSync(secretsDir, { recursive: true, force: true });
  }, 200_000);

  it('every container is locked down as the file says, and no secret is in its configuration (docker inspect)', () => {
    const all = containers();
    expect(all.map(serviceOf).sort()).toEqual(['agent-worker', 'agent-worker', 'channel-connector', 'gateway', 'gateway', 'migrate', 'postgres', 'proxy', 'redis', 'scheduler']);
    const inspected = docker(['inspect', ...all.map((c) => c.Id)]);
    for (const name of SECRET_NAMES) expect(inspected, `${name} in docker inspect`).not.toContain(secrets[name]);
    for (const c of all) {
      const s = serviceOf(c);
      expect({ s, capDrop: c.HostConfig.CapDrop, ro: c.HostConfig.ReadonlyRootfs, nnp: c.HostConfig.SecurityOpt }).toEqual({ s, capDrop: ['ALL'], ro: true, nnp: expect.arrayContaining([expect.stringMatching(/^no-new-privileges/)]) });
      expect(c.HostConfig.Memory, s).toBeGreaterThan(0);
      expect(c.HostConfig.NanoCpus, s).toBeGreaterThan(0);
      expect(c.HostConfig.LogConfig.Config, s).toMatchObject({ 'max-size': expect.any(String), 'max-file': expect.any(String) });
    }
    // The agent's `bash` tool runs scripts it wrote to /tmp (a tmpfs of fixed size), as uid 1000, on a read-only root.
    const worker = all.find((c) => serviceOf(c) === 'agent-worker')!;
    expect(docker(['exec', worker.Id, 'sh', '-c', 'printf "#!/bin/sh\\necho ran as $(id -u)\\n" > /tmp/t.sh && chmod +x /tmp/t.sh && /tmp/t.sh && rm /tmp/t.sh']).trim()).toBe('ran as 1000');
    expect(docker(['exec', worker.Id, 'sh', '-c', 'df -k /tmp | tail -1']).trim().split(/\s+/)[1]).toBe(String(256 * 1024));
    expect(spawnSync('docker', ['exec', worker.Id, 'touch', '/app/x'], { timeout: 30_000 }).status).not.toBe(0);
  });

  it('chats through nginx, streamed and not, reach both gateways', async () => {
    const client = new OpenAI({ baseURL: api(), apiKey: token, maxRetries: 0 });
    for (let i = 0; i < 8; i++) {
      if (i % 2 === 0) {
        const plain = await client.chat.completions.create({ model: 'composebot', messages: [{ role: 'user', content: `plain ${i}` }] });
        expect(plain.choices[0]!.message.content).toBe(`answer: plain ${i}`);
      } else {
        expect(await streamedChat(client, 'composebot', `streamed ${i}`)).toEqual({ text: `answer: streamed ${i}`, finish: 'stop' });
      }
    }
    // Each gateway's own count of chat requests (its /metrics, asked inside its container).
    const counts = containers()
      .filter((c) => serviceOf(c) === 'gateway')
      .map((c) => {
        const metrics = docker(['exec', c.Id, 'node', '-e', "fetch('http://127.0.0.1:9527/metrics').then((r) => r.text()).then((t) => process.stdout.write(t))"]);
        const line = metrics.split('\n').find((l) => l.startsWith('http_request_duration_seconds_count') && l.includes('route="/api/v1/chat/completions"'));
        return Number(line?.split(' ').at(-1) ?? 0);
      });
    console.log(`chat requests per gateway through nginx: ${counts.join(', ')}`);
    expect(counts).toHaveLength(2);
    for (const n of counts) expect(n).toBeGreaterThan(0);
  }, 120_000);

  it('a worker container killed mid-stream: the client gets a clean error event or the whole answer', async () => {
    const res = await fetch(`${api()}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'composebot', stream: true, messages: [{ role: 'user', content: 'slow, until a worker dies' }] }),
    });
    expect(res.status).toBe(200);
    let killedAt = 0;
    let killed: Inspected | undefined;
    let deltas = 0;
    const killing: Promise<void>[] = [];
    const result = await readSse(res, (data) => {
      // Two deltas: the run is marked as streamed by then (a re-run would repeat what was sent).
      if (!data.includes('"content":"t') || ++deltas !== 2) return;
      killing.push(
        (async () => {
          const inflight = (await (await fetch(`http://127.0.0.1:${fakePort}/inflight`)).json()) as { remote: string }[];
          expect(inflight).toHaveLength(1);
          killed = containers().find((c) => serviceOf(c) === 'agent-worker' && Object.values(c.NetworkSettings.Networks).some((n) => n.IPAddress === inflight[0]!.remote));
          expect(killed, `no worker container has the address ${inflight[0]!.remote}`).toBeDefined();
          docker(['kill', '--signal', 'KILL', killed!.Id]);
          killedAt = Date.now();
        })(),
      );
    });
    await Promise.all(killing);
    const seconds = (Date.now() - killedAt) / 1000;
    expect(killed, 'the worker was not killed: the stream ended before its second delta').toBeDefined();
    console.log(`worker ${killed!.Name} killed mid-stream: the client's stream ended ${seconds.toFixed(1)} s later with ${result.error ? `the error "${result.error}"` : `the whole answer (${result.text.length} characters)`}`);
    if (result.error) {
      // A clean error: one error event, the last, and no [DONE] after a failure.
      expect(result.events.at(-1)).toMatch(/^\{"error":\{"message":"/);
      expect(result.done).toBe(false);
    } else {
      expect({ done: result.done, finish: result.finish, deltas: result.text.trim().split(' ').length }).toEqual({ done: true, finish: 'stop', deltas: 120 });
    }
    // Generous: worker.stall_timeout_ms (30 s) plus its sweep today; a worker liveness lease brings it to seconds.
    expect(seconds).toBeLessThan(90);
    docker(['start', killed!.Id]);
  }, 180_000);

  it('down, then up again: the data is kept (the admin password, the agent) and the stack answers', async () => {
    stopFake();
    const started = Date.now();
    compose(['down', '-t', '30'], 180_000);
    console.log(`compose down (volumes kept): ${((Date.now() - started) / 1000).toFixed(0)} s`);
    expect(containers()).toEqual([]);
    await up('second start');
    await login();
    const agent = await call('GET', '/agents/composebot');
    expect(agent.status, agent.text).toBe(200);
    const client = new OpenAI({ baseURL: api(), apiKey: token, maxRetries: 0 });
    const plain = await client.chat.completions.create({ model: 'composebot', messages: [{ role: 'user', content: 'after the restart' }] });
    expect(plain.choices[0]!.message.content).toBe('answer: after the restart');
    const inspected = docker(['inspect', ...containers().map((c) => c.Id)]);
    for (const name of SECRET_NAMES) expect(inspected, `${name} in docker inspect`).not.toContain(secrets[name]);
  }, 10 * 60_000);
}
