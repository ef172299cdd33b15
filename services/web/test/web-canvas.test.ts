import { beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { browserTarget, type BrowserTarget } from './browser-target.js';

/**
 * The rule-chain canvas (the agent editor's Canvas tab) in Chromium against a real embedded
 * gateway: a three-node chain is built by adding nodes from the node types of GET /tools/forms,
 * filling their configuration forms and dragging connections; a bad setting shows on its node
 * before Save (which waits for it); the saved DSL is compared with what was drawn, drawn again after a reload (at the stored
 * positions) and saved unchanged without edits; a run's steps are replayed on it. The last step
 * leaves test-output/web/web-canvas.png; a failing step leaves test-output/web/web-canvas-<step>.png.
 */

const ADMIN_PASSWORD = 'admin-password-for-web-canvas';
let page: Page;
let base: string;
let t: BrowserTarget;
const api = (method: string, url: string, body?: unknown) => t.api(method, url, body);
const step = (name: string, fn: () => Promise<void>) => t.step(name, fn);



const flowNode = (id: string): Locator => page.locator(`.react-flow__node[data-id="${id}"]`);
const inspector = (id: string): Locator => page.getByRole('region', { name: `Node ${id}` });

/** A connection drawn as a user does: press on the source's right handle, move to the target's left one, release. */
async function drag(from: string, to: string, relation: string): Promise<void> {
  await page.getByLabel('Relation of new connections').fill(relation);
  const a = await flowNode(from).locator('.react-flow__handle.source').boundingBox();
  const b = await flowNode(to).locator('.react-flow__handle.target').boundingBox();
  if (!a || !b) throw new Error(`no handles on ${from} or ${to}`);
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 12 });
  await page.mouse.up();
  await page.locator('.react-flow__edge-text', { hasText: relation }).waitFor();
}

/** A node type's entry in the palette, which shows beside the canvas while nothing is selected (else behind "Add nodes"). */
async function paletteItem(type: string): Promise<Locator> {
  const item = page.getByRole('complementary', { name: 'Node palette' }).getByRole('button', { name: `Add ${type} node` });
  if (!(await page.getByRole('complementary', { name: 'Node palette' }).isVisible())) await page.getByRole('button', { name: 'Add nodes', exact: true }).click();
  return item;
}

async function addNode(type: string, id: string): Promise<void> {
  await (await paletteItem(type)).click();
  await inspector(id).waitFor();
  // The canvas brings the new node into sight (it is placed right of the others).
  await expect.poll(() => flowNode(id).isVisible()).toBe(true);
  const [box, area] = await Promise.all([flowNode(id).boundingBox(), page.locator('.canvas-flow').boundingBox()]);
  expect(box && area && box.x >= area.x && box.x + box.width <= area.x + area.width).toBe(true);
}

const positionsOut = (dsl: unknown): unknown =>
  JSON.parse(JSON.stringify(dsl), (key, value: unknown) => {
    if (key !== 'additionalInfo' || !value || typeof value !== 'object') return value;
    const { layoutX, layoutY, ...rest } = value as Record<string, unknown>;
    expect(typeof layoutX).toBe('number');
    expect(typeof layoutY).toBe('number');
    return Object.keys(rest).length ? rest : undefined;
  });

