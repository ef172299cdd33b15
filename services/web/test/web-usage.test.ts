import { beforeAll, describe, expect, it } from 'vitest';
import { browserTarget } from './browser-target.js';

/**
 * The Usage page (issue 26 item 2), in Chromium against an embedded gateway and worker with the
 * fake model: after chats by an admin and by a user, the admin sees tokens per day drawn as a
 * chart and the totals by agent, provider and who asked; the user sees only its own. Leaves
 * test-output/web/web-usage.png and web-usage-user.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-usage';
const BOB_PASSWORD = 'bob-password-for-usage';

describe('the Usage page, in Chromium', () => {
  const t = browserTarget({ name: 'web-usage', users: { admin: ADMIN_PASSWORD, bob: BOB_PASSWORD }, viewport: { width: 1280, height: 1000 } });

  /** One chat as `username`, the fake model reporting these tokens. */
  const chat = async (username: string, prompt: number, completion: number) => {
    t.fake.script({ text: 'counted', usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
    const res = await t.api('POST', '/chat/completions', { model: 'metered', messages: [{ role: 'user', content: 'count me' }] }, username);
    expect(res.status, res.text).toBe(200);
  };

  beforeAll(async () => {
    const created = await t.api('POST', '/agents', {
      ruleChain: { id: 'metered', name: 'Metered' },
      metadata: { nodes: [{ id: 'answer', type: 'ai/agent', configuration: { systemPrompt: 'Answer briefly.' } }], connections: [] },
    });
    expect(created.status, created.text).toBe(201);
    await chat('admin', 1000, 200);
    await chat('admin', 500, 100);
    await chat('bob', 40, 2);
  }, 60_000);

  it('an admin sees tokens per day as a chart and the totals by agent, provider and who asked', async () => {
    await t.signIn('admin', '/usage');
    const chart = t.page.getByRole('region', { name: 'Tokens per day' });
    await chart.getByText('1,842 tokens in this period.').waitFor();
    // uPlot drew its canvas and its legend with both series.
    expect(await chart.locator('.uplot canvas').count()).toBe(1);
    expect(await chart.locator('.u-legend').innerText()).toMatch(/Prompt tokens[\s\S]*Completion tokens/);
    const row = (section: string, key: string) => t.page.getByRole('region', { name: section }).getByRole('row').filter({ hasText: key });
    expect((await row('By agent', 'metered').innerText()).split('\t')).toEqual(['metered', '1,540', '302', '1,842', '3']);
    expect((await row('By provider', 'fake').innerText()).split('\t')).toEqual(['fake', '1,540', '302', '1,842', '3']);
    expect((await row('By who asked', 'admin (user)').innerText()).split('\t')).toEqual(['admin (user)', '1,500', '300', '1,800', '2']);
    expect((await row('By who asked', 'bob (user)').innerText()).split('\t')).toEqual(['bob (user)', '40', '2', '42', '1']);
    await t.page.getByLabel('Period').selectOption('7');
    await chart.getByText('1,842 tokens in this period.').waitFor();
    await t.shot('web-usage');
    expect(t.problems).toEqual([]);
  });

  it('a user sees only its own usage, without the by-principal table', async () => {
    await t.signIn('bob', '/usage');
    const chart = t.page.getByRole('region', { name: 'Tokens per day' });
    await chart.getByText('42 tokens in this period.').waitFor();
    expect(await t.page.getByRole('region', { name: 'By who asked' }).count()).toBe(0);
    expect((await t.page.getByRole('region', { name: 'By agent' }).getByRole('row').filter({ hasText: 'metered' }).innerText()).split('\t')).toEqual(['metered', '40', '2', '42', '1']);
    await t.shot('web-usage-user');
    expect(t.problems).toEqual([]);
  });
});
