import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * The canvas as a place to work (issue 41), in Chromium at 1440x900 against an embedded gateway:
 * full width, fullscreen, a resizable side panel and a minimap; dagre's layout on open and on
 * demand with no connection drawn under a node (measured on the DOM's paths and node boxes);
 * undo and redo over add, connect, delete, move and form edits. Screenshots go to
 * test-output/web/web-canvas-editor*.png (kept as docs/screenshots/canvas-editor*.png, looked at).
 */

const ADMIN_PASSWORD = 'admin-password-for-web-canvas-editor';
let page: Page;
let base: string;
let t: BrowserTarget;
const step = (name: string, fn: () => Promise<void>) => t.step(name, fn);
const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);
const nodeCount = () => page.locator('.react-flow__node').count();
const edgeCount = () => page.locator('.react-flow__edge').count();
const saved = async () => JSON.parse((await t.api('GET', '/agents/editor')).text) as { metadata: { nodes: Array<{ id: string; name?: string; configuration?: Record<string, unknown> }>; connections: unknown[] } };

/** A node type's entry in the palette, which shows beside the canvas while nothing is selected (else behind "Add nodes"). */
async function paletteItem(type: string): Promise<Locator> {
  const item = page.getByRole('complementary', { name: 'Node palette' }).getByRole('button', { name: `Add ${type} node` });
  if (!(await page.getByRole('complementary', { name: 'Node palette' }).isVisible())) await page.getByRole('button', { name: 'Add nodes', exact: true }).click();
  return item;
}

/** Points along every drawn connection that lie inside a node other than its two ends (in screen pixels, nodes shrunk by 2 px). */
async function edgesUnderNodes(): Promise<string[]> {
  return page.evaluate(() => {
    const boxes = (Array.from(document.querySelectorAll('.react-flow__node')) as HTMLElement[]).map((n) => ({ id: n.dataset.id ?? '', r: n.getBoundingClientRect() }));
    const out: string[] = [];
    for (const edge of Array.from(document.querySelectorAll('.react-flow__edge'))) {
      const id = edge.getAttribute('data-id') ?? '';
      const path = edge.querySelector('path.react-flow__edge-path') as SVGPathElement | null;
      if (!path) continue;
      const ctm = path.getScreenCTM();
      if (!ctm) continue;
      const len = path.getTotalLength();
      for (let s = 0; s <= len; s += 2) {
        const p = path.getPointAtLength(s).matrixTransform(ctm);
        for (const b of boxes) {
          if (p.x > b.r.left + 2 && p.x < b.r.right - 2 && p.y > b.r.top + 2 && p.y < b.r.bottom - 2) out.push(`${id} under ${b.id} at ${Math.round(p.x)},${Math.round(p.y)}`);
        }
      }
    }
    return out;
  });
}

