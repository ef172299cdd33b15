import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertRuleChain, insertSkill, type DbHandle, type SkillKey } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { activeSkills, skillsPromptBlock } from '../src/index.js';

/** The skills block of the system prompt: which skills, how it is bounded, and the warning. */

let handle: DbHandle;
let n = 0;

beforeAll(async () => {
  handle = await createTestPglite();
});
afterAll(async () => {
  await handle?.close();
});

async function newAgent(): Promise<string> {
  const id = `agent_${++n}`;
  await insertRuleChain(handle.db, { id, kind: 'agent', agentId: null, name: id, category: 'agents', dsl: { ruleChain: { id, name: id } } });
  return id;
}

async function skill(key: SkillKey, description: string, opts: { status?: 'active' | 'draft'; updated?: string } = {}) {
  await insertSkill(handle.db, key, { description, content: `body of ${key.name}`, status: opts.status ?? 'active' });
  if (opts.updated) {
    const at = opts.updated;
    await handle.db
      .updateTable('skills')
      .set({ updated_at: sql<Date>`${at}::timestamptz` })
      .where('name', '=', key.name)
      .where((eb) => (key.scope === 'global' ? eb('agent_id', 'is', null) : eb('agent_id', '=', key.agentId)))
      .execute();
  }
}

function recorder() {
  const warnings: Array<{ obj: unknown; msg: string }> = [];
  return { warnings, logger: { warn: (obj: unknown, msg: string) => void warnings.push({ obj, msg }) } as never };
}

describe('skillsPromptBlock', () => {
  it('lists active skills, local over global, minus disabled ones, and tells the model to use the skill tool', async () => {
    const a = await newAgent();
    const other = await newAgent();
    await skill({ scope: 'global', name: 'g_report' }, 'Write   the\nweekly report');
    await skill({ scope: 'global', name: 'g_shadowed' }, 'the global one');
    await skill({ scope: 'local', agentId: a, name: 'g_shadowed' }, 'the local one');
    await skill({ scope: 'local', agentId: a, name: 'l_draft' }, 'a draft', { status: 'draft' });
    await skill({ scope: 'local', agentId: a, name: 'l_off' }, 'disabled');
    await skill({ scope: 'local', agentId: other, name: 'not_mine' }, 'another agent');

    const block = await skillsPromptBlock(handle.db, a, { disabledSkills: ['l_off'] });
    expect(block).toBe(
      [
        '<available_skills>',
        'Skills hold instructions for particular tasks. When a task matches a skill below, call the `skill` tool with {"skill": "<name>"} to load its instructions, then follow them.',
        '- g_report: Write the weekly report',
        '- g_shadowed: the local one',
        '</available_skills>',
      ].join('\n'),
    );
    expect((await activeSkills(handle.db, a)).map((s) => `${s.scope}:${s.name}`)).toEqual(['global:g_report', 'local:g_shadowed', 'local:l_off']);
    expect(await skillsPromptBlock(handle.db, await newAgent(), { disabledSkills: ['g_report', 'g_shadowed'] })).toBe('');
  });

  it('leaves out the least recently updated skills over budget and warns once per change', async () => {
    const a = await newAgent();
    const long = 'd'.repeat(250);
    await skill({ scope: 'local', agentId: a, name: 'old' }, long, { updated: '2020-01-01T00:00:00Z' });
    await skill({ scope: 'local', agentId: a, name: 'mid' }, long, { updated: '2022-01-01T00:00:00Z' });
    await skill({ scope: 'local', agentId: a, name: 'new' }, long, { updated: '2024-01-01T00:00:00Z' });
    // A huge description is cut in the block.
    await skill({ scope: 'local', agentId: a, name: 'newest_huge' }, 'h'.repeat(5000), { updated: '2025-01-01T00:00:00Z' });

    const { warnings, logger: log } = recorder();
    // The global skills of the test above are visible to every agent: keep them out here.
    const opts = { logger: log, disabledSkills: ['g_report', 'g_shadowed'] };
    const all = await skillsPromptBlock(handle.db, a, opts);
    expect(all).toContain(`- newest_huge: ${'h'.repeat(299)}…\n`);
    expect(all.length).toBeLessThanOrEqual(4000);
    expect(warnings).toEqual([]);

    const budget = 800; // room for the header and two entries
    const block = await skillsPromptBlock(handle.db, a, { budgetChars: budget, ...opts });
    expect(block.length).toBeLessThanOrEqual(budget);
    expect(block).toContain('- new: ');
    expect(block).toContain('- newest_huge: ');
    expect(block).not.toContain('- mid: ');
    expect(block).not.toContain('- old: ');
    expect(block.indexOf('- new:')).toBeLessThan(block.indexOf('- newest_huge:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.obj).toMatchObject({ agentId: a, budgetChars: budget, dropped: ['mid', 'old'] });
    expect(warnings[0]?.msg).toMatch(/over its budget of 800 characters: 2 least recently updated skill\(s\) left out/);

    await skillsPromptBlock(handle.db, a, { budgetChars: budget, ...opts });
    expect(warnings).toHaveLength(1);
    await skillsPromptBlock(handle.db, a, { budgetChars: 600, ...opts });
    expect(warnings).toHaveLength(2);
    expect(warnings[1]?.obj).toMatchObject({ dropped: ['new', 'mid', 'old'] });

    expect(await skillsPromptBlock(handle.db, a, { budgetChars: 50, ...opts })).toBe('');
  });
});
