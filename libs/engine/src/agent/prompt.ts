import { isUtf8 } from 'node:buffer';
import type { Logger } from 'pino';
import { readWorkspaceFile, type Db } from '@agentry/db';
import { skillsPromptBlock, type SkillsBlockOptions } from '../skills/inject.js';
import { normaliseWorkspacePath } from '@agentry/definitions';

/**
 * The system prompt's template functions (TpClaw's): `${include(path)}` is a workspace file's
 * text (empty when it is missing, a directory, binary or outside the workspace),
 * `${fileExists(path)}` is `true` or `false` (a directory exists too), `${now()}` the current time in ISO 8601 UTC and
 * `${ruleChain.id}` the agent's id. Paths may be quoted (`include('AGENTS.md')`). Anything else
 * in `${...}` is left as written, and included text is not rendered again.
 */

interface RenderPromptOptions {
  db: Db;
  agentId: string;
  /** The time `${now()}` shows, or a clock (default: the current time). */
  now?: Date | (() => Date);
  /** Characters of one included file kept (default 100000); the rest is cut with a marker. */
  maxIncludeChars?: number;
  logger?: Pick<Logger, 'warn'>;
}

const PLACEHOLDER = /\$\{\s*([^{}]*?)\s*\}/g;
const CALL = /^(include|fileExists)\(\s*(?:"([^"]*)"|'([^']*)'|([^'")]*?))\s*\)$/;

function pathOf(raw: string): string | undefined {
  if (raw.startsWith('/') || raw.includes('\0')) return undefined;
  try {
    const path = normaliseWorkspacePath(raw);
    return path === '' ? undefined : path;
  } catch {
    return undefined;
  }
}

export async function renderSystemPrompt(template: string, opts: RenderPromptOptions): Promise<string> {
  const matches = [...template.matchAll(PLACEHOLDER)];
  if (matches.length === 0) return template;
  const maxChars = opts.maxIncludeChars ?? 100_000;
  const files = new Map<string, Promise<{ entry: unknown; content: Buffer | null } | undefined>>();
  const read = (path: string) => {
    let pending = files.get(path);
    if (!pending) {
      pending = readWorkspaceFile(opts.db, opts.agentId, path);
      files.set(path, pending);
    }
    return pending;
  };

  async function expand(whole: string, inner: string): Promise<string> {
    if (inner === 'now()') return (typeof opts.now === 'function' ? opts.now() : (opts.now ?? new Date())).toISOString();
    if (inner === 'ruleChain.id') return opts.agentId;
    const call = CALL.exec(inner);
    if (!call) return whole;
    const fn = call[1];
    const raw = call[2] ?? call[3] ?? call[4] ?? '';
    const path = pathOf(raw);
    if (!path) {
      opts.logger?.warn({ agentId: opts.agentId, path: raw }, `system prompt: ${fn}() of a path outside the workspace`);
      return fn === 'fileExists' ? 'false' : '';
    }
    const found = await read(path);
    if (fn === 'fileExists') return found ? 'true' : 'false';
    const content = found?.content;
    if (!content || content.subarray(0, 8192).includes(0) || !isUtf8(content)) return '';
    const text = content.toString('utf8');
    return text.length > maxChars ? `${text.slice(0, maxChars)}\n[... ${path} cut at ${maxChars} characters]` : text;
  }

  const values = await Promise.all(matches.map((m) => expand(m[0], m[1] ?? '')));
  let out = '';
  let last = 0;
  matches.forEach((m, i) => {
    out += template.slice(last, m.index) + (values[i] as string);
    last = m.index + m[0].length;
  });
  return out + template.slice(last);
}

interface AgentPromptOptions extends RenderPromptOptions {
  /** Size of the skills block (default 4000 characters). */
  skillsBudgetChars?: number;
  /** Where the agent's skills come from (default: read them; the worker passes its SkillsCache). */
  loadSkills?: SkillsBlockOptions['loadSkills'];
}

/**
 * The agent's whole system prompt: its `systemPrompt` rendered, then the block of its skills
 * (`disabledSkills` left out), separated by a blank line. What the worker's `systemPrompt` hook
 * is meant to answer.
 */
export async function agentSystemPrompt(
  node: { systemPrompt?: string; disabledSkills?: readonly string[] },
  opts: AgentPromptOptions,
): Promise<string> {
  const [prompt, skills] = await Promise.all([
    renderSystemPrompt(node.systemPrompt ?? '', opts),
    skillsPromptBlock(opts.db, opts.agentId, {
      disabledSkills: node.disabledSkills ?? [],
      ...(opts.skillsBudgetChars !== undefined ? { budgetChars: opts.skillsBudgetChars } : {}),
      ...(opts.loadSkills ? { loadSkills: opts.loadSkills } : {}),
      ...(opts.logger ? { logger: opts.logger } : {}),
    }),
  ]);
  return [prompt, skills].filter((part) => part !== '').join('\n\n');
}
