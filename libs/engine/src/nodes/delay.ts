import { setTimeout as sleep } from 'node:timers/promises';
import Type from 'typebox';
import { renderTemplate } from '../chain/placeholders.js';
import type { RuleMsg } from '../chain/types.js';
import { defineNodeType } from './types.js';

/** Longest delay a run may hold a message: chain runs happen inside requests and agent runs. */
export const MAX_DELAY_MS = 60_000;
/** RuleGo's metadata key subtracted from the delay (time already spent elsewhere). */
const OFFSET_KEY = '_delayOffsetMs';

const INTEGER = /^-?\d+$/;
const DELAY_FIELD_HINTS: Readonly<Record<string, string>> = {
  period: 'did you mean delayMs? RuleGo has no "period" and would not delay at all',
  maxPendingMsg: 'did you mean maxPendingMsgs?',
};

/**
 * Holds the message, then passes it on along `Success` (RuleGo's `delay`). `delayMs` is a number
 * of milliseconds or a template (`${metadata.wait}`); without it the deprecated
 * `periodInSeconds`/`periodInSecondsPattern` count. `metadata._delayOffsetMs` is subtracted, and
 * 0 or less passes at once. Bounded: at most 60 s (more is a Failure), and a cancelled run stops
 * waiting. Each run delays its own message, so `overwrite` (one pending message shared by all
 * messages) cannot be honoured and is refused; `maxPendingMsgs` is accepted and has no effect.
 */
export const delay = defineNodeType({
  type: 'delay',
  description: 'waits delayMs (at most 60 s) before passing the message on',
  configuration: Type.Object({
    delayMs: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.String()], { description: 'milliseconds, or a ${metadata.x} template' })),
    periodInSeconds: Type.Optional(Type.Integer({ minimum: 0, description: 'deprecated: seconds, when delayMs is absent' })),
    periodInSecondsPattern: Type.Optional(Type.String({ description: 'deprecated: a template giving seconds' })),
    maxPendingMsgs: Type.Optional(Type.Integer({ description: 'accepted for RuleGo; each run holds one message' })),
    overwrite: Type.Optional(Type.Boolean()),
  }, { additionalProperties: false }),
  // RuleGo ignores fields its delay does not have (so a misspelt one means no delay at all):
  // these two occur in RuleGo's own testdata (test_fork_direct_join.json).
  unknownFieldHint: (path, key) => (path === 'configuration' ? DELAY_FIELD_HINTS[key] : undefined),
  validate(config) {
    const problems: string[] = [];
    if (config.overwrite === true) problems.push('overwrite: true is not supported: each run delays its own message, none is shared to overwrite');
    const fixed = typeof config.delayMs === 'number' ? config.delayMs : INTEGER.test(config.delayMs?.trim() ?? '') ? Number(config.delayMs) : undefined;
    if (fixed !== undefined && fixed > MAX_DELAY_MS) problems.push(`delayMs ${fixed} is more than the limit of ${MAX_DELAY_MS} ms`);
    if (config.periodInSeconds !== undefined && config.periodInSeconds * 1000 > MAX_DELAY_MS) {
      problems.push(`periodInSeconds ${config.periodInSeconds} is more than the limit of ${MAX_DELAY_MS / 1000} s`);
    }
    return problems;
  },
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
