/**
 * Reads V8 CPU profiles (`.cpuprofile`, as `BENCH_CPU_PROF=<dir>` makes the bench children write)
 * and prints where the time went: self time by function and by package, and the inclusive time
 * of our own functions, so the top costs of a hot path can be named before and after a change.
 *
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:throughput -- --quick --no-write
 *   npx tsx bench/cpu-profile.ts /tmp/prof/cluster-gateway [--top=30] [--skip=<seconds of start-up to leave out>]
 *
 * A directory argument takes every profile below it (one per thread; the main thread's is the
 * largest). Idle and GC are shown apart; percentages are of the busy (non-idle) time.
 */
import fs from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const argv = process.argv.slice(2);
const top = Number(argv.find((a) => a.startsWith('--top='))?.slice(6) ?? 25);
/** Samples in the first N seconds of each profile are left out (start-up: module loading, schema compiles). */
const skipUs = Number(argv.find((a) => a.startsWith('--skip='))?.slice(7) ?? 0) * 1e6;
const inputs = argv.filter((a) => !a.startsWith('--'));
if (inputs.length === 0) {
  console.error('usage: npx tsx bench/cpu-profile.ts <profile or directory>... [--top=N]');
  process.exit(2);
}

function walk(p: string): string[] {
  if (fs.statSync(p).isDirectory()) return fs.readdirSync(p).flatMap((f) => walk(path.join(p, f)));
  return p.endsWith('.cpuprofile') ? [p] : [];
}
const files = inputs.flatMap(walk);

/** `node_modules/<pkg>` (scoped too), `agentry:<package>` for ours, `node:` for the runtime. */
function owner(url: string): string {
  if (url === '') return '(native/v8)';
  if (url.startsWith('node:')) return 'node:*';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const m = /\/(libs|services|bench)\/([^/]+)\//.exec(url);
  return m ? `agentry:${m[1]}/${m[2]}` : url;
}

const short = (url: string) => url.replace(/^file:\/\//, '').replace(/^.*\/(libs|services|node_modules|bench)\//, '$1/');

for (const file of files) {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let elapsed = 0;
  prof.samples.forEach((id, i) => {
    elapsed += prof.timeDeltas[i] ?? 0;
    if (elapsed >= skipUs) self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0));
  });

  let total = 0;
  let idle = 0;
  let gc = 0;
  const fnSelf = new Map<string, number>();
  const pkgSelf = new Map<string, number>();
  const oursInclusive = new Map<string, number>();
  const pkgInclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName || '(anonymous)';
    total += us;
    if (name === '(idle)' || name === '(program)') {
      idle += name === '(idle)' ? us : 0;
      if (name === '(idle)') continue;
    }
    if (name === '(garbage collector)') gc += us;
    const key = `${name} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
    fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
    pkgSelf.set(owner(n.callFrame.url), (pkgSelf.get(owner(n.callFrame.url)) ?? 0) + us);
    // Inclusive time of our own frames, and of every package: each once per sample.
    const seen = new Set<string>();
    const pkgs = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!;
      const pkg = owner(f.callFrame.url);
      if (f.callFrame.url !== '' && !pkgs.has(pkg)) {
        pkgs.add(pkg);
        pkgInclusive.set(pkg, (pkgInclusive.get(pkg) ?? 0) + us);
      }
      if (!pkg.startsWith('agentry:')) continue;
      const k = `${f.callFrame.functionName || '(anonymous)'} ${short(f.callFrame.url)}:${f.callFrame.lineNumber + 1}`;
      if (seen.has(k)) continue;
      seen.add(k);
      oursInclusive.set(k, (oursInclusive.get(k) ?? 0) + us);
    }
  }
  const busy = total - idle;
  const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
  const share = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
  const list = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `  ${ms(us)} ms ${share(us)}  ${k}`)
      .join('\n');
  console.log(`\n# ${file}\nbusy ${ms(busy).trim()} ms of ${ms(total).trim()} ms sampled; GC ${share(gc).trim()} of busy`);
  console.log(`\nself time by package:\n${list(pkgSelf, 15)}`);
  console.log(`\ninclusive time by package (callees included; a sample counts once per package on its stack):\n${list(pkgInclusive, 20)}`);
  console.log(`\nself time by function (top ${top}):\n${list(fnSelf, top)}`);
  console.log(`\ninclusive time of Agentry functions (top ${top}):\n${list(oursInclusive, top)}`);
}
