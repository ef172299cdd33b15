// Trims the production node_modules of the image (deploy/Dockerfile, stage prod-deps) to what the
// runtime loads. `npm ci --omit=dev` still installs every dependency of the root package.json,
// which serves development too (tsx and its esbuild binary, the web UI's React that Vite has
// already bundled), and every package ships types, source maps and docs that Node never reads.
//
//   node prune-modules.mjs <app dir> <workspace dir>...
//
// Keeps the packages reachable from the given workspaces' and the root's dependencies (and optional and peer
// dependencies that are installed), resolved the way Node resolves them (nearest node_modules
// first); deletes the rest. Then deletes files no runtime reads. Prints what it removed, in MB.
import fs from 'node:fs';
import path from 'node:path';

const [appDir, ...workspaces] = process.argv.slice(2);
if (!appDir || workspaces.length === 0) {
  console.error('usage: node prune-modules.mjs <app dir> <workspace dir>...');
  process.exit(64);
}
const app = path.resolve(appDir);
const modules = path.join(app, 'node_modules');

// services/web's dependencies are compiled into services/web/build by Vite; at run time the
// package only tells the gateway where that folder is.
const BUNDLED = new Set(['services/web']);

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

/** The directory of `name` as Node finds it from `fromDir`, or undefined. */
function resolvePackage(name, fromDir) {
  let dir = fromDir;
  for (;;) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return fs.realpathSync(candidate);
    const parent = path.dirname(dir);
    if (parent === dir || !parent.startsWith(app)) return undefined;
    dir = parent;
  }
}

const keep = new Set();
const queue = [];
for (const ws of workspaces) {
  const dir = path.join(app, ws);
  keep.add(fs.realpathSync(dir));
  if (!BUNDLED.has(ws)) queue.push({ dir, required: true });
}
// The root package.json's dependencies are roots too: some code imports a package only the root
// declares (libs/engine's sandbox loads quickjs-emscripten). Except tsx: it runs the TypeScript
// sources in development (npm run start:*); the image runs compiled JavaScript.
const ROOT_DEV_ONLY = new Set(['tsx']);
const rootPkg = readJson(path.join(app, 'package.json'));
for (const name of Object.keys(rootPkg.dependencies ?? {})) {
  if (ROOT_DEV_ONLY.has(name)) continue;
  const found = resolvePackage(name, app);
  if (!found) throw new Error(`package.json needs ${name}, which is not installed`);
  if (!keep.has(found)) {
    keep.add(found);
    queue.push({ dir: found, required: true });
  }
}
while (queue.length > 0) {
  const { dir } = queue.pop();
  const pkg = readJson(path.join(dir, 'package.json'));
  const wanted = [
    ...Object.keys(pkg.dependencies ?? {}).map((n) => [n, true]),
    ...Object.keys(pkg.optionalDependencies ?? {}).map((n) => [n, false]),
    ...Object.keys(pkg.peerDependencies ?? {}).map((n) => [n, false]),
  ];
  for (const [name, required] of wanted) {
    const found = resolvePackage(name, dir);
    if (!found) {
      // npm skips optional dependencies of other platforms, and peers may be absent by design.
      if (required) throw new Error(`${pkg.name} needs ${name}, which is not installed`);
      continue;
    }
    if (keep.has(found)) continue;
    keep.add(found);
    if (!BUNDLED.has(path.relative(app, found))) queue.push({ dir: found, required });
  }
}

let removedBytes = 0;
const sizeOf = (p) => {
  const st = fs.lstatSync(p);
  if (!st.isDirectory()) return st.size;
  return fs.readdirSync(p).reduce((n, e) => n + sizeOf(path.join(p, e)), 0);
};
const remove = (p) => {
  removedBytes += sizeOf(p);
  fs.rmSync(p, { recursive: true, force: true });
};

/** Package directories under a node_modules folder (scoped ones one level deeper). */
function packagesIn(nm) {
  if (!fs.existsSync(nm)) return [];
  return fs.readdirSync(nm).flatMap((entry) => {
    if (entry.startsWith('.')) return [];
    const p = path.join(nm, entry);
    if (entry.startsWith('@')) return fs.readdirSync(p).map((e) => path.join(p, e));
    return [p];
  });
}

let droppedPackages = 0;
function prunePackages(nm) {
  for (const p of packagesIn(nm)) {
    const real = fs.lstatSync(p).isSymbolicLink() ? fs.realpathSync(p) : p;
    if (!keep.has(real)) {
      remove(p);
      droppedPackages++;
      continue;
    }
    if (!fs.lstatSync(p).isSymbolicLink()) prunePackages(path.join(p, 'node_modules'));
  }
  for (const scope of fs.existsSync(nm) ? fs.readdirSync(nm).filter((e) => e.startsWith('@')) : []) {
    if (fs.readdirSync(path.join(nm, scope)).length === 0) fs.rmdirSync(path.join(nm, scope));
  }
}
prunePackages(modules);
const packagesBytes = removedBytes;

// Files that no `require`/`import` reaches at run time. Licences stay.
const DROP_FILE = /(\.d\.[cm]?ts|\.d\.ts\.map|\.map|\.tsbuildinfo|\.md|\.markdown)$/i;
const KEEP_FILE = /^(licen[cs]e|notice|copying)/i;
// Only at a package's top level: deeper down, such names are code (yaml's dist/doc/).
const DROP_DIR = new Set(['test', 'tests', '__tests__', 'docs', 'example', 'examples', '.github', 'benchmark', 'benchmarks']);
// msgpackr-extract ships builds for musl and glibc and for one old ABI besides N-API; this image
// is glibc and Node loads the N-API build.
const FOREIGN_NATIVE = /\.(musl)\.node$|\.abi\d+\.(glibc|musl)\.node$/;
function pruneFiles(dir) {
  const packageRoot = fs.existsSync(path.join(dir, 'package.json'));
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      if (packageRoot && DROP_DIR.has(entry.name)) remove(p);
      else pruneFiles(p);
    } else if ((DROP_FILE.test(entry.name) && !KEEP_FILE.test(entry.name)) || FOREIGN_NATIVE.test(entry.name)) remove(p);
  }
}
pruneFiles(modules);

const mb = (n) => (n / 1024 / 1024).toFixed(1);
console.log(`prune-modules: ${droppedPackages} packages not reachable from the runtime (${mb(packagesBytes)} MB), ${mb(removedBytes - packagesBytes)} MB of types, maps, docs and tests`);
