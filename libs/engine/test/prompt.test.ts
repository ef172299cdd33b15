import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertRuleChain, insertSkill, makeWorkspaceDir, writeWorkspaceFile, type DbHandle } from '@agentry/db';
import { createTestPglite } from '@agentry/testing';
import { agentSystemPrompt, renderSystemPrompt } from '../src/index.js';
import { DEFAULT_SYSTEM_PROMPT } from '@agentry/definitions';

/** The system prompt's template functions over the agent workspace. */

let handle: DbHandle;
const agentId = 'prompt_agent';
const now = new Date('2026-11-22T10:11:12.345Z');

beforeAll(async () => {
  handle = await createTestPglite();
  await insertRuleChain(handle.db, { id: agentId, kind: 'agent', agentId: null, name: 'P', category: 'agents', dsl: { ruleChain: { id: agentId, name: 'P' } } });
  await writeWorkspaceFile(handle.db, agentId, 'AGENTS.md', Buffer.from('# Me\nI help.'), 'create');
  await writeWorkspaceFile(handle.db, agentId, 'notes/rules.md', Buffer.from('Be kind. ${now()} stays as written.'), 'create');
  await writeWorkspaceFile(handle.db, agentId, 'blob.bin', Buffer.from([0, 1, 2, 255]), 'create');
  await writeWorkspaceFile(handle.db, agentId, 'big.txt', Buffer.from('z'.repeat(50)), 'create');
  await makeWorkspaceDir(handle.db, agentId, 'empty_dir');
});
afterAll(async () => {
  await handle?.close();
});

const render = (template: string, extra: { maxIncludeChars?: number } = {}) => renderSystemPrompt(template, { db: handle.db, agentId, now: () => now, ...extra });

describe('renderSystemPrompt', () => {
  it('includes workspace files (quoted or not) without rendering them again', async () => {
    expect(await render('Intro.\n${include(AGENTS.md)}\nEnd.')).toBe('Intro.\n# Me\nI help.\nEnd.');
    expect(await render("${include('notes/rules.md')} | ${include(\"./notes//rules.md\")}")).toBe(
      'Be kind. ${now()} stays as written. | Be kind. ${now()} stays as written.',
    );
    expect(await render('[${ include( AGENTS.md ) }]')).toBe('[# Me\nI help.]');
  });

  it('includes nothing for missing, binary, directory and outside paths, and cuts long files', async () => {
    expect(await render('[${include(missing.md)}][${include(blob.bin)}][${include(empty_dir)}][${include(../x)}][${include(/etc/passwd)}]')).toBe('[][][][][]');
    expect(await render('${include(big.txt)}', { maxIncludeChars: 10 })).toBe('zzzzzzzzzz\n[... big.txt cut at 10 characters]');
  });

  it('answers fileExists, now() and ruleChain.id, and leaves anything else as written', async () => {
    expect(await render('${fileExists(AGENTS.md)} ${fileExists(missing.md)} ${fileExists(empty_dir)} ${fileExists(../../etc/passwd)}')).toBe('true false true false');
    expect(await render('It is ${now()} for ${ruleChain.id}.')).toBe(`It is 2026-11-22T10:11:12.345Z for ${agentId}.`);
    expect(await renderSystemPrompt('${now()}', { db: handle.db, agentId, now })).toBe('2026-11-22T10:11:12.345Z');
    expect(await render('${global.root_dir} ${unknown(x)} ${include(a, b} $HOME ${}')).toBe('${global.root_dir} ${unknown(x)} ${include(a, b} $HOME ${}');
    expect(await render('no placeholders')).toBe('no placeholders');
  });

  it('renders the template\'s default prompt with the agent\'s AGENTS.md', async () => {
    const out = await render(DEFAULT_SYSTEM_PROMPT);
    expect(out).toMatch(/describes you and your task:\n\n# Me\nI help\.$/);
  });

  it('agentSystemPrompt joins the rendered prompt and the skills block', async () => {
    const opts = { db: handle.db, agentId, now };
    expect(await agentSystemPrompt({ systemPrompt: 'Id: ${ruleChain.id}' }, opts)).toBe(`Id: ${agentId}`);
    await insertSkill(handle.db, { scope: 'local', agentId, name: 'triage' }, { description: 'Sort tickets', content: 'steps', status: 'active' });
    const full = await agentSystemPrompt({ systemPrompt: 'Id: ${ruleChain.id}' }, opts);
    expect(full).toMatch(new RegExp(`^Id: ${agentId}\n\n<available_skills>\n[^\n]+\n- triage: Sort tickets\n</available_skills>$`));
    expect(await agentSystemPrompt({ disabledSkills: ['triage'] }, opts)).toBe('');
    expect(await agentSystemPrompt({}, opts)).toMatch(/^<available_skills>/);
  });
});
