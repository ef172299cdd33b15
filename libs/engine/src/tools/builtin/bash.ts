import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import nodePath from 'node:path';
import type { Static } from 'typebox';
import { deleteWorkspaceTree, getWorkspaceEntry, inWorkspaceTransaction, makeWorkspaceDir, writeWorkspaceFile, type Db } from '@agentry/db';
import { normaliseWorkspacePath, bashSpec } from '@agentry/definitions';
import { RegexTimeoutError, firstMatchInWorker } from '../regex-runner.js';
import { ToolError, type ToolContext } from '../types.js';
import { checkArgs, fileSizeLimit, checkConfig, dbCall, listTree, readContents, workspaceQuota, type BuiltinTool } from './common.js';

/**
 * `bash`: runs a command in a scratch directory holding a copy of the agent's workspace, then
 * writes the files it created, changed or deleted back to the workspace in one transaction.
 *
 * Where bubblewrap (`bwrap`) works, the command runs in its sandbox: new user, PID, IPC, UTS and
 * network namespaces (no network unless `allowNetwork`), the system directories read-only, a
 * private /tmp and /proc, and only the scratch directory writable. It then cannot see the
 * worker's processes (whose /proc/<pid>/environ holds DATABASE_URL and AGENTRY_SECRET_KEY), the
 * service's files, or the network that the outbound-address policy guards. Without bwrap
 * (`sandbox: none`, or `auto` where it is missing, both only with `security.allowUnsandboxedBash`)
 * the command runs as the service's own user on
 * the host and the tool is NOT a security boundary: the scrubbed environment and the deny list
 * only stop accidents.
 */

const Parameters = bashSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = bashSpec.configSchema;
type Config = Static<typeof Config>;

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Commands refused before they run. A guard against accidents and the obvious, not against
 * someone determined (`eval`, variables, base64 and a hundred other ways get past any list).
 */
