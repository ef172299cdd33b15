import type { TSchema } from 'typebox';

/**
 * A node type of the rule-chain DSL. Adding one is a file in this folder exporting its
 * definition plus one line in `index.ts`; the engine issue adds what a node does when it runs.
 */
export interface NodeTypeDef<S extends TSchema = TSchema> {
  /** The `type` written in the DSL (`ai/agent`, `jsFilter`, ...). */
  type: string;
  description: string;
  /** Schema of the node's `configuration` (an absent configuration is checked as `{}`). */
  configuration: S;
}

export function defineNodeType<S extends TSchema>(def: NodeTypeDef<S>): NodeTypeDef<S> {
  return def;
}
