import Type from 'typebox';
import { defineNodeSpec } from './types.js';

/** Longest delay a run may hold a message: chain runs happen inside requests and agent runs. */
export const MAX_DELAY_MS = 60_000;

const INTEGER = /^-?\d+$/;
const DELAY_FIELD_HINTS: Readonly<Record<string, string>> = {
  period: 'did you mean delayMs? RuleGo has no "period" and would not delay at all',
  maxPendingMsg: 'did you mean maxPendingMsgs?',
};

/** The `delay` node as a definition holds it; what it does is the engine's `nodes/delay.ts`. */
export const delaySpec = defineNodeSpec({
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
});
