import type { ParsedChain } from './types.js';

/** Where the branches a join merges start (RuleGo's LCA of the join's parents). */
export interface JoinAncestors {
  /** Join node id -> the node whose branches it waits for. */
  ancestorOf: ReadonlyMap<string, string>;
  /** Node id -> the joins it is the ancestor of. */
  joinsBelow: ReadonlyMap<string, readonly string[]>;
}

/**
 * For every join node (`isJoin(type)`), the lowest common ancestor of the nodes connected to
 * it: the nearest node every path into the join goes through. Of the common ancestors it takes
 * the one farthest from the first node (shortest-path distance), which is the lowest one in the
 * DAGs chains are; a join without one (nothing leads to it) is absent and runs per arrival.
 */
export function joinAncestors(chain: ParsedChain, isJoin: (type: string) => boolean): JoinAncestors {
  const incoming = new Map<string, Set<string>>();
  for (const [from, edges] of chain.outgoing) {
    for (const c of edges) {
      const set = incoming.get(c.toId) ?? new Set<string>();
      set.add(from);
      incoming.set(c.toId, set);
    }
  }
  const distance = distancesFrom(chain);
  const ancestorOf = new Map<string, string>();
  const joinsBelow = new Map<string, string[]>();
  for (const node of chain.nodes.values()) {
    if (!isJoin(node.type)) continue;
    const parents = [...(incoming.get(node.id) ?? [])];
    if (parents.length === 0) continue;
    let common: Set<string> | undefined;
    for (const p of parents) {
      const up = ancestorsOf(p, incoming);
      common = common ? new Set([...common].filter((id) => up.has(id))) : up;
    }
    common?.delete(node.id);
    const lowest = [...(common ?? [])].sort((a, b) => (distance.get(b) ?? -1) - (distance.get(a) ?? -1))[0];
    if (lowest === undefined) continue;
    ancestorOf.set(node.id, lowest);
    joinsBelow.set(lowest, [...(joinsBelow.get(lowest) ?? []), node.id]);
  }
  return { ancestorOf, joinsBelow };
}

/** `id` and every node with a path to it. */
function ancestorsOf(id: string, incoming: ReadonlyMap<string, ReadonlySet<string>>): Set<string> {
  const seen = new Set([id]);
  const queue = [id];
  for (let i = 0; i < queue.length; i++) {
    for (const p of incoming.get(queue[i] as string) ?? []) {
      if (!seen.has(p)) {
        seen.add(p);
        queue.push(p);
      }
    }
  }
  return seen;
}

/** Shortest number of connections from the first node to each node it reaches. */
function distancesFrom(chain: ParsedChain): Map<string, number> {
  const distance = new Map<string, number>();
  if (chain.firstNodeId === undefined) return distance;
  distance.set(chain.firstNodeId, 0);
  const queue = [chain.firstNodeId];
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i] as string;
    for (const c of chain.outgoing.get(id) ?? []) {
      if (!distance.has(c.toId)) {
        distance.set(c.toId, (distance.get(id) as number) + 1);
        queue.push(c.toId);
      }
    }
  }
  return distance;
}
