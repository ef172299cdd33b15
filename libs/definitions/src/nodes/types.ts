import type { Static, TSchema } from 'typebox';
import type { Capability } from '../authority/policy.js';
import type { UnknownFieldHint } from '../dsl.js';

/**
 * What a node type of the rule-chain DSL is and may be, without what it does: enough to check a
 * saved chain (`validateRuleChain`), to ask the authority policy about it and to draw its form
 * (`GET /tools/forms`). The engine adds `execute` to each (`defineNodeType`); a spec without an
 * implementation fails the engine's tests.
 */
export interface NodeSpec<S extends TSchema = TSchema> {
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
}

/** Types `validate`'s and `capabilities`' `config` from the schema; returns the spec as it is. */
export function defineNodeSpec<S extends TSchema>(spec: NodeSpec<S>): NodeSpec<S> {
  return spec;
}
