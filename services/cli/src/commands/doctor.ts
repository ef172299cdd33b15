import type { Command } from 'commander';
import { AgentryClient, ApiError, type AuthStatus } from '@agentry/client';
import type { Context } from '../context.js';
import { describeSource, isExpired, maskSecret } from '../credentials.js';
import { CliError, describeError } from '../errors.js';
import { examples, type Cli } from '../command-kit.js';
import { defaultProviderId, listProviders, testProvider, type Provider } from './providers.js';

/** One line of the report: what was checked, what was found, and for a failure what to do. */
export interface Finding {
  check: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

type Report = (f: Finding) => void;

const why = (err: unknown) => (err instanceof Error ? describeError(err, false) : String(err));

/** What to do about a failed /ready check, by its name (the registry's: database, redis, services). */
function readyFix(name: string): string {
  if (name === 'database') return 'check that Postgres is running and DATABASE_URL (or data.root_dir for embedded mode) is right';
  if (name === 'redis') return 'the queue: check that Redis is running and REDIS_URL is right';
  return `look at the ${name} service's logs; restart it`;
}

export function doctorCommand(program: Command, cli: Cli): void {
  const doctor = program
    .command('doctor')
    .summary('check the server, the credentials and the providers; name a fix for each failure')
    .description(
      'Checks, in order: the server answers (/health), its version, whether it requires a login,\n' +
        'which credential works (chat and login), what a first chat needs (a default provider, an\n' +
        'agent), each model provider (a test call; needs an admin), and readiness (/ready: database,\n' +
        'queue, services). Exit 1 when anything failed.',
    )
    .action(cli.action(runDoctor));
  examples(doctor, 'agentry doctor', 'agentry doctor --json');
}

async function runDoctor(ctx: Context): Promise<void> {
  const findings: Finding[] = [];
  const report: Report = (f) => {
    findings.push(f);
    if (!ctx.json) ctx.printer.text(`${f.ok ? 'ok  ' : 'FAIL'}  ${f.check.padEnd(11)} ${f.detail}${f.fix ? `\n      fix: ${f.fix}` : ''}\n`);
  };
  if (await checkServer(ctx, report)) {
    await checkVersion(ctx, report);
    await checkAuth(ctx, report);
    await checkCredentials(ctx, report);
    const providers = await checkProviders(ctx, report);
    if (providers) await checkChatPath(ctx, report, providers);
    await checkReady(ctx, report);
  }
  if (ctx.json) ctx.printer.json({ url: ctx.url, ok: findings.every((f) => f.ok), findings });
  const failed = findings.filter((f) => !f.ok).length;
  if (failed > 0) throw new CliError(`${failed} check${failed === 1 ? '' : 's'} failed`);
}

async function checkServer(ctx: Context, report: Report): Promise<boolean> {
  try {
    await ctx.spin('reaching the server', () => ctx.anonymous.health());
    report({ check: 'server', ok: true, detail: `${ctx.url} answers` });
    return true;
  } catch (err) {
    report({ check: 'server', ok: false, detail: why(err), fix: `start the server (npm start, or the agentry image), or point --url / AGENTRY_URL at it` });
    return false;
  }
}

async function checkVersion(ctx: Context, report: Report): Promise<void> {
  try {
    const doc = await ctx.anonymous.http.request<{ info?: { version?: string } }>('GET', '/api/v1/openapi.json', { purpose: 'public', root: true });
    report({ check: 'version', ok: true, detail: doc.info?.version ?? 'unknown' });
  } catch (err) {
    report({ check: 'version', ok: false, detail: `no API document: ${why(err)}`, fix: 'is this an Agentry server? check --url' });
  }
}

async function checkAuth(ctx: Context, report: Report): Promise<AuthStatus | undefined> {
  try {
    const status = await ctx.anonymous.auth.status();
    const mode = status.requireAuth ? 'a login is required for management' : 'open: no login required (security.requireAuth is false)';
    // The gateway tells an anonymous caller about the default password only on an open server,
    // where it stops nothing (anyone manages it anyway): worth a word, not a failure; it matters
    // the moment security.requireAuth is turned on.
    if (status.defaultPassword && status.requireAuth) {
      report({ check: 'auth', ok: false, detail: `${mode}; admin still has the default password`, fix: 'agentry passwd -u admin' });
    } else if (status.defaultPassword) {
      report({ check: 'auth', ok: true, detail: `${mode}; admin still has the default password: change it (agentry passwd -u admin) before requiring logins` });
    } else report({ check: 'auth', ok: true, detail: mode });
    return status;
  } catch (err) {
    report({ check: 'auth', ok: false, detail: why(err), fix: 'check --url: /api/v1/auth/status does not answer' });
    return undefined;
  }
}

async function checkCredentials(ctx: Context, report: Report): Promise<void> {
  const inUse = ctx.credentials.inUse();
  if (!inUse) {
    // An open server chats without a key (until an API account exists): none found is then no failure.
    const open = await ctx.anonymous.models().then(
      () => true,
      () => false,
    );
    if (open) report({ check: 'credential', ok: true, detail: 'none needed: this server takes chat without a key' });
    else report({ check: 'credential', ok: false, detail: 'none found, and the server wants one for chat', fix: 'agentry login, or set AGENTRY_API_KEY (see agentry whoami)' });
    return;
  }
  const source = describeSource(inUse, ctx.setup.home);
  try {
    await new AgentryClient({ url: ctx.url, token: inUse.token }).models();
    const what = inUse.kind === 'jwt' ? `the JWT of ${inUse.username}` : `API key ${maskSecret(inUse.token)}`;
    report({ check: 'credential', ok: true, detail: `chat works with ${what} from ${source}` });
  } catch (err) {
    const fix = inUse.kind === 'jwt' ? 'agentry login' : inUse.source === 'env' ? `set ${inUse.variable} to a key the server knows (agentry apikey regenerate)` : `fix the key in ${inUse.file}, or set AGENTRY_API_KEY`;
    report({ check: 'credential', ok: false, detail: `the credential from ${source} is refused: ${why(err)}`, fix });
  }
  const login = ctx.credentials.login();
  // The login signs management commands too; when it is the credential in use it was checked above.
  if (!login || inUse.kind === 'jwt') return;
  if (isExpired(login, ctx.credentials.now)) report({ check: 'login', ok: false, detail: `the login of ${login.username} has expired`, fix: 'agentry login' });
  else report({ check: 'login', ok: true, detail: `${login.username} (signs management commands)` });
}

/** What a first chat needs besides a provider that answers: a default provider and an agent. */
async function checkChatPath(ctx: Context, report: Report, providers: Provider[]): Promise<void> {
  try {
    const id = await defaultProviderId(ctx);
    if (id) report({ check: 'default', ok: true, detail: `provider ${id} answers agents that name none` });
    else {
      const fix = providers.length > 0 ? `agentry config set models.default_provider ${providers[0]!.id}` : `agentry providers add <id> --base-url <url> --default, or the web UI's Model providers page (/providers)`;
      report({ check: 'default', ok: false, detail: 'no default provider: an agent that names none cannot answer', fix });
    }
  } catch (err) {
    report({ check: 'default', ok: false, detail: `cannot read the default provider: ${why(err)}`, fix: 'agentry login' });
  }
  try {
    const agents = await ctx.spin('loading agents', () => ctx.client.agents.list({ size: 1 }));
    if (agents.total > 0) report({ check: 'agents', ok: true, detail: `${agents.total} to chat with` });
    else report({ check: 'agents', ok: false, detail: 'none yet: there is nothing to chat with', fix: "agentry agents create --id helper, or the web UI's Agents page (/agents/new)" });
  } catch (err) {
    report({ check: 'agents', ok: false, detail: `cannot list them: ${why(err)}`, fix: 'agentry login' });
  }
}

async function checkProviders(ctx: Context, report: Report): Promise<Provider[] | undefined> {
  let providers;
  try {
    providers = await ctx.spin('loading providers', () => listProviders(ctx));
  } catch (err) {
    report({ check: 'providers', ok: false, detail: `cannot list them: ${why(err)}`, fix: 'agentry login (a user may list providers)' });
    return undefined;
  }
  if (providers.length === 0) report({ check: 'providers', ok: false, detail: 'none configured', fix: "agentry providers add <id> --base-url <url> --model <name> --key, or the web UI's Model providers page (/providers)" });
  for (const p of providers) {
    try {
      const result = await ctx.spin(`testing ${p.id}`, () => testProvider(ctx, p.id));
      if (result.ok) report({ check: `provider`, ok: true, detail: `${p.id} answers (${result.method}, ${result.latencyMs} ms)` });
      else report({ check: 'provider', ok: false, detail: `${p.id}: ${result.error ?? 'no answer'}`, fix: p.hasApiKey ? `check its address and key: agentry providers update ${p.id} --base-url <url>; agentry providers set-key ${p.id}` : `agentry providers set-key ${p.id}` });
    } catch (err) {
      const admin = err instanceof ApiError && (err.status === 403 || err.status === 401);
      report({ check: 'provider', ok: false, detail: `${p.id}: not tested: ${why(err)}`, fix: admin ? 'testing a provider needs an admin: agentry login -u admin' : 'see the server log' });
    }
  }
  return providers;
}

async function checkReady(ctx: Context, report: Report): Promise<void> {
  let checks: Record<string, { ok: boolean; ms: number; error?: string }>;
  try {
    checks = (await ctx.anonymous.http.request<{ checks: typeof checks }>('GET', '/ready', { purpose: 'public', root: true })).checks;
  } catch (err) {
    // A 503 carries the same checks: the failing ones get a fix each.
    const body = err instanceof ApiError ? (err.body as { checks?: typeof checks } | undefined) : undefined;
    if (!body?.checks) {
      report({ check: 'ready', ok: false, detail: why(err), fix: 'see the server log' });
      return;
    }
    checks = body.checks;
  }
  for (const [name, c] of Object.entries(checks)) {
    if (c.ok) report({ check: 'ready', ok: true, detail: `${name} (${Math.round(c.ms)} ms)` });
    else report({ check: 'ready', ok: false, detail: `${name}: ${c.error ?? 'not ready'}`, fix: readyFix(name) });
  }
}
