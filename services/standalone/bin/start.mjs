// `npm start`: the standalone through scripts/start.mjs, which builds what is stale (a fresh
// clone, edited sources) and runs the compiled JavaScript, as the image does (bundled into one
// file once a background child has made the bundle); the sources under
// tsx only when no build can be made (it says why). Kept as the standalone's own entry.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The web UI's build (Vite, when missing or stale; milliseconds otherwise) runs in a child beside
// the transpile and the database's start instead of before them (a first start waited ~2 s for
// it); main.ts waits for it before the gateway, which serves the build it finds when it starts.
const webBuild = new Promise((resolve) => {
  const child = spawn(process.execPath, [fileURLToPath(new URL('../../web/scripts/ensure-build.mjs', import.meta.url)), '--soft'], { stdio: 'inherit' });
  child.once('error', (err) => {
    console.error(`web UI build could not start: ${err.message}`);
    resolve();
  });
  child.once('exit', () => resolve());
});
globalThis[Symbol.for('agentry.webUiBuild')] = webBuild;

// --bundle: from one file once a bundle is up to date (a restart loads one module, not ~2,000).
process.argv.splice(2, 0, '--bundle', 'services/standalone/src/main.ts');
await import('../../../scripts/start.mjs');
