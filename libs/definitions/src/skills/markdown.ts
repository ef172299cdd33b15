import { parse as parseYaml } from 'yaml';
import { MAX_SKILL_BYTES } from '@agentry/contracts';
import { ID_PATTERN } from '../dsl.js';

/** Skill names: letters, digits, `_` and `-`, 1 to 64 of them (the same rule as ids). */
export const SKILL_NAME_PATTERN = ID_PATTERN;
export const SKILL_NAME_REGEX = new RegExp(SKILL_NAME_PATTERN);

// The HTTP contract states the limit (a route refuses a larger body before it gets here).
export { MAX_SKILL_BYTES };

interface ParsedSkill {
  name?: string;
  description?: string;
  /** The Markdown after the front matter. */
  body: string;
}

export class SkillFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SkillFormatError';
  }
}

const FRONT_MATTER = /^\uFEFF?---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;

/**
 * A SKILL.md: Markdown with optional YAML front matter (`name`, `description`, anything else
 * ignored). Throws SkillFormatError for front matter that is not a YAML mapping or whose
 * `name`/`description` is not a string.
 */
export function parseSkillMarkdown(text: string): ParsedSkill {
  const match = FRONT_MATTER.exec(text);
  if (!match) return { body: text.replace(/^\uFEFF/, '') };
  let meta: unknown;
  try {
    meta = parseYaml(match[1] ?? '');
  } catch (err) {
    throw new SkillFormatError(`front matter is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (meta === null || meta === undefined) meta = {};
  if (typeof meta !== 'object' || Array.isArray(meta)) throw new SkillFormatError('front matter is not a YAML mapping');
  const { name, description } = meta as Record<string, unknown>;
  if (name !== undefined && typeof name !== 'string') throw new SkillFormatError('front matter "name" is not a string');
  if (description !== undefined && typeof description !== 'string') {
    throw new SkillFormatError('front matter "description" is not a string');
  }
  const body = text.slice(match[0].length).replace(/^(?:[ \t]*\r?\n)+/, '');
  return { ...(name !== undefined ? { name: name.trim() } : {}), ...(description !== undefined ? { description: description.trim() } : {}), body };
}
