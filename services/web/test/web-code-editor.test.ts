import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { repoRoot } from '@agentry/testing';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * Issue 41's code editors and drag-onto-a-connection, in Chromium at 1440x900 against an embedded
 * gateway: a script typed in the node form's CodeMirror (over a selection of several lines too,
 * with no CSP error) reaches the DSL and the saved agent; the DSL tab's syntax error and the
 * canvas's checks show on their line and block Save as on the canvas; the gateway's 400 shows on
 * its line and stays on its node when a node above it is deleted; a loose node dragged onto a
 * connection goes in between, and one undo takes it out again.
 * Screenshots: docs/screenshots/script-editor.png, docs/screenshots/dsl-tab-error.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-web-code-editor';
let page: Page;
let t: BrowserTarget;
const step = (name: string, fn: () => Promise<void>) => t.step(name, fn);
const shots = path.join(repoRoot, 'docs', 'screenshots');
const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);
const edgeCount = () => page.locator('.react-flow__edge').count();

type Saved = { metadata: { nodes: Array<{ id: string; type: string; configuration?: Record<string, unknown> }>; connections: Array<{ fromId: string; toId: string; type: string }> } };
const saved = async (id: string) => JSON.parse((await t.api('GET', `/agents/${id}`)).text) as Saved;
const links = (dsl: { metadata: Saved['metadata'] }) => dsl.metadata.connections.map((c) => `${c.fromId} -${c.type}-> ${c.toId}`).sort();
const at = (x: number, y: number) => ({ layoutX: x, layoutY: y });

/** a (ai/agent) -> f (jsFilter) -True-> b (log); `x` (log) connected to nothing. */
function chain(id: string) {
  return {
    ruleChain: { id, name: id },
    metadata: {
      nodes: [
        { id: 'a', type: 'ai/agent', configuration: {}, additionalInfo: at(0, 0) },
        { id: 'f', type: 'jsFilter', configuration: { jsScript: 'return true;' }, additionalInfo: at(300, 0) },
        { id: 'b', type: 'log', configuration: {}, additionalInfo: at(600, 0) },
        { id: 'x', type: 'log', configuration: {}, additionalInfo: at(300, 260) },
      ],
      connections: [
        { fromId: 'a', toId: 'f', type: 'Success' },
        { fromId: 'f', toId: 'b', type: 'True' },
      ],
    },
  };
}

/** `chain(id)` with b a restApiCall that the canvas's checks pass, and no positions (the DSL tab draws the lines in sight only). */
function restChain(id: string) {
  const dsl = chain(id);
  const nodes: Array<Record<string, unknown>> = dsl.metadata.nodes.map(({ additionalInfo: _, ...n }) => n);
  nodes[2] = { id: 'b', type: 'restApiCall', configuration: { requestMethod: 'GET', restEndpointUrlPattern: 'https://example.test/x' } };
  return { ...dsl, metadata: { ...dsl.metadata, nodes } };
}

async function openTab(id: string, tab: 'Canvas' | 'DSL (JSON)'): Promise<void> {
  await page.goto(`${t.base}/agents/${id}`);
  await page.getByRole('tab', { name: tab }).click();
}

async function save(): Promise<void> {
  const toasts = await page.getByText('Agent saved').count();
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText('Agent saved').nth(toasts).waitFor();
}

/** The DSL tab's editor lines as shown (CodeMirror draws one `.cm-line` per line of a document this short). */
const dslLines = () => page.locator('.dsl-field .cm-line').allTextContents();

/** The 1-based line of the DSL tab whose text includes `needle`. */
async function lineWith(needle: string, nth = 0): Promise<number> {
  const lines = await dslLines();
  const hits = lines.map((l, i) => (l.includes(needle) ? i + 1 : 0)).filter(Boolean);
  if (hits[nth] === undefined) throw new Error(`no line with ${needle} in\n${lines.join('\n')}`);
  return hits[nth];
}

/** Types `text` over the last `count` characters of the value `needle` ends with (`"type": "log"`: its `log`), on the first DSL line with it. */
async function typeOver(needle: string, count: number, text: string): Promise<void> {
  const n = await lineWith(needle);
  const line = (await dslLines())[n - 1] as string;
  await page.locator('.dsl-field .cm-line').nth(n - 1).click();
  await page.keyboard.press('End');
  // Back over what follows the value's closing quote, and the quote.
  for (let i = 0; i < line.length - (line.indexOf(needle) + needle.length) + 1; i++) await page.keyboard.press('ArrowLeft');
  for (let i = 0; i < count; i++) await page.keyboard.press('Shift+ArrowLeft');
  await page.keyboard.type(text);
}

