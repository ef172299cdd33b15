import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { Value } from 'typebox/value';
import { Errors } from '@agentry/errors';
import { ConfigSchema, describeErrors, type AgentryConfig } from './config-schema.js';
import { invalidCidrs } from './address-list.js';

export interface LoadedConfig {
  config: AgentryConfig;
  /** The file that was read, or null when running on built-in defaults. */
  source: string | null;
  /** The file's values after `${NAME}` substitution, before defaults: what the file seeds. */
  fileValues: Record<string, unknown>;
  /** Absolute paths derived from `data`. */
  paths: { rootDir: string; logsDir: string };
  /** What PORT/HOST override: applied again whenever the live configuration changes. */
  envPatch: Record<string, unknown>;
}

export interface LoadOptions {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
}

/** Which file to read: `--config`, then AGENTRY_CONFIG, then ./config.yaml, then none. */
export function findConfigFile(opts: LoadOptions): string | null {
  const { values } = parseArgs({
    args: [...opts.argv],
    options: { config: { type: 'string', short: 'c' } },
    strict: false,
    allowPositionals: true,
  });
  const given = typeof values.config === 'string' ? values.config : opts.env.AGENTRY_CONFIG;
  if (given) {
    const file = path.resolve(opts.cwd, given);
    if (!fs.existsSync(file)) throw new Errors.CONFIG(`config file ${given} does not exist`);
    return file;
  }
  const local = path.resolve(opts.cwd, 'config.yaml');
  return fs.existsSync(local) ? local : null;
}

const VAR = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * Replaces `${NAME}` and `${NAME:-default}` in every string value; `$${` stays a literal `${`.
 * Results are strings; validation converts them where the schema wants a number or boolean,
 * so `port: ${PORT:-9527}` works while a password of digits stays a string.
 */
export function substituteEnv(value: unknown, env: LoadOptions['env'], where = ''): unknown {
  if (typeof value === 'string') {
    return value.replace(VAR, (match, name: string | undefined, fallback: string | undefined) => {
      if (match === '$${') return '${';
      const v = env[name!];
      if (v !== undefined && v !== '') return v;
      if (fallback !== undefined) return fallback;
      throw new Errors.CONFIG(`${where || '(root)'}: environment variable ${name} is not set`);
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, env, `${where}[${i}]`));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, substituteEnv(v, env, where ? `${where}.${k}` : k)]),
    );
  }
  return value;
}

function readFile(file: string): Record<string, unknown> {
  const name = path.basename(file);
  let doc: unknown;
  try {
    doc = parseYaml(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    if (err instanceof YAMLParseError) {
      const pos = err.linePos?.[0];
      const firstLine = err.message.split('\n')[0] ?? err.message;
      throw new Errors.CONFIG(`${name}: bad YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${firstLine}`);
    }
    throw new Errors.CONFIG(`${name}: cannot read: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Errors.CONFIG(`${name}: the top level must be a mapping`);
  return doc as Record<string, unknown>;
}

/**
 * Checks that span fields, after the schema passed. Providers live in Postgres (the file only
 * seeds them, the API adds more), so `models.default_provider` is checked against the file's own
 * providers only when the file itself sets both (the start-up check of the file, `file`: `raw` is
 * the file's content); `PUT /config` and the provider routes check it against the database.
 */
function crossCheck(config: AgentryConfig, raw: Record<string, unknown>, file: boolean): string[] {
  const problems: string[] = [];
  const { default_provider, providers } = config.models;
  const fileModels = file ? (raw.models as { default_provider?: unknown; providers?: unknown } | null | undefined) : undefined;
  const fileSetsBoth = Boolean(fileModels?.default_provider) && fileModels?.providers != null;
  if (fileSetsBoth && default_provider && !(default_provider in providers)) {
    problems.push(`models.default_provider: "${default_provider}" is not one of models.providers`);
  }
  for (const [id, p] of Object.entries(providers)) {
    const defaults = (p.models ?? []).filter((m) => m.alias === 'default');
    if (defaults.length > 1) problems.push(`models.providers.${id}.models: more than one model has alias "default"`);
  }
  for (const [list, entries] of Object.entries(config.security.allowFrom)) {
    const bad = invalidCidrs(entries);
    if (bad.length > 0) problems.push(`security.allowFrom.${list}: not a CIDR or address: ${bad.map((b) => JSON.stringify(b)).join(', ')}`);
  }
  return problems;
}

/** Flat `path -> value` overrides from the environment (PORT, HOST, AGENTRY_LOG_FORMAT). */
function envPatch(env: LoadOptions['env']): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  if (env.PORT !== undefined && env.PORT !== '') {
    const port = Number(env.PORT);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Errors.CONFIG(`PORT: "${env.PORT}" is not a port number`);
    patch['server.port'] = port;
  }
  if (env.HOST) patch['server.host'] = env.HOST;
  if (env.AGENTRY_LOG_FORMAT) {
    if (!['auto', 'json', 'pretty'].includes(env.AGENTRY_LOG_FORMAT)) {
      throw new Errors.CONFIG(`AGENTRY_LOG_FORMAT: "${env.AGENTRY_LOG_FORMAT}" is not one of auto, json, pretty`);
    }
    patch['logging.format'] = env.AGENTRY_LOG_FORMAT;
  }
  return patch;
}

/** Sets `a.b.c` style paths on a (cloned) object. */
export function applyFlat<T extends object>(target: T, flat: Record<string, unknown>): T {
  const out = structuredClone(target) as Record<string, unknown>;
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (!next || typeof next !== 'object') node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]!] = value;
  }
  return out as T;
}

/**
 * Validates a complete configuration object (defaults applied here). Throws CONFIG errors.
 * `opts.file`: `raw` is the configuration file itself (see crossCheck).
 */
export function validateConfig(raw: Record<string, unknown>, label: string, opts: { file?: boolean } = {}): AgentryConfig {
  const withDefaults = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, structuredClone(raw))) as unknown;
  const problems = describeErrors(ConfigSchema, withDefaults);
  if (problems.length > 0) throw new Errors.CONFIG(`${label}: ${problems.join('; ')}`);
  const config = withDefaults as AgentryConfig;
  const cross = crossCheck(config, raw, opts.file === true);
  if (cross.length > 0) throw new Errors.CONFIG(`${label}: ${cross.join('; ')}`);
  return config;
}

/** Parsed once at start; throws an AppError with code CONFIG naming the problem. */
export function loadConfig(opts: LoadOptions): LoadedConfig {
  const source = findConfigFile(opts);
  const raw = source ? readFile(source) : {};
  const label = source ? path.basename(source) : 'defaults';
  const fileValues = substituteEnv(raw, opts.env) as Record<string, unknown>;
  const patch = envPatch(opts.env);
  const config = applyFlat(validateConfig(fileValues, label, { file: true }), patch);
  return { config, source, fileValues, paths: resolvePaths(config, opts.cwd), envPatch: patch };
}

export function resolvePaths(config: AgentryConfig, cwd: string): LoadedConfig['paths'] {
  const rootDir = path.resolve(cwd, config.data.root_dir);
  const logsDir = config.data.logs_dir ? path.resolve(cwd, config.data.logs_dir) : path.join(rootDir, 'logs');
  return { rootDir, logsDir };
}
