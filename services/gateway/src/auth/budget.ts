import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { budgetCounter, type Budget, type BudgetWindow } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import type { Bus } from '@agentry/bus';
import type { Principal } from './credentials.js';
import { sessionOwner } from './ownership.js';

/** How often the "budget not enforced" warning may repeat while the counter stays away. */
const WARN_EVERY_MS = 60_000;
let lastWarning = 0;

/**
 * Refuses a chat or responses request when its principal's budget is spent: 429 `{error}`
 * naming the budget and when it resets, with `Retry-After`. The budget rides on the principal
 * (the credential index keeps it in memory); a principal without one costs nothing. With one,
 * a single round trip to the shared counter (both windows at once): the day's tokens are read
 * (the worker adds them as model calls finish), the minute's requests counted. When the counter
 * does not answer, the request goes through with a warning, as with the chat rate limit.
 */
export async function enforceBudget(counter: Pick<Bus, 'count'>, logger: Logger, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const budget = budgetOfPrincipal(req.principal);
  if (!budget) return;
  const who = sessionOwner(req.principal);
  const now = Date.now();
  const tokens = budget.tokensPerDay ? budgetCounter('tokensPerDay', who, now) : undefined;
  const requests = budget.requestsPerMinute ? budgetCounter('requestsPerMinute', who, now) : undefined;
  let used: [number, number];
  try {
    used = await Promise.all([tokens ? counter.count(tokens.key, 0, tokens.ttlMs) : 0, requests ? counter.count(requests.key, 1, requests.ttlMs) : 0]);
  } catch (err) {
    if (Date.now() - lastWarning >= WARN_EVERY_MS) {
      lastWarning = Date.now();
      logger.warn({ err }, 'budgets are not enforced: their counter (the bus) does not answer');
    }
    return;
  }
  if (tokens && used[0] >= budget.tokensPerDay!) refuse(reply, who, 'tokensPerDay', `${budget.tokensPerDay} tokens per day`, tokens.resetsAt, now);
  if (requests && used[1] > budget.requestsPerMinute!) refuse(reply, who, 'requestsPerMinute', `${budget.requestsPerMinute} request${budget.requestsPerMinute === 1 ? '' : 's'} per minute`, requests.resetsAt, now);
}

function budgetOfPrincipal(p: Principal): Budget | undefined {
  return p.kind === 'user' || p.kind === 'account' ? p.budget : undefined;
}

function refuse(reply: FastifyReply, who: string, window: BudgetWindow, limit: string, resetsAt: Date, now: number): never {
  const seconds = Math.max(1, Math.ceil((resetsAt.getTime() - now) / 1000));
  reply.header('retry-after', String(seconds));
  reply.request.log.info({ budget: window, retryAfterSeconds: seconds }, 'budget spent');
  throw new Errors.RATE_LIMITED(`the ${window} budget of ${who} (${limit}) is spent; it resets at ${resetsAt.toISOString()} (in ${seconds} s)`);
}