/** The line numbers of the DSL tab that carry a lint marker of `severity` in the gutter (by their place on screen). */
async function markedLines(severity: 'error' | 'warning'): Promise<number[]> {
  return page.evaluate((sev) => {
    const lines = Array.from(document.querySelectorAll('.dsl-field .cm-line'));
    const markers = Array.from(document.querySelectorAll(`.dsl-field .cm-lint-marker-${sev}`));
    return markers.map((m) => {
      const y = m.getBoundingClientRect().top + m.getBoundingClientRect().height / 2;
      return lines.findIndex((l) => l.getBoundingClientRect().top <= y && y <= l.getBoundingClientRect().bottom) + 1;
    });
  }, severity);
}

describe('code editors and drag onto a connection in Chromium', () => {
  t = browserTarget({ name: 'web-code-editor', users: { admin: ADMIN_PASSWORD }, viewport: { width: 1440, height: 900 }, timeoutMs: 10_000 });

  beforeAll(async () => {
    ({ page } = t);
    for (const id of ['script', 'dsl', 'splice', 'moved']) {
      const created = await t.api('POST', '/agents', id === 'moved' ? restChain(id) : chain(id));
      expect(created.status, created.text).toBe(201);
    }
    await t.signIn('admin', '/agents');
  }, 240_000);

  it('edits a script in CodeMirror (highlighted, numbered, several lines) and finds it in the DSL and the saved agent', () =>
    step('script', async () => {
      await openTab('script', 'Canvas');
      // A CSP refusal names its element in the problems (the console's own line does not).
      await page.evaluate(() => document.addEventListener('securitypolicyviolation', (e) => console.error('CSPV', e.violatedDirective, e.sample, (e.target as Element)?.outerHTML?.slice(0, 300))));
      await flowNode('f').click();
      const form = page.getByRole('region', { name: 'Node f' });
      const field = form.locator('.code-field').filter({ hasText: 'JS script' });
      const content = field.locator('.cm-content');
      await content.waitFor();
      // Named by its label, with line numbers and JavaScript highlighting (CodeMirror's token classes).
      expect(await content.getAttribute('aria-labelledby')).toBe(await field.locator('label').getAttribute('id'));
      expect(await field.locator('.cm-lineNumbers .cm-gutterElement').filter({ hasText: /^1$/ }).count()).toBe(1);
      expect(await content.locator('.cm-line span[class]').count()).toBeGreaterThan(0);

      await field.locator('label').click();
      expect(await page.evaluate(() => document.activeElement?.classList.contains('cm-content'))).toBe(true);
      await page.keyboard.press('Control+a');
      await page.keyboard.type('const n = msg.data.length;\nreturn n > 2;');
      await expect.poll(() => content.locator('.cm-line').count()).toBe(2);
      // Typed over both lines: one line, and no CSP refusal (Chromium's own edit writes a style attribute).
      await page.keyboard.press('Control+a');
      await page.keyboard.type('x');
      await expect.poll(() => content.locator('.cm-line').allTextContents()).toEqual(['x']);
      expect(t.problems).toEqual([]);
      // And back, typed over one line.
      await page.keyboard.press('Control+a');
      await page.keyboard.type('const n = msg.data.length;\nreturn n > 2;');
      await expect.poll(() => content.locator('.cm-line').count()).toBe(2);
      // Tab is not taken by the editor: it moves on, as in any field.
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => Boolean(document.activeElement?.closest('.cm-editor')))).toBe(false);
      await content.click();
      // The focus ring is visible while it edits.
      expect(await field.locator('.cm-editor').evaluate((el) => `${getComputedStyle(el).outlineStyle} ${getComputedStyle(el).outlineWidth}`)).toBe('solid 3px');
      await page.screenshot({ path: path.join(shots, 'script-editor.png') });

      // Escape leaves the editor, and in the side panel closes it, the focus back on the node.
      await page.keyboard.press('Escape');
      await form.waitFor({ state: 'detached' });
      expect(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.id)).toBe('f');

      await page.getByRole('tab', { name: 'DSL (JSON)' }).click();
      await page.locator('.dsl-field .cm-content').waitFor();
      const line = (await dslLines())[(await lineWith('"jsScript"')) - 1];
      expect(line).toContain(JSON.stringify('const n = msg.data.length;\nreturn n > 2;'));
      await save();
      expect((await saved('script')).metadata.nodes.find((n) => n.id === 'f')?.configuration).toEqual({ jsScript: 'const n = msg.data.length;\nreturn n > 2;' });
      expect(t.problems).toEqual([]);
    }));

  it('shows a syntax error and the canvas\'s checks on their line in the DSL tab, and blocks Save there as on the canvas', () =>
    step('dsl', async () => {
      await openTab('dsl', 'DSL (JSON)');
      await page.locator('.dsl-field .cm-content').waitFor();
      const problems = page.getByRole('list', { name: 'Problems in the DSL' });

      // The comma after "jsFilter" taken out: the error is where the next key starts, a line down.
      const typeLine = await lineWith('"type": "jsFilter"');
      await page.locator('.dsl-field .cm-line').nth(typeLine - 1).click();
      await page.keyboard.press('End');
      await page.keyboard.press('Backspace');
      await expect.poll(() => markedLines('error')).toEqual([typeLine + 1]);
      await problems.getByRole('button', { name: `Line ${typeLine + 1}`, exact: true }).waitFor();
      expect(await problems.textContent()).toMatch(/Not valid JSON/);
      expect(await page.locator('.dsl-field .cm-line').nth(typeLine).locator('.cm-lintRange-error').count()).toBe(1);
      // Leaving the tab with it is refused, naming the line.
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await page.locator('.dsl-field .error-text').filter({ hasText: `Line ${typeLine + 1}` }).waitFor();
      await page.screenshot({ path: path.join(shots, 'dsl-tab-error.png') });
      await page.locator('.dsl-field .cm-line').nth(typeLine - 1).click();
      await page.keyboard.press('End');
      await page.keyboard.type(',');
      await expect.poll(() => markedLines('error')).toEqual([]);

      // b made a restApiCall without its URL: the canvas's check on b's id line.
      await typeOver('"type": "log"', 3, 'restApiCall');
      const bId = await lineWith('"id": "b"');
      await expect.poll(() => markedLines('error')).toEqual([bId]);
      await problems.getByRole('button', { name: `Line ${bId}`, exact: true }).waitFor();
      expect(await problems.textContent()).toContain('Rest endpoint URL pattern: required');

      // Save is blocked here as on the canvas, saying by what; the blocker puts the cursor on its node.
      const saveButton = page.getByRole('button', { name: 'Save', exact: true });
      const blockers = page.getByRole('list', { name: 'What blocks Save' });
      await expect.poll(() => blockers.locator('li').allTextContents()).toEqual(['b: Rest endpoint URL pattern: required']);
      expect(await saveButton.isDisabled()).toBe(true);
      await blockers.getByRole('button').click();
      // The editor takes focus and moves its cursor after the click's own render: wait for both.
      await expect.poll(() => page.evaluate(() => document.activeElement?.classList.contains('cm-content') ?? false)).toBe(true);
      await expect.poll(() => page.locator('.dsl-field .cm-activeLine').textContent()).toContain('"id": "b"');
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await flowNode('b').locator('.issue-blocker').waitFor();
      expect(await blockers.locator('li').allTextContents()).toEqual(['b: Rest endpoint URL pattern: required']);
      expect(await saveButton.isDisabled()).toBe(true);
      expect(t.problems).toEqual([]);
    }));

  it('shows the gateway\'s 400 on its line, and keeps it on its node when a node above it is deleted', () =>
    step('moved', async () => {
      await openTab('moved', 'DSL (JSON)');
      await page.locator('.dsl-field .cm-content').waitFor();
      const problems = page.getByRole('list', { name: 'Problems in the DSL' });
      // The gateway names two things wrong with the method: both on its line.
      const lineButton = (n: number) => problems.getByRole('button', { name: `Line ${n}`, exact: true }).first();
      // A method only the gateway refuses (the canvas checks no enumerations): b is metadata.nodes[2] in the 400.
      await typeOver('"requestMethod": "GET"', 3, 'NOPE');
      await page.getByRole('button', { name: 'Save', exact: true }).click();
      const method = await lineWith('"requestMethod"');
      await lineButton(method).waitFor();
      expect(await problems.locator('li').filter({ has: page.getByRole('button', { name: `Line ${method}`, exact: true }) }).first().textContent()).toMatch(/restApiCall: configuration.*requestMethod/);
      await expect.poll(() => markedLines('error')).toEqual([method]);

      // f, above b, deleted on the canvas: b is metadata.nodes[1] now and x the [2] the 400 named; the problem stays on b.
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await flowNode('b').locator('.canvas-node-problem').filter({ hasText: 'requestMethod' }).waitFor();
      await flowNode('f').click();
      await page.keyboard.press('Delete');
      await flowNode('f').waitFor({ state: 'detached' });
      expect(await flowNode('b').locator('.canvas-node-problem').textContent()).toContain('requestMethod');
      expect(await flowNode('x').textContent()).not.toContain('requestMethod');
      await page.getByRole('tab', { name: 'DSL (JSON)' }).click();
      await page.locator('.dsl-field .cm-content').waitFor();
      const moved = await lineWith('"requestMethod"');
      await lineButton(moved).waitFor();
      await expect.poll(() => markedLines('error')).toEqual([moved]);

      // A problem in the list puts the cursor on its line.
      await lineButton(moved).click();
      expect(await page.evaluate(() => document.activeElement?.classList.contains('cm-content'))).toBe(true);
      expect(await page.locator('.dsl-field .cm-activeLine').textContent()).toContain('"requestMethod"');
      // Escape leaves the editor for the next control (the first problem's button).
      await page.keyboard.press('Escape');
      expect(await page.evaluate(() => document.activeElement?.closest('.dsl-problems') !== null && document.activeElement?.tagName === 'BUTTON')).toBe(true);
      expect(t.problems).toEqual([]);
    }));

  it('puts a loose node dragged onto a connection in between, and one undo takes it out again', () =>
    step('splice', async () => {
      await openTab('splice', 'Canvas');
      await expect.poll(edgeCount).toBe(2);
      const target = await page.evaluate(() => {
        const edge = Array.from(document.querySelectorAll('.react-flow__edge')).find((e) => e.getAttribute('aria-label')?.includes('from f to b'));
        const p = edge?.querySelector('path.react-flow__edge-path') as SVGPathElement;
        const m = p.getPointAtLength(p.getTotalLength() / 2).matrixTransform(p.getScreenCTM()!);
        return { x: m.x, y: m.y };
      });
      const box = (await flowNode('x').boundingBox())!;
      const before = await flowNode('x').getAttribute('style');
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.down();
      await page.mouse.move(target.x, target.y, { steps: 15 });
      // The connection it would go into is marked while the node is over it.
      await expect.poll(() => page.locator('.react-flow__edge.drop-target').getAttribute('aria-label')).toContain('from f to b');
      await page.mouse.up();
      await expect.poll(edgeCount).toBe(3);
      expect(await page.locator('.react-flow__edge.drop-target').count()).toBe(0);
      await save();
      expect(links(await saved('splice'))).toEqual(['a -Success-> f', 'f -True-> x', 'x -Success-> b']);

      await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
      await page.keyboard.press('Control+z');
      await expect.poll(edgeCount).toBe(2);
      expect(await page.locator('.react-flow__edge[aria-label*="from f to b"]').count()).toBe(1);
      expect(await flowNode('x').getAttribute('style')).toBe(before);
      await page.keyboard.press('Control+Shift+z');
      await expect.poll(edgeCount).toBe(3);

      // A node with connections of its own is only moved.
      const a = (await flowNode('a').boundingBox())!;
      const onEdge = await page.evaluate(() => {
        const edge = Array.from(document.querySelectorAll('.react-flow__edge')).find((e) => e.getAttribute('aria-label')?.includes('from x to b'));
        const p = edge?.querySelector('path.react-flow__edge-path') as SVGPathElement;
        const m = p.getPointAtLength(p.getTotalLength() / 2).matrixTransform(p.getScreenCTM()!);
        return { x: m.x, y: m.y };
      });
      await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
      await page.mouse.down();
      await page.mouse.move(onEdge.x, onEdge.y, { steps: 15 });
      expect(await page.locator('.react-flow__edge.drop-target').count()).toBe(0);
      await page.mouse.up();
      await expect.poll(edgeCount).toBe(3);
      expect(await page.locator('.react-flow__edge[aria-label*="from x to b"]').count()).toBe(1);
      expect(t.problems).toEqual([]);
    }));
});
