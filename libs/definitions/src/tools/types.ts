import type { TSchema } from 'typebox';

/**
 * A built-in tool as a definition sees it: what an agent may name in its `tools`, the JSON
 * schema of the model's arguments and of its per-agent `config`. The engine adds `run`.
 */
export interface ToolSpec<P extends TSchema = TSchema, C extends TSchema = TSchema> {
  name: string;
  description: string;
  parameters: P;
  /** Schema of `tools[].config` for this tool in an `ai/agent` node (all fields optional). */
  configSchema: C;
  /** Off unless an agent lists the tool by name (bash, http_fetch, send_message). */
  optIn?: boolean;
}

/** Keeps the schemas' types, so that the engine's `run` reads typed arguments and config. */
export function defineToolSpec<P extends TSchema, C extends TSchema>(spec: ToolSpec<P, C>): ToolSpec<P, C> {
  return spec;
}