describe('the rule-chain canvas in Chromium', () => {
  t = browserTarget({ name: 'web-canvas', users: { admin: ADMIN_PASSWORD }, timeoutMs: 10_000 });

  beforeAll(async () => {
    ({ page, base } = t);
    // The agent starts as one ai/agent node: the canvas replaces it with the chain it builds.
    const created = await api('POST', '/agents', { ruleChain: { id: 'canvas', name: 'Canvas' }, metadata: { nodes: [{ id: 'only', type: 'ai/agent', configuration: {} }], connections: [] } });
    expect(created.status, created.text).toBe(201);
  }, 180_000);

  it('builds a three-node chain on the canvas, marks a bad setting on its node before Save, and saves it as the DSL drawn', () =>
    step('build', async () => {
      await page.goto(`${base}/login?next=/agents/canvas`);
      await page.getByLabel('Username').fill('admin');
      await page.getByLabel('Password').fill(ADMIN_PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${base}/agents/canvas`);
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await flowNode('only').click();
      await inspector('only').getByRole('button', { name: 'Delete node' }).click();
      await expect.poll(() => page.locator('.react-flow__node').count()).toBe(0);

      await addNode('jsFilter', 'jsFilter_1');
      await inspector('jsFilter_1').getByLabel(/script/i).fill('return msg.data.length > 0;');
      await addNode('ai/agent', 'agent_1');
      await inspector('agent_1').getByLabel('System prompt').fill('Answer briefly.');
      await inspector('agent_1').getByLabel('Max steps (model calls per answer)').fill('0');
      await addNode('log', 'log_1');
      await inspector('log_1').getByLabel('Node name').fill('audit');
      await drag('jsFilter_1', 'agent_1', 'True');
      await drag('agent_1', 'log_1', 'Success');

      // maxStep 0 is outside the node type's schema: marked on that node as it is typed, at its
      // field once selected, and Save waits for it (the gateway would refuse it).
      await flowNode('agent_1').locator('.canvas-node-problem').filter({ hasText: 'Max steps (model calls per answer): a whole number, at least 1' }).waitFor();
      expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
      expect(await flowNode('jsFilter_1').locator('.canvas-node-problem').count()).toBe(0);
      await flowNode('agent_1').click();
      await inspector('agent_1').locator('.field.has-error').filter({ hasText: 'at least 1' }).waitFor();
      await inspector('agent_1').getByLabel('Max steps (model calls per answer)').fill('3');
      // A toast of an earlier save may still show: wait for one more than there were.
      const toasts = await page.getByText('Agent saved').count();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Agent saved').nth(toasts).waitFor();
      await expect.poll(() => page.locator('.canvas-node-problem').count()).toBe(0);

      const saved = JSON.parse((await api('GET', '/agents/canvas')).text) as Record<string, unknown>;
      expect(positionsOut(saved)).toEqual({
        ruleChain: { id: 'canvas', name: 'Canvas' },
        metadata: {
          nodes: [
            { id: 'jsFilter_1', type: 'jsFilter', name: 'jsFilter_1', configuration: { jsScript: 'return msg.data.length > 0;' } },
            { id: 'agent_1', type: 'ai/agent', name: 'agent_1', configuration: { systemPrompt: 'Answer briefly.', maxStep: 3 } },
            { id: 'log_1', type: 'log', name: 'audit', configuration: {} },
          ],
          connections: [
            { fromId: 'jsFilter_1', toId: 'agent_1', type: 'True' },
            { fromId: 'agent_1', toId: 'log_1', type: 'Success' },
          ],
        },
      });
    }));

  it('draws the saved chain again after a reload, at its stored positions, and saves it unchanged without edits', () =>
    step('reload', async () => {
      // Keys the editor does not know, and a node without a stored position (drawn by the layered layout).
      type Dsl = { metadata: { nodes: Array<Record<string, unknown> & { id: string; additionalInfo?: { layoutX?: number; layoutY?: number; description?: string } }>; connections: Array<Record<string, unknown>> } };
      const edited = JSON.parse((await api('GET', '/agents/canvas')).text) as Dsl;
      edited.metadata.nodes[1] = { ...edited.metadata.nodes[1]!, debugMode: true, additionalInfo: { description: 'kept as is' } };
      edited.metadata.connections[0]!.label = 'kept too';
      expect((await api('PUT', '/agents/canvas', edited)).status).toBe(200);
      const before = (await api('GET', '/agents/canvas')).text;
      expect(before).toContain('"label":"kept too"');
      const dsl = JSON.parse(before) as Dsl;
      await page.reload();
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await expect.poll(() => page.locator('.react-flow__node').count()).toBe(3);
      let placed = 0;
      for (const n of dsl.metadata.nodes) {
        if (n.additionalInfo?.layoutX === undefined) continue;
        placed++;
        const style = await flowNode(n.id).getAttribute('style');
        expect(style).toContain(`translate(${n.additionalInfo.layoutX}px, ${n.additionalInfo.layoutY}px)`);
      }
      expect(placed).toBe(2);
      expect(await page.locator('.react-flow__edge-text').allTextContents()).toEqual(['True', 'Success']);
      expect(await flowNode('jsFilter_1').textContent()).toContain('start');

      const saves = page.waitForResponse((r) => r.request().method() === 'PUT' && r.url().endsWith('/api/v1/agents/canvas'));
      await page.getByRole('button', { name: 'Save' }).click();
      expect((await saves).status()).toBe(200);
      expect((await api('GET', '/agents/canvas')).text).toBe(before);
      // The JSON tab shows the same DSL.
      await page.getByRole('tab', { name: 'DSL (JSON)' }).click();
      // (CodeMirror draws only the lines in sight: what the tab holds is read from its Save.)
      await page.locator('.dsl-field .cm-content').waitFor();
      const put = page.waitForRequest((r) => r.method() === 'PUT' && r.url().endsWith('/api/v1/agents/canvas'));
      await page.getByRole('button', { name: 'Save' }).click();
      expect(JSON.parse((await put).postData() ?? 'null')).toEqual(JSON.parse(before));
    }));

  it('replays a run on the canvas: which nodes ran, with which relation, how long', () =>
    step('replay', async () => {
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await page.getByRole('tab', { name: 'Replay a run' }).click();
      await page.getByText("Paste a run's steps").click();
      const steps = [
        { nodeId: 'jsFilter_1', type: 'jsFilter', relations: ['True'], ms: 3 },
        { nodeId: 'agent_1', type: 'ai/agent', relations: ['Success'], ms: 812, debug: { chainId: 'canvas', in: { data: 'hello' }, out: { data: 'Hi!' } } },
        { nodeId: 'log_1', type: 'log', relations: ['Success'], ms: 1 },
      ];
      await page.getByLabel('Run steps (JSON)').fill(JSON.stringify({ steps }));
      await page.getByRole('button', { name: 'Replay', exact: true }).click();
      await page.getByText('3 steps, 816 ms in all.').waitFor();
      expect(await flowNode('agent_1').locator('.canvas-node-run').textContent()).toBe('#2 · Success · 812 ms');
      expect(await flowNode('jsFilter_1').locator('.canvas-node').getAttribute('class')).toContain('ran');
      expect(await page.locator('.react-flow__edge.followed').count()).toBe(2);
      // A debugMode step carries the messages in and out: its step clicked shows them.
      await page.locator('.replay-steps button', { hasText: 'agent_1' }).click();
      await page.locator('.step-detail pre', { hasText: '"Hi!"' }).waitFor();
      await flowNode('agent_1').click();
      await t.shot('web-canvas');
      expect(t.problems).toEqual([]);
      expect(t.requested.filter((u) => !u.startsWith(base))).toEqual([]);
    }));

  it('fits a 390-pixel phone: the canvas above its panels, no sideways scrolling', () =>
    step('phone', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await expect.poll(() => page.locator('.react-flow__node').count()).toBe(3);
      const flow = await page.locator('.canvas-flow').boundingBox();
      const side = await page.locator('.canvas-side').boundingBox();
      expect(flow && side && side.y >= flow.y + flow.height).toBe(true);
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      // The whole chain fits the narrow canvas with React Flow's fit-view control.
      await page.locator('.react-flow__controls-fitview').click();
      const area = await page.locator('.canvas-flow').boundingBox();
      for (const id of ['jsFilter_1', 'log_1']) {
        await expect
          .poll(async () => {
            const box = await flowNode(id).boundingBox();
            return !!(box && area && box.x >= area.x && box.x + box.width <= area.x + area.width);
          })
          .toBe(true);
      }
      await t.shot('web-canvas-phone');
      expect(t.problems).toEqual([]);
    }));

  it('selects a node with the keyboard and connects it without dragging', () =>
    step('keyboard', async () => {
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.getByRole('button', { name: 'Clear replay' }).click();
      await flowNode('log_1').focus();
      await page.keyboard.press('Enter');
      const panel = inspector('log_1');
      await panel.getByLabel('To node').selectOption('jsFilter_1');
      await panel.getByLabel('With relation').fill('Failure');
      await panel.getByRole('button', { name: 'Connect' }).click();
      await page.locator('.react-flow__edge-text', { hasText: 'Failure' }).waitFor();
      await page.getByRole('button', { name: 'Save' }).click();
      // Polled: an earlier save's notice may still be showing.
      const connections = async () => (JSON.parse((await api('GET', '/agents/canvas')).text) as { metadata: { connections: unknown[] } }).metadata.connections;
      await expect.poll(connections).toHaveLength(3);
      // The key the editor does not know stays on its connection through a canvas edit.
      expect(await connections()).toEqual([
        { fromId: 'jsFilter_1', toId: 'agent_1', type: 'True', label: 'kept too' },
        { fromId: 'agent_1', toId: 'log_1', type: 'Success' },
        { fromId: 'log_1', toId: 'jsFilter_1', type: 'Failure' },
      ]);
      expect(t.problems).toEqual([]);
    }));

  it('saves a chain keeping a field its node type does not name, and shows the warning on that node', () =>
    step('warning', async () => {
      // RuleGo's own test_fork_direct_join.json writes "period" on a delay: kept, with a warning (fieldValidation=Warn).
      const lenient = {
        ruleChain: { id: 'lenient', name: 'Lenient' },
        metadata: {
          nodes: [
            { id: 'agent', type: 'ai/agent', configuration: {} },
            { id: 'wait', type: 'delay', configuration: { delayMs: 0, period: 500 } },
          ],
          connections: [{ fromId: 'agent', toId: 'wait', type: 'Success' }],
        },
      };
      expect((await api('POST', '/agents', lenient)).status).toBe(201);
      await page.goto(`${base}/agents/lenient`);
      await page.getByRole('tab', { name: 'Canvas' }).click();
      await flowNode('wait').waitFor();
      expect(await page.locator('.canvas-node-problem').count()).toBe(0);
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText(/Agent saved, with 1 warning: .*unknown field "period" \(did you mean delayMs\?/).waitFor();
      await flowNode('wait').locator('.canvas-node-problem').filter({ hasText: 'unknown field "period"' }).waitFor();
      expect(await flowNode('agent').locator('.canvas-node-problem').count()).toBe(0);
      expect(JSON.parse((await api('GET', '/agents/lenient')).text)).toEqual(lenient);
    }));
});
