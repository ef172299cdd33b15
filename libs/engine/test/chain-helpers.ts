import pino from 'pino';
import { ChainError, ChainRunner, nodeTypes, type ChainContext, type RuleMsg } from '../src/index.js';
import { type ParsedChain, parseChain, validateRuleChain } from '@agentry/definitions';

/** Helpers of the node-type tests: chains written as short lists, a context, the log lines. */

export type N = { id: string; type: string; configuration?: Record<string, unknown> };
export type C = [from: string, to: string, type: string];

export function chain(id: string, nodes: N[], connections: C[] = []): ParsedChain {
  const loaded = parseChain({ id, dsl: dslOf(id, nodes, connections) });
  if (!loaded.ok) throw new Error(loaded.error);
  return loaded.chain;
}

/** A chain with node types the registry does not know (run by a runner given their executors). */
export function customChain(id: string, nodes: N[], connections: C[] = []): ParsedChain {
  const known = chain(id, nodes.map((n) => (nodeTypes[n.type] ? n : { id: n.id, type: 'end' })), connections);
  return { ...known, nodes: new Map(nodes.map((n) => [n.id, n])) };
}

export function dslOf(id: string, nodes: N[], connections: C[] = []) {
  return {
    ruleChain: { id, name: `Chain ${id}` },
    metadata: { nodes, connections: connections.map(([fromId, toId, type]) => ({ fromId, toId, type })) },
  };
}

/** What `validateRuleChain` says of a chain with this one node (the errors, [] when valid). */
export function problemsOf(node: N): string[] {
  const result = validateRuleChain(dslOf('v', [node]));
  return result.ok ? [] : result.errors;
}

export const js = (id: string, type: 'jsFilter' | 'jsTransform' | 'jsSwitch', jsScript: string): N => ({ id, type, configuration: { jsScript } });

export const logLines: Array<Record<string, unknown>> = [];
const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) });

export const runner = new ChainRunner();

export function context(sandbox: ChainContext['sandbox'] = { run: () => Promise.reject(new Error('no scripts in this test')) }, signal: AbortSignal = new AbortController().signal): ChainContext {
  return {
    logger,
    signal,
    sandbox,
    runChain: () => Promise.reject(new Error('no sub-chains in this test')),
    complete: () => Promise.reject(new Error('no model in this test')),
    runAgent: () => Promise.reject(new Error('no agent in this test')),
  };
}

export const data = (msg: RuleMsg) => JSON.parse(msg.data) as unknown;

/** The ChainError a run fails with (the test fails when the run succeeds). */
export async function runError(c: ParsedChain, msg: RuleMsg, ctx: ChainContext): Promise<ChainError> {
  const err = await runner.run(c, msg, ctx).then(
    () => new Error('expected the run to fail'),
    (e: unknown) => e,
  );
  if (!(err instanceof ChainError)) throw err;
  return err;
}
