import { setTimeout as sleep } from 'node:timers/promises';
import { renderTemplate } from '../chain/placeholders.js';
import type { RuleMsg } from '../chain/types.js';
import { delaySpec, MAX_DELAY_MS } from '@agentry/definitions';
import { defineNodeType } from './types.js';

/** RuleGo's metadata key subtracted from the delay (time already spent elsewhere). */
const OFFSET_KEY = '_delayOffsetMs';

const INTEGER = /^-?\d+$/;

/**
 * Holds the message, then passes it on along `Success` (RuleGo's `delay`). `delayMs` is a number
 * of milliseconds or a template (`${metadata.wait}`); without it the deprecated
 * `periodInSeconds`/`periodInSecondsPattern` count. `metadata._delayOffsetMs` is subtracted, and
 * 0 or less passes at once. Bounded: at most 60 s (more is a Failure), and a cancelled run stops
 * waiting. Each run delays its own message, so `overwrite` (one pending message shared by all
 * messages) cannot be honoured and is refused; `maxPendingMsgs` is accepted and has no effect.
 */
export const delay = defineNodeType({
  ...delaySpec,
  async execute(msg, config, ctx) {
    const ms = delayOf(msg, config) - offsetOf(msg);
    if (ms <= 0) return { msg, relation: 'Success' };
    if (ms > MAX_DELAY_MS) throw new Error(`a delay of ${ms} ms is more than the limit of ${MAX_DELAY_MS} ms`);
    await sleep(ms, undefined, { signal: ctx.signal });
    return { msg, relation: 'Success' };
  },
});

function delayOf(msg: RuleMsg, config: { delayMs?: number | string; periodInSeconds?: number; periodInSecondsPattern?: string }): number {
  if (typeof config.delayMs === 'number') return config.delayMs;
  const text = config.delayMs?.trim() ?? '';
  if (text !== '') return integer(renderTemplate(text, msg), 'delayMs');
  if (config.periodInSecondsPattern) return integer(renderTemplate(config.periodInSecondsPattern, msg), 'periodInSecondsPattern') * 1000;
  return (config.periodInSeconds ?? 0) * 1000;
}

function offsetOf(msg: RuleMsg): number {
  const v = msg.metadata[OFFSET_KEY]?.trim();
  return v ? integer(v, `metadata.${OFFSET_KEY}`) : 0;
}

function integer(text: string, what: string): number {
  if (!INTEGER.test(text.trim())) throw new Error(`${what} gave "${text.slice(0, 40)}", not a whole number`);
  return Number(text.trim());
}
