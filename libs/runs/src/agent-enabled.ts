import { Errors, type AppError } from '@agentry/errors';

/**
 * An agent is switched off with RuleGo's own field, `ruleChain.disabled: true`, so the flag
 * travels with the DSL (exports, file imports, the editor) and there is no second copy to keep
 * in step. Absent or false: enabled.
 */
export function isAgentDisabled(dsl: unknown): boolean {
  const info = (dsl as { ruleChain?: { disabled?: unknown } } | null)?.ruleChain;
  return info?.disabled === true;
}

/** The one refusal every path gives (chat, the worker, cron fires), so people read the same words. */
export function agentDisabledError(agentId: string): AppError {
  return new Errors.FORBIDDEN(`agent "${agentId}" is disabled`);
}

/** Throws the refusal when the agent is switched off. */
export function assertAgentEnabled(agent: { id: string; dsl: unknown }): void {
  if (isAgentDisabled(agent.dsl)) throw agentDisabledError(agent.id);
}
