/** The palette's families of node types (components/NodePalette.tsx), by what the type names say. */

export const FAMILIES = ['AI', 'Filters', 'Routing', 'Transforms', 'Flow control', 'Actions', 'Other'] as const;
export type Family = (typeof FAMILIES)[number];

/** The family of a node type, by its name (RuleGo's types are named by what they do). */
export function familyOf(type: string): Family {
  if (type.startsWith('ai/')) return 'AI';
  if (/Filter$/.test(type)) return 'Filters';
  if (/(^s|S)witch$/.test(type)) return 'Routing';
  if (/Transform$/.test(type)) return 'Transforms';
  if (['fork', 'join', 'delay', 'flow', 'end'].includes(type)) return 'Flow control';
  if (['restApiCall', 'log'].includes(type)) return 'Actions';
  return 'Other';
}
