import { describe, expect, it } from 'vitest';
import { createRuleMsg } from '../src/index.js';
import { chain, context, problemsOf, runError, runner } from './chain-helpers.js';

/** delay: RuleGo's delay node, bounded to 60 s and stopped by a cancelled run. */

const delayChain = (configuration: Record<string, unknown>) =>
  chain('d', [{ id: 'd', type: 'delay', configuration }, { id: 'ok', type: 'end' }, { id: 'failed', type: 'end' }], [['d', 'ok', 'Success'], ['d', 'failed', 'Failure']]);

describe('delay', () => {
  it('passes the message on along Success after delayMs', async () => {
    const input = createRuleMsg({ data: 'x', metadata: { k: 'v' } });
    const started = Date.now();
    const result = await runner.run(delayChain({ delayMs: 120 }), input, context());
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);
    expect(result.ends).toEqual([{ nodeId: 'ok', relation: undefined, msg: input }]);
  });

  it('takes delayMs from a template, a number written as text, or the deprecated periodInSeconds', async () => {
    const wait = createRuleMsg({ metadata: { wait: '30' } });
    for (const configuration of [{ delayMs: '${metadata.wait}' }, { delayMs: ' 30 ' }, { periodInSeconds: 0 }, { periodInSecondsPattern: '${metadata.none}0' }, {}]) {
      const result = await runner.run(delayChain(configuration), wait, context());
      expect(result.ends.map((e) => e.nodeId), JSON.stringify(configuration)).toEqual(['ok']);
    }
  });

  it('subtracts metadata._delayOffsetMs; nothing left passes at once', async () => {
    // Waiting the 59 s would outlast the test's own timeout.
    const msg = createRuleMsg({ metadata: { _delayOffsetMs: '59000' } });
    const result = await runner.run(delayChain({ delayMs: 59_000 }), msg, context());
    expect(result.ends.map((e) => e.nodeId)).toEqual(['ok']);
    const bad = await runner.run(delayChain({ delayMs: 10 }), createRuleMsg({ metadata: { _delayOffsetMs: 'x' } }), context());
    expect(bad.msg.metadata.error).toBe('metadata._delayOffsetMs gave "x", not a whole number');
  });

  it('goes along Failure for a template that is not a number or a delay above 60 s', async () => {
    const bad = await runner.run(delayChain({ delayMs: '${metadata.wait}' }), createRuleMsg({ metadata: { wait: 'soon' } }), context());
    expect(bad.ends[0]?.nodeId).toBe('failed');
    expect(bad.msg.metadata.error).toBe('delayMs gave "soon", not a whole number');
    const long = await runner.run(delayChain({ delayMs: '${metadata.wait}' }), createRuleMsg({ metadata: { wait: '600000' } }), context());
    expect(long.msg.metadata.error).toBe('a delay of 600000 ms is more than the limit of 60000 ms');
  });

  it('stops waiting when the run is cancelled', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('stop')), 50);
    const c = chain('d', [{ id: 'd', type: 'delay', configuration: { delayMs: 60_000 } }]);
    const err = await runError(c, createRuleMsg(), context(undefined, ac.signal));
    expect(err.message).toBe('chain "d": cancelled');
  });

  it('refuses a fixed delay above the limit and overwrite, which a run cannot honour', () => {
    expect(problemsOf({ id: 'd', type: 'delay', configuration: { delayMs: 60_000, maxPendingMsgs: 10 } })).toEqual([]);
    expect(problemsOf({ id: 'd', type: 'delay', configuration: { delayMs: '90000' } }).join('\n')).toMatch(/delayMs 90000 is more than the limit of 60000 ms/);
    expect(problemsOf({ id: 'd', type: 'delay', configuration: { periodInSeconds: 61 } }).join('\n')).toMatch(/periodInSeconds 61 is more than the limit of 60 s/);
    expect(problemsOf({ id: 'd', type: 'delay', configuration: { overwrite: true } }).join('\n')).toMatch(/overwrite: true is not supported/);
    expect(problemsOf({ id: 'd', type: 'delay', configuration: { period: 500 } }).join('\n')).toMatch(/unknown field "period" \(did you mean delayMs\? RuleGo has no "period"/);
  });
});
