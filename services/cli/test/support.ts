import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RuleChainDsl } from '@agentry/client';
import { createTestDatabase, freePort, postgresUrl, repoRoot, spawnService, startFakeModel, waitFor, type FakeModel, type SpawnedService, type TestDatabase } from '@agentry/testing';

/** The real `agentry` bin, as `npx agentry` runs it. */
export const BIN = path.join(repoRoot, 'services/cli/bin/agentry.js');

export const PROVIDER_KEY = 'fake-provider-key-for-cli-tests';

function postgresAvailable(): boolean {
  try {
    return Boolean(postgresUrl());
  } catch {
    return false;
  }
}

export interface TestGateway {
  /** Server root, e.g. http://127.0.0.1:40123. */
  url: string;
  fake: FakeModel;
  /** The gateway's working directory (config.yaml, data/). */
  cwd: string;
  service: SpawnedService;
  stop(): Promise<void>;
}

export interface GatewayOptions {
  /** YAML lines appended to the configuration (server and models are set already). */
  config?: string[];
  env?: Record<string, string>;
  /** No provider configured (a first run): the fake model still runs, for a test to add. */
  noProvider?: boolean;
}

/**
 * A real gateway in embedded mode: `services/standalone/src/main.ts` as a process, configured
 * through a config.yaml with a provider pointing at a scripted fake model. Its database is a
 * fresh Postgres database cloned from the migrated template when a Postgres server is there
 * (quick), else embedded PGlite under its data directory (no server needed, so the suite never
 * has to skip).
 */
export async function startGateway(opts: GatewayOptions = {}): Promise<TestGateway> {
  const fake = await startFakeModel({ apiKey: PROVIDER_KEY });
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'agentry-cli-gw-'));
  const port = await freePort();
  fs.writeFileSync(
    path.join(cwd, 'config.yaml'),
    [
      `server: {host: 127.0.0.1, port: ${port}}`,
      'logging: {level: warn}',
      ...(opts.noProvider ? [] : ['models:', '  default_provider: fake', `  providers: {fake: {base_url: "${fake.url}", api_key: "${PROVIDER_KEY}", model: fake-model}}`]),
      ...(opts.config ?? []),
    ].join('\n'),
  );
  let db: TestDatabase | undefined;
  if (postgresAvailable()) db = await createTestDatabase();
  const service = spawnService('services/standalone/src/main.ts', {
    cwd,
    env: { AGENTRY_SECRET_KEY: 'cli-tests-master-key-0123456789abcdef', ...(db ? { DATABASE_URL: db.url } : {}), ...opts.env },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      async () => {
        if (service.proc.exitCode !== null) throw new Error(`the gateway exited:\n${service.output()}`);
        return (await fetch(`${url}/health`).catch(() => undefined))?.ok;
      },
      // Generous: a loaded box (several suites at once) takes minutes to compile and migrate.
      150_000,
      100,
    );
  } catch (err) {
    await service.stop('SIGKILL');
    throw new Error(`${(err as Error).message}\n${service.output()}`);
  }
  return {
    url,
    fake,
    cwd,
    service,
    async stop() {
      await service.stop();
      await fake.close();
      await db?.drop();
      fs.rmSync(cwd, { recursive: true, force: true });
    },
  };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  /** stdout as bytes. */
  bytes: Buffer;
  stderr: string;
  /** stdout parsed as JSON (throws with the output when it is not JSON). */
  json<T = unknown>(): T;
}

export interface CliOptions {
  /** Variables on top of PATH, HOME and AGENTRY_URL (nothing else of the test's environment leaks in). */
  env?: Record<string, string | undefined>;
  /** Written to stdin, then closed; without it stdin is empty. */
  input?: string | Buffer;
  cwd?: string;
  timeoutMs?: number;
}

/**
 * Runs the real bin (`node services/cli/bin/agentry.js ...`) without a terminal, with a
 * controlled environment: HOME is `home`, AGENTRY_URL the gateway, no other AGENTRY_* variable
 * unless given.
 */
export function runCli(args: string[], home: string, url: string, opts: CliOptions = {}): Promise<CliResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ PATH: process.env.PATH, HOME: home, AGENTRY_URL: url, ...opts.env })) if (v !== undefined) env[k] = v;
  const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd ?? home, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  child.stdin.on('error', () => undefined);
  child.stdin.end(opts.input ?? '');
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`agentry ${args.join(' ')} did not finish in time\nstdout: ${Buffer.concat(out).toString()}\nstderr: ${stderr}`));
    }, opts.timeoutMs ?? 20_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      const bytes = Buffer.concat(out);
      const stdout = bytes.toString('utf8');
      resolve({
        code,
        stdout,
        bytes,
        stderr,
        json<T>() {
          try {
            return JSON.parse(stdout) as T;
          } catch {
            throw new Error(`agentry ${args.join(' ')}: stdout is not JSON (exit ${code})\nstdout: ${stdout}\nstderr: ${stderr}`);
          }
        },
      });
    });
  });
}

/** A fresh HOME for one user of the CLI (its credential cache lives under it). */
export function tempHome(prefix = 'agentry-cli-home-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** An agent DSL as POST /agents takes it: one ai/agent node on the fake provider, then end. */
export function agentDsl(id: string, name = id, tools: string[] = ['read']): RuleChainDsl {
  return {
    ruleChain: { id, name, root: true },
    metadata: {
      firstNodeIndex: 0,
      nodes: [
        {
          id: 'agent',
          type: 'ai/agent',
          name: 'Agent',
          configuration: { provider: 'fake', systemPrompt: 'You are a test agent.', tools: tools.map((t) => ({ type: 'builtin', name: t })) },
        },
        { id: 'end', type: 'end', name: 'End' },
      ],
      connections: [{ fromId: 'agent', toId: 'end', type: 'Success' }],
    },
  };
}
