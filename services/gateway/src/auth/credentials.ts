import type { Logger } from 'pino';
import { listBindings, listChannelAccounts, listUsers, type Db, type Role } from '@agentry/db';
import { PubSubChannels } from '@agentry/contracts';
import type { Bus } from '@agentry/bus';
import { startPeriodic, type PeriodicPass } from '@agentry/runtime';
import type { Budget } from '@agentry/contracts';
import { hashApiKey } from './passwords.js';

/** Who made a request; `budget`: what chat may spend (absent: no limit), from the credential index. */
export type Principal =
  | { kind: 'user'; username: string; role: Role; via: 'jwt' | 'apiKey'; budget?: Budget }
  /** `agents`: the agents the account is bound to; absent when it has no binding (it may chat with any). */
  | { kind: 'account'; platform: 'api'; accountId: string; agents?: readonly string[]; budget?: Budget }
  /** No credentials on a route that needs none: `security.requireAuth` is false, so the caller acts as an admin. */
  | { kind: 'open' }
  | { kind: 'anonymous' };

interface UserEntry {
  role: Role;
  tokenVersion: number;
  budget?: Budget;
}

/** A stored budget with at least one limit, else undefined (no check at all on the chat path). */
function budgetOf(value: unknown): Budget | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const limit = (x: unknown) => (typeof x === 'number' && x > 0 ? { value: Math.floor(x) } : undefined);
  const tokens = limit(v.tokensPerDay);
  const requests = limit(v.requestsPerMinute);
  if (!tokens && !requests) return undefined;
  return { ...(tokens ? { tokensPerDay: tokens.value } : {}), ...(requests ? { requestsPerMinute: requests.value } : {}) };
}

/**
 * Every credential a request may carry, in memory, so that the chat hot path checks a key
 * without a database round trip. Rebuilt from Postgres at start, on an
 * `invalidate {area: users|apiKeys|channels}` message from any replica, and periodically as a
 * safety net against a missed message.
 */
export class CredentialIndex {
  #keys = new Map<string, Principal>();
  #users = new Map<string, UserEntry>();
  #unsubscribe: (() => Promise<void>) | null = null;
  #refresh: PeriodicPass | null = null;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    /** Whether the `api` platform as a whole is switched on (live configuration). */
    private readonly apiPlatformEnabled: () => boolean,
  ) {}

  async start(bus: Bus, refreshMs = 30_000): Promise<void> {
    await this.reload();
    this.#unsubscribe = await bus.pubsub.subscribe(PubSubChannels.invalidate, ({ area }) => {
      if (area === 'users' || area === 'apiKeys' || area === 'channels' || area === 'config') {
        this.reload().catch((err: unknown) => this.logger.error({ err }, 'credential reload failed'));
      }
    });
    if (refreshMs > 0) {
      this.#refresh = startPeriodic({ name: 'credential-reload', everyMs: () => refreshMs, logger: this.logger, pass: () => this.reload() });
    }
  }

  async reload(): Promise<void> {
    const [users, accounts, bindings] = await Promise.all([listUsers(this.db), listChannelAccounts(this.db, 'api'), listBindings(this.db)]);
    const keys = new Map<string, Principal>();
    const byName = new Map<string, UserEntry>();
    // A disabled user is absent here, so that its JWT and API key are refused like a deleted user's.
    for (const u of users) {
      if (u.disabled) continue;
      const budget = budgetOf(u.budget);
      byName.set(u.username, { role: u.role, tokenVersion: u.tokenVersion, ...(budget ? { budget } : {}) });
      if (u.apiKeyHash) keys.set(u.apiKeyHash, { kind: 'user', username: u.username, role: u.role, via: 'apiKey', ...(budget ? { budget } : {}) });
    }
    const platformOn = this.apiPlatformEnabled();
    for (const a of accounts) {
      if (!a.apiKeyHash || !a.enabled || !platformOn) continue;
      // Bindings of this account, or of every api account: the agents it may chat with.
      const agents = bindings.filter((b) => b.match.channel === 'api' && (b.match.accountId === undefined || b.match.accountId === a.id)).map((b) => b.agentId);
      const budget = budgetOf((a.settings as Record<string, unknown> | null)?.budget);
      keys.set(a.apiKeyHash, { kind: 'account', platform: 'api', accountId: a.id, ...(agents.length > 0 ? { agents } : {}), ...(budget ? { budget } : {}) });
    }
    this.#keys = keys;
    this.#users = byName;
  }

  byApiKey(key: string): Principal | undefined {
    return this.#keys.get(hashApiKey(key));
  }

  user(username: string): UserEntry | undefined {
    return this.#users.get(username);
  }

  /** Chat needs a credential whenever any key exists, whatever requireAuth says. */
  get anyKeyConfigured(): boolean {
    return this.#keys.size > 0;
  }

  async close(): Promise<void> {
    await this.#refresh?.stop();
    await this.#unsubscribe?.();
  }
}