export const BASH_DENY_LIST: ReadonlyArray<{ pattern: RegExp; reason: string }> = [
  { pattern: /\brm\s+(?:-[\w-]*\s+)*(?:\/|\/\*|~\/?|\$HOME\/?|\/\w+\/?)(?:\s|$|;|&|\|)/, reason: 'rm of the root, home or a top-level directory' },
  { pattern: /--no-preserve-root/, reason: 'rm --no-preserve-root' },
  { pattern: /(?:^|[\s;&|(`])(?:sudo\s+)?(?:shutdown|reboot|halt|poweroff)\b/, reason: 'shutting the machine down' },
  { pattern: /(?:^|[\s;&|(`])(?:sudo\s+)?(?:init|telinit)\s+[06]\b/, reason: 'shutting the machine down' },
  { pattern: /\bsystemctl\s+(?:poweroff|reboot|halt|kexec)\b/, reason: 'shutting the machine down' },
  { pattern: /\bmkfs(?:\.\w+)?\b|\bmke2fs\b|\bmkswap\b|\bwipefs\b/, reason: 'formatting a file system' },
  { pattern: /\bdd\b[^;&|]*\bof=\/dev\//, reason: 'dd to a device' },
  { pattern: />\s*\/dev\/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*/, reason: 'writing to a disk device' },
  { pattern: /(\w+)\s*\(\)\s*\{[^}]*\b\1\s*\|\s*\1\s*&/, reason: 'a fork bomb' },
  { pattern: /:\s*\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}/, reason: 'a fork bomb' },
  { pattern: /\b(?:curl|wget|fetch)\b[^;&]*\|\s*(?:sudo\s+)?(?:env\s+)?(?:ba|z|da|k|fi)?sh\b/, reason: 'piping a download into a shell' },
  { pattern: /\b(?:ba|z|da|k)?sh\s+(?:-c\s+)?["']?\$\(\s*(?:curl|wget)\b/, reason: 'running a downloaded script' },
  { pattern: /\bchmod\s+(?:-\w+\s+)*[0-7]*777\s+\/(?:\s|$)/, reason: 'chmod 777 of the root' },
];

/**
 * The agent's own patterns are written by whoever configures the agent, so they run in the regex
 * worker with a deadline: `^(a+)+$` on the event loop would stall every run and `/health`. A
 * pattern that runs out of time refuses the command (a deny list that cannot answer must not allow).
 */
async function denied(command: string, extra: readonly string[], timeoutMs: number, signal: AbortSignal): Promise<string | undefined> {
  for (const rule of BASH_DENY_LIST) if (rule.pattern.test(command)) return rule.reason;
  for (const source of extra) {
    try {
      new RegExp(source);
    } catch {
      throw new ToolError(`bash: the agent's denyList entry /${source}/ is not a valid regular expression`);
    }
  }
  let hit: number;
  try {
    hit = await firstMatchInWorker([...extra], command, { timeoutMs, signal });
  } catch (err) {
    if (err instanceof RegexTimeoutError) throw new ToolError(`bash: command refused: the agent's deny list took longer than ${timeoutMs} ms to check it (simplify the patterns: nested quantifiers like (a+)+ backtrack without end)`);
    throw err;
  }
  return hit >= 0 ? `the agent's deny list (/${extra[hit]}/)` : undefined;
}

interface Snapshot {
  dirs: Set<string>;
  /** path -> sha256 of the content as materialised */
  files: Map<string, string>;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function onDisk(root: string, path: string): string {
  const full = nodePath.join(root, ...path.split('/'));
  if (full !== root && !full.startsWith(`${root}${nodePath.sep}`)) throw new Error(`workspace path "${path}" leaves the scratch directory`);
  return full;
}

async function materialise(db: Db, agentId: string, root: string, cfg: Config): Promise<Snapshot> {
  const tree = await listTree(db, agentId, '');
  const total = tree.reduce((n, e) => n + e.size, 0);
  const max = cfg.maxWorkspaceBytes ?? 100 * 1024 * 1024;
  if (total > max) throw new ToolError(`bash: the workspace holds ${total} bytes, more than the ${max} bytes the bash tool copies`);
  const snapshot: Snapshot = { dirs: new Set(), files: new Map() };
  for (const e of tree) {
    if (e.isDir) {
      await mkdir(onDisk(root, e.path), { recursive: true });
      snapshot.dirs.add(e.path);
    }
  }
  const files = tree.filter((e) => !e.isDir).map((e) => e.path);
  for (let i = 0; i < files.length; i += 50) {
    const contents = await readContents(db, agentId, files.slice(i, i + 50));
    for (const [path, bytes] of contents) {
      const full = onDisk(root, path);
      await mkdir(nodePath.dirname(full), { recursive: true });
      await writeFile(full, bytes);
      snapshot.files.set(path, sha256(bytes));
    }
  }
  return snapshot;
}

interface RunResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  aborted: boolean;
}

function capture(max: number) {
  const chunks: Buffer[] = [];
  let kept = 0;
  let total = 0;
  return {
    push(chunk: Buffer) {
      total += chunk.byteLength;
      if (kept >= max) return;
      const part = chunk.subarray(0, max - kept);
      chunks.push(part);
      kept += part.byteLength;
    },
    text() {
      const text = Buffer.concat(chunks).toString('utf8');
      return total > kept ? `${text}\n[... output truncated: ${total - kept} more bytes of ${total}]` : text;
    },
  };
}

/**
 * bubblewrap's arguments for a command confined to `root`. The system directories are bound
 * read-only (Debian's /bin, /lib and /sbin are links into /usr; /etc holds the alternatives
 * links and CA certificates); nothing else of the host is visible.
 */
function bwrapArgs(root: string, opts: { allowNetwork?: boolean } = {}): string[] {
  const system = ['/usr', '/bin', '/lib', '/lib64', '/sbin', '/etc'].flatMap((d) => ['--ro-bind-try', d, d]);
  return [
    '--unshare-all',
    ...(opts.allowNetwork ? ['--share-net'] : []),
    // The sandbox goes with the worker, and the command cannot reach the worker's terminal.
    '--die-with-parent',
    '--new-session',
    ...system,
    '--proc', '/proc',
    '--dev', '/dev',
    '--tmpfs', '/tmp',
    '--bind', root, root,
    '--chdir', root,
    '--',
  ];
}

let bwrapProbe: Promise<string | undefined> | undefined;

/** Whether bwrap runs here (installed, and namespaces allowed): undefined when it does, else why not. Asked once per process. */
export function bwrapUnavailable(): Promise<string | undefined> {
  bwrapProbe ??= (async () => {
    const dir = await mkdtemp(nodePath.join(os.tmpdir(), 'agentry-bwrap-probe-'));
    try {
      return await new Promise<string | undefined>((resolve) => {
        const child = spawn('bwrap', [...bwrapArgs(dir), 'true'], { env: { PATH: DEFAULT_PATH }, stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ENOENT' ? 'bwrap is not installed (Debian: apt-get install bubblewrap)' : e.message));
        child.on('close', (code) => resolve(code === 0 ? undefined : `bwrap cannot create its namespaces here: ${stderr.trim() || `exit ${code}`}`));
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return bwrapProbe;
}

let warnedUnsandboxed = false;

/** The program and arguments that run `command` in `root`, sandboxed when the configuration and the host allow. */
async function commandLine(command: string, root: string, cfg: Config, ctx: ToolContext): Promise<{ file: string; args: string[]; sandboxed: boolean }> {
  const plain = { file: 'bash', args: ['-c', command], sandboxed: false };
  const mode = cfg.sandbox ?? 'auto';
  if (mode === 'none') {
    // A user-role author could otherwise run commands as the service, read its key and forge an admin.
    if (ctx.allowUnsandboxedBash !== true) {
      throw new ToolError('bash: sandbox: none is not allowed on this server (an operator may allow it with security.allowUnsandboxedBash: true)');
    }
    return plain;
  }
  const why = await bwrapUnavailable();
  if (why === undefined) return { file: 'bwrap', args: [...bwrapArgs(root, { allowNetwork: cfg.allowNetwork }), 'bash', '-c', command], sandboxed: true };
  if (mode === 'bwrap') throw new ToolError(`bash: the sandbox is required (sandbox: bwrap) but ${why}`);
  // Fail closed: without a sandbox the command would run as the service, next to its key.
  if (ctx.allowUnsandboxedBash !== true) {
    throw new ToolError(`bash: refused: no working sandbox (${why}); install bubblewrap (bwrap), or an admin sets security.allowUnsandboxedBash: true to run commands unsandboxed`);
  }
  if (!warnedUnsandboxed) {
    warnedUnsandboxed = true;
    ctx.logger.warn({ reason: why }, 'bash tool runs commands unsandboxed, as the service user: install bubblewrap, or set sandbox: bwrap to refuse');
  }
  return plain;
}

function runCommand(line: { file: string; args: string[] }, cwd: string, cfg: Config, signal: AbortSignal): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const max = cfg.maxOutputBytes ?? 64 * 1024;
    const out = capture(max);
    const err = capture(max);
    const child = spawn(line.file, line.args, {
      cwd,
      env: { PATH: cfg.path ?? DEFAULT_PATH, HOME: cwd, LANG: 'C.UTF-8', PWD: cwd },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so the whole tree is killed on timeout or cancel.
      detached: true,
    });
    let timedOut = false;
    let aborted = false;
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, (cfg.timeout ?? 30) * 1000);
    const onAbort = () => {
      aborted = true;
      killGroup();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    // When bash exits, whatever it left running in the background goes too (and releases the pipes).
    child.on('exit', () => killGroup());
    child.on('error', (e) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('close', (code, sig) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve({ exitCode: code, signal: sig, stdout: out.text(), stderr: err.text(), timedOut, aborted });
    });
  });
}

interface Changes {
  written: string[];
  deleted: string[];
  notes: string[];
}

/** Walks the scratch directory: directories, regular files, and what was skipped (links, odd names). */
async function scan(root: string): Promise<{ dirs: Set<string>; files: Set<string>; skipped: string[]; unreadable: Set<string> }> {
  const dirs = new Set<string>();
  const files = new Set<string>();
  const skipped: string[] = [];
  const unreadable = new Set<string>();
  async function walk(rel: string): Promise<void> {
    let entries;
    try {
      entries = await readdir(rel === '' ? root : onDisk(root, rel), { withFileTypes: true });
    } catch {
      unreadable.add(rel);
      skipped.push(`${rel || '.'}/ (unreadable)`);
      return;
    }
    for (const e of entries) {
      const path = rel === '' ? e.name : `${rel}/${e.name}`;
      let valid = true;
      try {
        valid = normaliseWorkspacePath(path) === path;
      } catch {
        valid = false;
      }
      if (!valid) {
        skipped.push(`${path} (name not allowed in the workspace)`);
        continue;
      }
      if (e.isDirectory()) {
        dirs.add(path);
        await walk(path);
      } else if (e.isFile()) files.add(path);
      else {
        skipped.push(`${path} (${e.isSymbolicLink() ? 'symbolic link' : 'not a regular file'})`);
        unreadable.add(path);
      }
    }
  }
  await walk('');
  return { dirs, files, skipped, unreadable };
}

const under = (path: string, set: Set<string>) => [...set].some((d) => d !== '' && (path === d || path.startsWith(`${d}/`)));

/** Writes what the command changed back to the workspace, in one transaction. */
async function syncBack(ctx: ToolContext, root: string, before: Snapshot, cfg: Config): Promise<Changes> {
  const after = await scan(root);
  const changes: Changes = { written: [], deleted: [], notes: after.skipped.map((s) => `not synced: ${s}`) };
  const maxFile = fileSizeLimit(cfg.maxFileSize, ctx);
  const maxSync = cfg.maxSyncBytes ?? 100 * 1024 * 1024;

  // What vanished (or changed kind). Anything under an unreadable directory is left alone.
  const gone: string[] = [];
  for (const d of before.dirs) if (!after.dirs.has(d) && !after.unreadable.has(d) && !under(d, after.unreadable)) gone.push(d);
  for (const f of before.files.keys()) if (!after.files.has(f) && !after.unreadable.has(f) && !under(f, after.unreadable)) gone.push(f);
  gone.sort();
  const deletions = gone.filter((p) => !gone.some((q) => p.startsWith(`${q}/`)));

  const newDirs = [...after.dirs].filter((d) => !before.dirs.has(d)).sort();
  const writes: Array<{ path: string; bytes: Buffer }> = [];
  let syncBytes = 0;
  for (const path of [...after.files].sort()) {
    let bytes: Buffer;
    try {
      bytes = await readFile(onDisk(root, path));
    } catch {
      changes.notes.push(`not synced: ${path} (unreadable)`);
      continue;
    }
    if (before.files.get(path) === sha256(bytes)) continue;
    if (bytes.byteLength > maxFile) {
      changes.notes.push(`not synced: ${path} (${bytes.byteLength} bytes; the limit is ${maxFile})`);
      continue;
    }
    if (syncBytes + bytes.byteLength > maxSync) {
      changes.notes.push(`not synced: ${path} (over the ${maxSync} bytes written back per call)`);
      continue;
    }
    syncBytes += bytes.byteLength;
    writes.push({ path, bytes });
  }
  if (deletions.length === 0 && newDirs.length === 0 && writes.length === 0) return changes;

  const quota = await workspaceQuota(ctx);
  await dbCall(() =>
    inWorkspaceTransaction(ctx.db, ctx.agentId, async (trx) => {
      for (const path of deletions) await deleteWorkspaceTree(trx, ctx.agentId, path);
      for (const dir of newDirs) {
        // The files written below create their own parents; only empty directories need this.
        if (writes.some((w) => w.path.startsWith(`${dir}/`)) || newDirs.some((d) => d.startsWith(`${dir}/`))) continue;
        if (!(await getWorkspaceEntry(trx, ctx.agentId, dir))) await makeWorkspaceDir(trx, ctx.agentId, dir);
      }
      for (const w of writes) await writeWorkspaceFile(trx, ctx.agentId, w.path, w.bytes, 'overwrite', quota);
    }),
  );
  changes.deleted = deletions;
  changes.written = writes.map((w) => w.path);
  return changes;
}

export const bashTool: BuiltinTool = {
  ...bashSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('bash', Parameters, raw);
    const cfg = checkConfig<Config>('bash', Config, ctx.config);
    const reason = await denied(args.command, cfg.denyList ?? [], cfg.denyListTimeoutMs ?? 1000, ctx.signal);
    if (reason) throw new ToolError(`bash: command refused by the deny list (${reason})`);

    const root = await mkdtemp(nodePath.join(os.tmpdir(), 'agentry-bash-'));
    try {
      const before = await materialise(ctx.db, ctx.agentId, root, cfg);
      ctx.signal.throwIfAborted();
      const line = await commandLine(args.command, root, cfg, ctx);
      const result = await runCommand(line, root, cfg, ctx.signal);
      if (result.aborted) ctx.signal.throwIfAborted();
      // A timed-out command's files are saved too: what it wrote before the kill is real work.
      const changes = await syncBack(ctx, root, before, cfg);
      ctx.logger.debug({ exitCode: result.exitCode, timedOut: result.timedOut, sandboxed: line.sandboxed, written: changes.written.length, deleted: changes.deleted.length }, 'bash tool ran');
      return JSON.stringify({
        success: result.exitCode === 0 && !result.timedOut,
        exitCode: result.exitCode,
        ...(result.signal ? { signal: result.signal } : {}),
        ...(result.timedOut ? { timedOut: true, error: `killed after the ${cfg.timeout ?? 30} s timeout` } : {}),
        stdout: result.stdout,
        stderr: result.stderr,
        sandboxed: line.sandboxed,
        written: changes.written,
        deleted: changes.deleted,
        ...(changes.notes.length > 0 ? { notes: changes.notes } : {}),
      });
    } finally {
      await rm(root, { recursive: true, force: true, maxRetries: 2 }).catch((err: unknown) =>
        ctx.logger.warn({ err, dir: root }, 'bash tool: could not remove its scratch directory'),
      );
    }
  },
};
