import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * Working on the canvas (issue 41), in Chromium at 1440x900 against an embedded gateway:
 * selecting several nodes (Shift-click, a Shift-drawn box), copy, paste, duplicate and delete,
 * all undoable; the palette (search, families, drag-to-place, drop on a connection); checks as
 * you edit that block Save and name the node, the gateway's own 400 on its node; the guard on
 * leaving with unsaved edits; the keyboard (Tab, Enter, arrows, Escape, a visible focus ring).
 * One screenshot per feature: test-output/web/web-canvas-workflow-*.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-web-canvas-workflow';
let page: Page;
let t: BrowserTarget;
const step = (name: string, fn: () => Promise<void>) => t.step(name, fn);
const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);
const nodeCount = () => page.locator('.react-flow__node').count();
const edgeCount = () => page.locator('.react-flow__edge').count();
const pane = () => page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
const undo = () => page.keyboard.press('Control+z');
const redo = () => page.keyboard.press('Control+Shift+z');

type Saved = { metadata: { nodes: Array<{ id: string; type: string; name?: string; configuration?: Record<string, unknown> }>; connections: Array<{ fromId: string; toId: string; type: string }> } };
const saved = async (id: string) => JSON.parse((await t.api('GET', `/agents/${id}`)).text) as Saved;
const links = (dsl: Saved) => dsl.metadata.connections.map((c) => `${c.fromId} -${c.type}-> ${c.toId}`).sort();

/** A node type's entry in the palette, which shows beside the canvas while nothing is selected (else behind "Add nodes"). */
async function paletteItem(type: string): Promise<Locator> {
  const item = page.getByRole('complementary', { name: 'Node palette' }).getByRole('button', { name: `Add ${type} node` });
  if (!(await page.getByRole('complementary', { name: 'Node palette' }).isVisible())) await page.getByRole('button', { name: 'Add nodes', exact: true }).click();
  return item;
}

/** a (ai/agent) -> b (log) -> c (log), no stored positions. */
function chain(id: string) {
  return {
    ruleChain: { id, name: id },
    metadata: {
      nodes: [
        { id: 'a', type: 'ai/agent', configuration: {} },
        { id: 'b', type: 'log', configuration: {} },
        { id: 'c', type: 'log', configuration: {} },
      ],
      connections: [
        { fromId: 'a', toId: 'b', type: 'Success' },
        { fromId: 'b', toId: 'c', type: 'Success' },
      ],
    },
  };
}

async function openCanvas(id: string): Promise<void> {
  await page.goto(`${t.base}/agents/${id}`);
  await page.getByRole('tab', { name: 'Canvas' }).click();
  await expect.poll(nodeCount).toBe(3);
}

/** Save and wait for the toast it brings (an earlier one may still show). */
async function save(): Promise<void> {
  const toasts = await page.getByText('Agent saved').count();
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText('Agent saved').nth(toasts).waitFor();
}

/** A node's position on the canvas (React Flow's transform), in flow coordinates. */
async function positionOf(id: string): Promise<{ x: number; y: number }> {
  const style = (await flowNode(id).getAttribute('style')) ?? '';
  const m = /translate\((-?[\d.]+)px, ?(-?[\d.]+)px\)/.exec(style);
  if (!m) throw new Error(`no position in ${style}`);
  return { x: Number(m[1]), y: Number(m[2]) };
}

