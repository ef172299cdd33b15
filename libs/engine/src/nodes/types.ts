import type { Static, TSchema } from 'typebox';
import type { NodeContext, NodeResult, RuleMsg } from '../chain/types.js';
import type { Capability } from '../authority/policy.js';
import type { UnknownFieldHint } from '../dsl.js';

/**
 * A node type of the rule-chain DSL: everything about it in one definition. Adding one is a
 * file in this folder exporting `defineNodeType({...})` plus one line in `index.ts`; the DSL
 * validation, `GET /tools/forms` and the chain runner all read that registry.
 */
export interface NodeType<S extends TSchema = TSchema> {
  /** The `type` written in the DSL (`ai/agent`, `jsFilter`, ...). */
  type: string;
  /** One line for forms (`GET /tools/forms`). */
  description: string;
  /** Schema of the node's `configuration` (an absent configuration is checked as `{}`). */
  configuration: S;
  /**
   * Checks the schema cannot express, run on a configuration the schema accepted: one line per
   * problem, starting with the path below `configuration` (`tools[0].timeout is ...`).
   */
  validate?(config: Static<S>): string[];
  /** Advice added to an unknown field's error, for mistakes people often make with this type. */
  unknownFieldHint?: UnknownFieldHint;
  /**
   * The powers the node's configuration (resolved: vars, globals and defaults filled) asks for;
   * the runner asks the authority policy about each before the node runs, and a save is checked
   * the same way. A node type that grants no power leaves it out.
   */
  capabilities?(config: Static<S>): Capability[];
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
