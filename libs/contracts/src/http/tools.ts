import Type, { type Static } from 'typebox';

/**
 * `GET /tools` and `GET /tools/forms`. The schemas inside (a tool's arguments and config, a node
 * type's configuration) are JSON Schema documents, sent whole: they stay free-form here.
 */
const JsonSchema = Type.Unknown({ description: 'a JSON Schema document' });

export const ToolInfo = Type.Object({ name: Type.String(), description: Type.String(), parameters: JsonSchema, optIn: Type.Boolean() });
export type ToolInfo = Static<typeof ToolInfo>;

export const ToolList = Type.Array(ToolInfo);
export type ToolList = Static<typeof ToolList>;

export const ToolForms = Type.Object({
  nodes: Type.Array(Type.Object({ type: Type.String(), description: Type.String(), configuration: JsonSchema })),
  tools: Type.Array(
    Type.Object({ name: Type.String(), description: Type.String(), optIn: Type.Boolean(), parameters: JsonSchema, config: JsonSchema }),
  ),
  toolKinds: Type.Array(Type.String()),
  toolKindForms: Type.Array(
    Type.Object({ kind: Type.String(), description: Type.String(), required: Type.Array(Type.String()), config: Type.Union([JsonSchema, Type.Null()]) }),
  ),
  /** The shape of one entry of an `ai/agent` node's `tools`. */
  toolEntry: JsonSchema,
});
export type ToolForms = Static<typeof ToolForms>;