describe('working on the canvas in Chromium', () => {
  t = browserTarget({ name: 'web-canvas-workflow', users: { admin: ADMIN_PASSWORD }, viewport: { width: 1440, height: 900 }, timeoutMs: 10_000 });

  beforeAll(async () => {
    ({ page } = t);
    for (const id of ['copy', 'palette', 'checks', 'guard', 'keys']) {
      const created = await t.api('POST', '/agents', chain(id));
      expect(created.status, created.text).toBe(201);
    }
    await t.signIn('admin', '/agents');
  }, 240_000);

  it('selects by box and Shift-click, copies, pastes, duplicates and deletes, each undone and redone', () =>
    step('clipboard', async () => {
      await openCanvas('copy');
      // A box drawn with Shift held round b and c.
      const b = (await flowNode('b').boundingBox())!;
      const c = (await flowNode('c').boundingBox())!;
      await page.keyboard.down('Shift');
      await page.mouse.move(b.x - 20, Math.min(b.y, c.y) - 30);
      await page.mouse.down();
      await page.mouse.move(c.x + c.width + 20, Math.max(b.y + b.height, c.y + c.height) + 30, { steps: 10 });
      await page.mouse.up();
      await page.keyboard.up('Shift');
      await page.getByRole('heading', { name: '2 nodes selected' }).waitFor();
      expect(await page.locator('.react-flow__node.selected').evaluateAll((ns) => ns.map((n) => n.getAttribute('data-id')))).toEqual(['b', 'c']);

      // Copy and paste: new ids, moved down and right, the b -> c connection copied between the copies.
      await page.keyboard.press('Control+c');
      await page.keyboard.press('Control+v');
      await expect.poll(nodeCount).toBe(5);
      await expect.poll(edgeCount).toBe(3);
      const pb = await positionOf('b');
      const p1 = await positionOf('log_1');
      expect([p1.x - pb.x, p1.y - pb.y]).toEqual([40, 112]);
      expect(await page.locator('.react-flow__node.selected').evaluateAll((ns) => ns.map((n) => n.getAttribute('data-id')))).toEqual(['log_1', 'log_2']);
      await t.shot('web-canvas-workflow-paste');

      // Shift-click adds to the selection; Ctrl+D duplicates a and b with their connection.
      await flowNode('a').click();
      await flowNode('b').click({ modifiers: ['Shift'] });
      await page.getByRole('heading', { name: '2 nodes selected' }).waitFor();
      await page.keyboard.press('Control+d');
      await expect.poll(nodeCount).toBe(7);
      await expect.poll(edgeCount).toBe(4);
      // Delete takes the selection (the duplicates, selected after Ctrl+D) with its connections.
      await page.keyboard.press('Delete');
      await expect.poll(nodeCount).toBe(5);
      await expect.poll(edgeCount).toBe(3);

      await pane();
      await undo();
      await expect.poll(nodeCount).toBe(7);
      await undo();
      await expect.poll(nodeCount).toBe(5);
      await undo();
      await expect.poll(nodeCount).toBe(3);
      await redo();
      await expect.poll(nodeCount).toBe(5);
      await save();
      const dsl = await saved('copy');
      expect(dsl.metadata.nodes.map((n) => n.id)).toEqual(['a', 'b', 'c', 'log_1', 'log_2']);
      expect(links(dsl)).toEqual(['a -Success-> b', 'b -Success-> c', 'log_1 -Success-> log_2']);
      expect(t.problems).toEqual([]);
    }));

  it('searches the palette by family, places a dragged node where it is dropped, and puts one dropped on a connection in between', () =>
    step('palette', async () => {
      await openCanvas('palette');
      const palette = page.getByRole('complementary', { name: 'Node palette' });
      const items = palette.locator('.palette-item');
      const all = await items.count();
      expect(all).toBeGreaterThan(15);
      expect(await palette.locator('h4').allTextContents()).toEqual(['AI', 'Filters', 'Routing', 'Transforms', 'Flow control', 'Actions', 'Other']);
      await palette.getByLabel('Search nodes').fill('http');
      await expect.poll(() => items.count()).toBe(1);
      expect(await items.first().textContent()).toContain('restApiCall');
      expect(await palette.locator('h4').allTextContents()).toEqual(['Actions']);
      await palette.getByLabel('Search nodes').fill('routing');
      await expect.poll(() => palette.locator('h4').allTextContents()).toEqual(['Routing']);
      await palette.getByLabel('Search nodes').fill('');
      await expect.poll(() => items.count()).toBe(all);

      // Dragged onto an empty part of the canvas: the node is centred where it was dropped.
      const area = (await page.locator('.canvas-flow').boundingBox())!;
      const drop = { x: Math.round(area.width * 0.3), y: Math.round(area.height * 0.12) };
      await palette.getByRole('button', { name: 'Add delay node' }).dragTo(page.locator('.canvas-flow'), { targetPosition: drop });
      await expect.poll(nodeCount).toBe(4);
      const placed = (await flowNode('delay_1').boundingBox())!;
      expect(Math.abs(placed.x + placed.width / 2 - (area.x + drop.x))).toBeLessThan(30);
      expect(Math.abs(placed.y + placed.height / 2 - (area.y + drop.y))).toBeLessThan(30);

      // Dropped on the a -> b connection: a -> log_1 -> b.
      const on = await page.evaluate(() => {
        const edge = Array.from(document.querySelectorAll('.react-flow__edge')).find((e) => e.getAttribute('aria-label')?.includes('from a to b'));
        const path = edge?.querySelector('path.react-flow__edge-path') as SVGPathElement;
        const p = path.getPointAtLength(path.getTotalLength() / 2).matrixTransform(path.getScreenCTM()!);
        return { x: p.x, y: p.y };
      });
      await (await paletteItem('log')).dragTo(page.locator('.canvas-flow'), { targetPosition: { x: on.x - area.x, y: on.y - area.y } });
      await expect.poll(nodeCount).toBe(5);
      await expect.poll(edgeCount).toBe(3);
      await t.shot('web-canvas-workflow-palette');
      await save();
      expect(links(await saved('palette'))).toEqual(['a -Success-> log_1', 'b -Success-> c', 'log_1 -Success-> b']);

      // One step back takes the inserted node out and the connection back.
      await pane();
      await undo();
      await expect.poll(nodeCount).toBe(4);
      await expect.poll(edgeCount).toBe(2);
      expect(await page.locator('.react-flow__edge[aria-label*="from a to b"]').count()).toBe(1);
      expect(t.problems).toEqual([]);
    }));

  it('marks an invalid node as you edit, blocks Save with the list of blockers, and shows the gateway\'s own 400 on its node', () =>
    step('validation', async () => {
      await openCanvas('checks');
      const saveButton = page.getByRole('button', { name: 'Save', exact: true });
      await page.getByRole('button', { name: 'Add restApiCall node' }).click();
      await flowNode('restApiCall_1').locator('.canvas-node-problem').filter({ hasText: 'Rest endpoint URL pattern: required' }).waitFor();
      // Not connected yet: noted on the node, not a blocker.
      expect(await flowNode('restApiCall_1').locator('.issue-note').textContent()).toContain('Not reached from the start node');
      expect(await saveButton.isDisabled()).toBe(true);
      const blockers = page.getByRole('list', { name: 'What blocks Save' });
      expect(await blockers.locator('li').allTextContents()).toEqual(['restApiCall_1: Rest endpoint URL pattern: required']);
      await t.shot('web-canvas-workflow-validation');

      // A blocker clicked selects its node (its form opens beside the canvas).
      await pane();
      await page.getByRole('region', { name: 'Node restApiCall_1' }).waitFor({ state: 'detached' });
      await blockers.getByRole('button').click();
      const form = page.getByRole('region', { name: 'Node restApiCall_1' });
      await form.waitFor();
      await form.getByLabel(/Rest endpoint URL pattern/).fill('https://example.test/hook');
      await expect.poll(() => saveButton.isDisabled()).toBe(false);
      expect(await page.getByRole('list', { name: 'What blocks Save' }).count()).toBe(0);
      await form.getByLabel('To node').selectOption('a');
      await form.getByLabel('With relation').fill('Failure');
      await form.getByRole('button', { name: 'Connect' }).click();

      // What only the gateway can tell (the expression does not parse) lands on its node after Save.
      await (await paletteItem('exprFilter')).click();
      await page.getByRole('region', { name: 'Node exprFilter_1' }).getByLabel(/Expr/).fill('msg.x >');
      await expect.poll(() => saveButton.isDisabled()).toBe(false);
      await saveButton.click();
      await flowNode('exprFilter_1').locator('.canvas-node-problem').filter({ hasText: /expr/ }).waitFor();
      expect(await flowNode('restApiCall_1').locator('.issue-blocker').count()).toBe(0);
      expect(t.problems).toEqual([]);
    }));

  it('asks before leaving with unsaved edits: a link, Back, and a reload', () =>
    step('guard', async () => {
      await page.goto(`${t.base}/agents/guard`);
      const name = page.getByLabel('Name', { exact: true });
      await name.fill('Guarded');
      await page.getByText('Unsaved changes').waitFor();
      await t.shot('web-canvas-workflow-guard');
      const asked: string[] = [];
      const answer = (accept: boolean) =>
        page.once('dialog', (d) => {
          asked.push(`${d.type()}: ${d.message()}`);
          void (accept ? d.accept() : d.dismiss());
        });
      const nav = page.getByRole('navigation').getByRole('link', { name: 'Agents', exact: true });

      answer(false);
      await nav.click();
      await expect.poll(() => asked.length).toBe(1);
      expect(asked[0]).toBe('confirm: This agent has unsaved changes. Leave without saving them?');
      expect(new URL(page.url()).pathname).toBe('/agents/guard');
      expect(await name.inputValue()).toBe('Guarded');

      answer(false);
      await page.evaluate(() => window.location.reload());
      await expect.poll(() => asked.length).toBe(2);
      expect(asked[1]).toMatch(/^beforeunload/);
      expect(await name.inputValue()).toBe('Guarded');

      // Saved: nothing to ask.
      await save();
      await nav.click();
      await page.waitForURL(`${t.base}/agents`);
      expect(asked.length).toBe(2);

      // The browser's Back and Forward (within the app) ask too: refused, the editor stays.
      await page.goBack();
      await page.waitForURL(`${t.base}/agents/guard`);
      await name.fill('Guarded again');
      answer(false);
      await page.goForward({ waitUntil: 'commit' });
      await expect.poll(() => asked.length).toBe(3);
      expect(asked[2]).toBe('confirm: This agent has unsaved changes. Leave without saving them?');
      await expect.poll(() => new URL(page.url()).pathname).toBe('/agents/guard');
      expect(await name.inputValue()).toBe('Guarded again');
      // Accepted: the edit is dropped.
      answer(true);
      await nav.click();
      await page.waitForURL(`${t.base}/agents`);
      expect(asked.length).toBe(4);
      expect((await saved('guard')) && JSON.parse((await t.api('GET', '/agents/guard')).text).ruleChain.name).toBe('Guarded');
      expect(t.problems).toEqual([]);
    }));

  it('reaches nodes with Tab (a focus ring shows), opens the form with Enter, moves with the arrows and closes with Escape', () =>
    step('keyboard', async () => {
      await openCanvas('keys');
      await page.getByLabel('Relation of new connections').focus();
      let focused: string | null = null;
      for (let i = 0; i < 20 && focused === null; i++) {
        await page.keyboard.press('Tab');
        focused = await page.evaluate(() => (document.activeElement?.classList.contains('react-flow__node') ? (document.activeElement as HTMLElement).dataset.id ?? null : null));
      }
      expect(focused).not.toBeNull();
      const id = focused!;
      const ring = await flowNode(id).locator('.canvas-node').evaluate((el) => {
        const s = getComputedStyle(el);
        return `${s.outlineStyle} ${s.outlineWidth}`;
      });
      expect(ring).toBe('solid 3px');
      await t.shot('web-canvas-workflow-keyboard');

      await page.keyboard.press('Enter');
      const form = page.getByRole('region', { name: `Node ${id}` });
      await form.waitFor();
      const before = await positionOf(id);
      for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowDown');
      await expect.poll(() => positionOf(id)).toEqual({ x: before.x + 20, y: before.y + 5 });
      await undo();
      await expect.poll(() => positionOf(id)).toEqual({ x: before.x + 20, y: before.y });

      // Escape on the node closes its form; Escape in the form closes it and gives the node the focus back.
      await page.keyboard.press('Escape');
      await form.waitFor({ state: 'detached' });
      await page.keyboard.press('Enter');
      await form.getByLabel('Node name').focus();
      await page.keyboard.press('Escape');
      await form.waitFor({ state: 'detached' });
      expect(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.id)).toBe(id);
      expect(t.problems).toEqual([]);
    }));
});
