import type { Static, TSchema } from 'typebox';
import type { NodeContext, NodeResult, RuleMsg } from '../chain/types.js';
import type { NodeSpec } from '@agentry/definitions';

/**
 * A node type of the rule-chain DSL: its spec (`@agentry/definitions`: type, schema, checks,
 * capabilities) plus what it does when it runs. Adding one is a spec in
 * `libs/definitions/src/nodes/` and a file in this folder exporting
 * `defineNodeType({...spec, execute})`, each with one line in its folder's `index.ts`.
 */
export interface NodeType<S extends TSchema = TSchema> extends NodeSpec<S> {
  /** What the node does when it runs: the message it passes on and the relation(s) to follow. */
  execute(msg: RuleMsg, config: Static<S>, ctx: NodeContext): Promise<NodeResult>;
  /** The branches the node starts run in parallel (`fork`). */
  parallel?: boolean;
  /** The node merges branches (`join`): see `NodeExecutor.join`. */
  join?: { timeoutMs(config: Static<S>): number };
}

/** The former name of `NodeType`. */
export type NodeTypeDef<S extends TSchema = TSchema> = NodeType<S>;

/** Types `execute`'s and `validate`'s `config` from the schema; returns the definition as it is. */
export function defineNodeType<S extends TSchema>(def: NodeType<S>): NodeType<S> {
  return def;
}
