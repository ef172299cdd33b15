import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `@agentry/web` is an asset package: the web UI is built by Vite into `services/web/build/`
 * (`npm run build`, or `npm start` when missing or stale), and the gateway serves that
 * directory. This module only says where it is; it never builds anything.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
// From src/ (sources, tsx) or dist/src/ (compiled): the package root holds build/.
const packageRoot = path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..');

/** Absolute path of the built UI (index.html and hashed assets/). */
export const webBuildDir = path.join(packageRoot, 'build');

/** Whether the UI has been built (its index.html exists). */
export function webBuildExists(dir: string = webBuildDir): boolean {
  return fs.existsSync(path.join(dir, 'index.html'));
}