describe('the canvas editor in Chromium', () => {
  t = browserTarget({ name: 'web-canvas-editor', users: { admin: ADMIN_PASSWORD }, viewport: { width: 1440, height: 900 }, timeoutMs: 10_000 });

  beforeAll(async () => {
    ({ page, base } = t);
    // No stored positions, a long connection (a -> e skips three columns) and one back (e -> b):
    // the layered layout alone would draw both through nodes.
    const node = (id: string, type = 'log') => ({ id, type, configuration: {} });
    const created = await t.api('POST', '/agents', {
      ruleChain: { id: 'editor', name: 'Editor' },
      metadata: {
        nodes: [node('a', 'ai/agent'), node('b'), node('c'), node('d'), node('e'), node('f')],
        connections: [
          { fromId: 'a', toId: 'b', type: 'Success' },
          { fromId: 'b', toId: 'c', type: 'Success' },
          { fromId: 'c', toId: 'd', type: 'Success' },
          { fromId: 'd', toId: 'e', type: 'Success' },
          { fromId: 'a', toId: 'e', type: 'Failure' },
          { fromId: 'e', toId: 'b', type: 'Failure' },
          { fromId: 'a', toId: 'f', type: 'Failure' },
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
  }, 180_000);

  it('lays the chain out on open and on demand with no connection under a node, full width, with a minimap', () =>
    step('layout', async () => {
      await t.signIn('admin', '/agents/editor');
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await expect.poll(nodeCount).toBe(6);
      await expect.poll(edgeCount).toBe(7);
      expect(await edgesUnderNodes()).toEqual([]);
      const flow = await page.locator('.canvas-flow').boundingBox();
      expect(flow!.width).toBeGreaterThan(800);
      await page.locator('.react-flow__minimap').waitFor();
      // Nothing was written by the layout on open.
      expect(await page.getByText('Unsaved changes').count()).toBe(0);

      // Dragged on top of the long connection's way, then laid out again.
      const box = await flowNode('f').boundingBox();
      const target = await flowNode('c').boundingBox();
      await page.mouse.move(box!.x + 20, box!.y + 10);
      await page.mouse.down();
      await page.mouse.move(target!.x + 20, target!.y + target!.height + 40, { steps: 10 });
      await page.mouse.up();
      expect(await edgesUnderNodes()).toEqual([]);
      await page.getByRole('button', { name: 'Auto-layout' }).click();
      await expect.poll(edgesUnderNodes).toEqual([]);
      await t.shot('web-canvas-editor');
    }));

  it('undoes and redoes add, connect, delete, move and form edits with Ctrl+Z and Ctrl+Shift+Z', () =>
    step('undo', async () => {
      const undo = () => page.keyboard.press('Control+z');
      const redo = () => page.keyboard.press('Control+Shift+z');
      await (await paletteItem('log')).click();
      await expect.poll(nodeCount).toBe(7);
      await page.getByRole('region', { name: 'Node log_1' }).getByLabel('Node name').fill('audit');
      await expect.poll(() => flowNode('log_1').textContent()).toContain('audit');
      const panel = page.getByRole('region', { name: 'Node log_1' });
      await panel.getByLabel('To node').selectOption('a');
      await panel.getByLabel('With relation').fill('Failure');
      await panel.getByRole('button', { name: 'Connect' }).click();
      await expect.poll(edgeCount).toBe(8);
      // Focus on the canvas, not in a field (fields keep the browser's own undo).
      await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
      await undo();
      await expect.poll(edgeCount).toBe(7);
      await undo();
      await expect.poll(() => flowNode('log_1').textContent()).not.toContain('audit');
      await undo();
      await expect.poll(nodeCount).toBe(6);
      await redo();
      await redo();
      await redo();
      await expect.poll(edgeCount).toBe(8);
      expect(await flowNode('log_1').textContent()).toContain('audit');

      // Delete (the Delete key on a selected node takes its connections) and move, both undone.
      await flowNode('d').click();
      await page.keyboard.press('Delete');
      await expect.poll(nodeCount).toBe(6);
      await expect.poll(edgeCount).toBe(6);
      await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
      await undo();
      await expect.poll(nodeCount).toBe(7);
      await expect.poll(edgeCount).toBe(8);
      const before = await flowNode('b').getAttribute('style');
      const b = await flowNode('b').boundingBox();
      await page.mouse.move(b!.x + 20, b!.y + 10);
      await page.mouse.down();
      await page.mouse.move(b!.x + 20, b!.y + 160, { steps: 8 });
      await page.mouse.up();
      await expect.poll(() => flowNode('b').getAttribute('style')).not.toBe(before);
      await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
      await undo();
      await expect.poll(() => flowNode('b').getAttribute('style')).toBe(before);

      // The Undo button and saving what the history left.
      // (the move and the delete are undone, so the connection is next.)
      await page.getByRole('button', { name: 'Undo', exact: true }).click();
      await expect.poll(edgeCount).toBe(7);
      await page.getByRole('button', { name: 'Redo', exact: true }).click();
      await expect.poll(edgeCount).toBe(8);
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(async () => (await saved()).metadata.connections.length).toBe(8);
      expect((await saved()).metadata.nodes.find((n) => n.id === 'log_1')?.name).toBe('audit');
      expect(t.problems).toEqual([]);
    }));

  it('goes fullscreen and back, and resizes the side panel by drag and by keyboard', () =>
    step('fullscreen', async () => {
      const side = () => page.locator('.canvas-side').boundingBox();
      const w0 = (await side())!.width;
      const handle = page.getByRole('separator', { name: 'Resize the side panel' });
      const h = (await handle.boundingBox())!;
      await page.mouse.move(h.x + h.width / 2, h.y + 50);
      await page.mouse.down();
      await page.mouse.move(h.x + h.width / 2 - 150, h.y + 50, { steps: 6 });
      await page.mouse.up();
      await expect.poll(async () => Math.round((await side())!.width - w0)).toBeGreaterThan(100);
      const w1 = (await side())!.width;
      await handle.focus();
      await page.keyboard.press('ArrowRight');
      await expect.poll(async () => Math.round(w1 - (await side())!.width)).toBe(32);

      await page.getByRole('button', { name: 'Fullscreen', exact: true }).click();
      await expect.poll(async () => (await page.locator('.chain-canvas').boundingBox())!.height).toBeGreaterThan(880);
      expect((await page.locator('.chain-canvas').boundingBox())!.x).toBe(0);
      await t.shot('web-canvas-editor-fullscreen');
      await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
      await page.keyboard.press('Escape');
      await page.getByRole('button', { name: 'Fullscreen', exact: true }).waitFor();
      expect((await page.locator('.chain-canvas').boundingBox())!.x).toBeGreaterThan(0);
      expect(t.problems).toEqual([]);
      expect(t.requested.filter((u) => !u.startsWith(base))).toEqual([]);
    }));
});
