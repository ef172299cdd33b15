import type { RuleChainDsl, ToolForms } from '@agentry/client';
import { AGENT_FIELD_HINTS, agentConfigSchema } from './agent-form';
import { chainGraph, type ChainGraph } from './chain-graph';
import { clientProblems, fieldsOf, getAt, type Field, type JsonSchema } from './schema-form';

/**
 * What the canvas can tell about a chain before Save, from the node types' configuration
 * schemas of `GET /tools/forms` (the very schemas the gateway checks against): unknown node
 * types, missing required settings, numbers out of range and text of the wrong length, and
 * connections that go nowhere. Blockers stop Save (the gateway would refuse them); notes only
 * show on their node. The gateway stays the judge: its 400 lands on the node it names as before.
 */

export interface ChainIssue {
  /** The node the issue is on, or the connection's source node. */
  nodeId: string;
  edgeId?: string;
  /** In words, naming the setting by its form label: `URL pattern: required`. */
  text: string;
  /** A blocker stops Save; a note does not. */
  blocker: boolean;
}

/** The form fields of a node type's configuration, labelled as its form labels them (null: no schema). */
export function nodeTypeFields(forms: ToolForms, type: string): Field[] | null {
  const schema = forms.nodes.find((n) => n.type === type)?.configuration as JsonSchema | undefined;
  if (!schema) return null;
  return type === 'ai/agent' ? fieldsOf(agentConfigSchema(schema), AGENT_FIELD_HINTS) : fieldsOf(schema);
}

/** Required settings left out: a nested one only when its parent object is there. */
function missingRequired(fields: readonly Field[], config: unknown): Field[] {
  const out: Field[] = [];
  for (const f of fields) {
    const v = getAt(config, f.path);
    if (v === undefined) {
      if (f.required) out.push(f);
    } else if (f.kind === 'object') out.push(...missingRequired(f.fields, config));
  }
  return out;
}

function labelOf(fields: readonly Field[], id: string): string {
  for (const f of fields) {
    if (f.id === id) return f.label;
    if (f.kind === 'object') {
      const inner = labelOf(f.fields, id);
      if (inner !== id) return `${f.label} › ${inner}`;
    }
  }
  return id;
}

/** The problems of one node's configuration, in words, by its fields (`required`, ranges, lengths). */
export function configIssues(fields: readonly Field[], config: unknown): string[] {
  const out = new Map<string, string>();
  for (const f of missingRequired(fields, config)) out.set(f.id, `${labelOf(fields, f.id)}: required`);
  for (const [id, problem] of Object.entries(clientProblems([...fields], config))) {
    if (problem === 'required' && getAt(config, id.split('.')) === undefined && !out.has(id)) continue;
    if (!out.has(id)) out.set(id, `${labelOf(fields, id)}: ${problem}`);
  }
  return [...out.values()];
}

export function chainIssues(graph: ChainGraph, forms: ToolForms): ChainIssue[] {
  const issues: ChainIssue[] = [];
  const known = new Set(graph.nodes.map((n) => n.id));
  for (const n of graph.nodes) {
    const fields = nodeTypeFields(forms, n.type);
    if (!fields) {
      issues.push({ nodeId: n.id, text: `Unknown node type "${n.type}": this server has no such node`, blocker: true });
      continue;
    }
    for (const text of configIssues(fields, n.doc.configuration ?? {})) issues.push({ nodeId: n.id, text, blocker: true });
  }
  for (const e of graph.edges) {
    if (!known.has(e.source) || !known.has(e.target)) issues.push({ nodeId: e.source, edgeId: e.id, text: `Connection to a node that is not in the chain`, blocker: true });
    else if (!e.relation.trim()) issues.push({ nodeId: e.source, edgeId: e.id, text: `A connection to ${e.target} has no relation`, blocker: true });
    else if (e.source === e.target) issues.push({ nodeId: e.source, edgeId: e.id, text: `Connected to itself (${e.relation}): a message would loop here`, blocker: false });
  }
  // Nodes a run never reaches (RuleGo accepts them; they are most often a connection forgotten).
  const reached = new Set<string>();
  const queue = graph.firstId !== undefined ? [graph.firstId] : [];
  while (queue.length) {
    const at = queue.pop() as string;
    if (reached.has(at)) continue;
    reached.add(at);
    for (const e of graph.edges) if (e.source === at) queue.push(e.target);
  }
  for (const n of graph.nodes) {
    if (!reached.has(n.id) && n.type !== 'comment') issues.push({ nodeId: n.id, text: 'Not reached from the start node: connect something to it', blocker: false });
  }
  return issues;
}

/** The issues by node id. */
export function issuesByNode(issues: readonly ChainIssue[]): Record<string, ChainIssue[]> {
  const out: Record<string, ChainIssue[]> = {};
  for (const i of issues) (out[i.nodeId] ??= []).push(i);
  return out;
}

/** `chainIssues` of the DSL tab's text; none while it is not a chain yet (a syntax error is the editor's to show). */
export function textIssues(text: string, forms: ToolForms): ChainIssue[] {
  try {
    const dsl = JSON.parse(text) as RuleChainDsl;
    return Array.isArray(dsl?.metadata?.nodes) && Array.isArray(dsl.metadata.connections) ? chainIssues(chainGraph(dsl), forms) : [];
  } catch {
    return [];
  }
}
