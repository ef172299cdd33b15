import type { RuleChainDsl } from './dsl.js';

/** A value as metadata holds it: text as it is, nothing as '', anything else as JSON. */
export function toMetadataValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return JSON.stringify(value);
}

/** The two maps RuleGo fills node configurations from: the chain's and the server's. */
export interface ChainVars {
  /** `ruleChain.configuration.vars`, values as text. */
  vars: Readonly<Record<string, string>>;
  /** The server-level map (`worker.chain_globals`). */
  global: Readonly<Record<string, string>>;
}

/** `ruleChain.configuration.vars` as text values (RuleGo turns them into strings too). */
export function chainVars(dsl: RuleChainDsl): Record<string, string> {
  const vars = dsl.ruleChain.configuration?.vars;
  if (vars === null || typeof vars !== 'object' || Array.isArray(vars)) return {};
  return Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, toMetadataValue(v)]));
}

const PLACEHOLDER = /\$\{\s*(vars|global)\.([^{}\s]+)\s*\}/g;

/**
 * A node configuration with `${vars.x}` and `${global.x}` filled in every string, at any depth,
 * as RuleGo does when it initialises a node. A name neither map has stays as written, and
 * message placeholders (`${metadata.x}`, `${msg.x}`) are left for the node to fill per message.
 */
export function fillChainVars<T>(value: T, env: ChainVars): T {
  if (typeof value === 'string') {
    if (!value.includes('${')) return value;
    return value.replace(PLACEHOLDER, (whole, scope: 'vars' | 'global', key: string) => {
      const map = scope === 'vars' ? env.vars : env.global;
      return Object.hasOwn(map, key) ? (map[key] as string) : whole;
    }) as T;
  }
  if (Array.isArray(value)) return value.map((v: unknown) => fillChainVars(v, env)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fillChainVars(v, env)])) as T;
  }
  return value;
}
