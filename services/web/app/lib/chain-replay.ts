import type { ChainGraph } from './chain-graph';

/**
 * A run of a chain replayed on the canvas: which nodes ran (in order), which relation each one
 * chose, how long it took, and which connections the run followed. The steps are the engine's
 * chain trace (`ChainRunner` in libs/engine: one entry per node execution).
 */

export interface RunStep {
  nodeId: string;
  type?: string;
  /** The relations the node chose (`[]` for an end). */
  relations: string[];
  ms: number;
  error?: string;
  /**
   * With RuleGo's `debugMode`: the message the node got and the one it passed on; `redacted`
   * instead when the run is another principal's (the gateway leaves the contents out).
   */
  debug?: { in: unknown; out: unknown } | { redacted: true };
}

export interface NodeReplay {
  /** 1-based positions in the run (a node in a loop runs more than once). */
  order: number[];
  relations: string[];
  ms: number;
  error: string | undefined;
  /** One of its executions failed (an error, or the Failure relation). */
  failed: boolean;
}

/** A step failed when it threw (the engine records the error and takes Failure) or chose Failure. */
export function stepFailed(step: RunStep): boolean {
  return step.error !== undefined || step.relations.includes('Failure');
}

/**
 * The step whose messages show for `nodeId` (clicked on the canvas): `chosen` when it is one of
 * that node's, else the node's first failed execution, else its first; undefined when it never ran.
 */
export function stepOfNode(steps: readonly RunStep[], nodeId: string, chosen: number | null): number | undefined {
  if (chosen !== null && steps[chosen]?.nodeId === nodeId) return chosen;
  const failed = steps.findIndex((s) => s.nodeId === nodeId && stepFailed(s));
  if (failed >= 0) return failed;
  const first = steps.findIndex((s) => s.nodeId === nodeId);
  return first >= 0 ? first : undefined;
}

/** A duration people read: "0.4 ms", "12 ms", "1.8 s", "2 min 5 s". */
export function fmtMs(ms: number): string {
  if (ms < 10) return `${Math.round(ms * 10) / 10} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export interface Replay {
  nodes: Record<string, NodeReplay>;
  /** Edge ids the run followed. */
  edges: string[];
  /** Steps naming a node the chain does not have (it changed since the run). */
  unknown: string[];
  totalMs: number;
}

/** Steps from JSON: an array of steps, or an object carrying one under `steps` or `trace`. */
export function parseSteps(value: unknown): { ok: true; steps: RunStep[] } | { ok: false; problem: string } {
  const list = Array.isArray(value) ? value : value && typeof value === 'object' ? ((value as Record<string, unknown>).steps ?? (value as Record<string, unknown>).trace) : undefined;
  if (!Array.isArray(list)) return { ok: false, problem: 'expected a list of steps, or an object with "steps"' };
  const steps: RunStep[] = [];
  for (const [i, s] of list.entries()) {
    const r = (s ?? {}) as Record<string, unknown>;
    const relations = Array.isArray(r.relations) ? r.relations.filter((x): x is string => typeof x === 'string') : typeof r.relation === 'string' ? [r.relation] : [];
    if (typeof r.nodeId !== 'string') return { ok: false, problem: `step ${i + 1} has no "nodeId"` };
    const ms = typeof r.ms === 'number' ? r.ms : typeof r.durationMs === 'number' ? r.durationMs : 0;
    const debug = r.debug && typeof r.debug === 'object' ? (r.debug as Record<string, unknown>) : undefined;
    steps.push({
      nodeId: r.nodeId,
      ...(typeof r.type === 'string' ? { type: r.type } : {}),
      relations,
      ms,
      ...(typeof r.error === 'string' ? { error: r.error } : {}),
      ...(debug ? { debug: debug.redacted === true ? { redacted: true as const } : { in: debug.in, out: debug.out } } : {}),
    });
  }
  return { ok: true, steps };
}

/**
 * What the canvas shows for `steps`: per node its run positions, relations and time; the edges
 * followed are those from a node along a relation it chose to a node that ran after it.
 */
export function replayOf(graph: ChainGraph, steps: readonly RunStep[]): Replay {
  const nodes: Record<string, NodeReplay> = {};
  const edges = new Set<string>();
  const unknown: string[] = [];
  const known = new Set(graph.nodes.map((n) => n.id));
  steps.forEach((s, i) => {
    if (!known.has(s.nodeId)) {
      if (!unknown.includes(s.nodeId)) unknown.push(s.nodeId);
      return;
    }
    const r = (nodes[s.nodeId] ??= { order: [], relations: [], ms: 0, error: undefined, failed: false });
    r.order.push(i + 1);
    for (const rel of s.relations) if (!r.relations.includes(rel)) r.relations.push(rel);
    r.ms += s.ms;
    r.error ??= s.error;
    r.failed ||= stepFailed(s);
    const later = new Set(steps.slice(i + 1).map((x) => x.nodeId));
    for (const e of graph.edges) if (e.source === s.nodeId && s.relations.includes(e.relation) && later.has(e.target)) edges.add(e.id);
  });
  return { nodes, edges: [...edges], unknown, totalMs: steps.reduce((sum, s) => sum + s.ms, 0) };
}
