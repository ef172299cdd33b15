import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

const require = createRequire(import.meta.url);

/** The yaml package, loaded on first use: importing it up front costs ~60 ms of every start. */
export function yaml(): typeof Yaml {
  return require('yaml') as typeof Yaml;
}
