/**
 * The windows budgets are counted in (`Bus.count`), named the same by the gateway that checks
 * and the worker that adds tokens: a fixed window per principal, its index in the key, so that
 * a new window starts at 0 without anyone resetting it.
 */
export type BudgetWindow = 'tokensPerDay' | 'requestsPerMinute';

const WINDOW_MS: Record<BudgetWindow, number> = { tokensPerDay: 86_400_000, requestsPerMinute: 60_000 };

/** A counter outlives its window by this much: a read at the very end never recreates it at 0. */
const GRACE_MS = 60_000;

export interface BudgetCounter {
  key: string;
  /** Lifetime to give the counter when this call creates it. */
  ttlMs: number;
  /** When the window ends (UTC midnight for tokens, the next minute for requests). */
  resetsAt: Date;
}

export function budgetCounter(window: BudgetWindow, principal: string, now = Date.now()): BudgetCounter {
  const size = WINDOW_MS[window];
  const index = Math.floor(now / size);
  const end = (index + 1) * size;
  return { key: `budget:${window}:${principal}:${index}`, ttlMs: end - now + GRACE_MS, resetsAt: new Date(end) };
}
