import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import Type from 'typebox';
import { Errors, isAppError } from '@agentry/errors';
import { PubSubChannels, type InvalidateMessage } from '@agentry/contracts';
import { describeErrors, type AgentryConfig } from './config-schema.js';
import { applyFlat, validateConfig, type LoadedConfig } from './config.js';
import { startPeriodic, type PeriodicPass } from './periodic.js';

/**
 * The configuration as it is live across replicas. The file (and built-in defaults) seed it;
 * values changed through the API are kept in the settings table, one row per key, so two
 * replicas changing different keys never overwrite each other. A file value wins again only
 * when the file's value changed since it was last imported. Every replica re-reads on an
 * `invalidate {area:'config'}` message and, to heal a missed message, periodically.
 */

/** The keys `PUT /config` may change: the ones `GET /config` shows and that are not secrets. */
export const EDITABLE_KEYS = [
  'server.host',
  'server.port',
  'models.default_provider',
  'security.requireAuth',
  'security.allowFrom.management',
  'security.allowFrom.chat',
] as const;

const LIVE = 'config.live.';
const SEED = 'config.seed.';

export const ConfigPatch = Type.Object(
  {
    server: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String({ minLength: 1 })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
        },
        { additionalProperties: false },
      ),
    ),
    models: Type.Optional(Type.Object({ default_provider: Type.Optional(Type.String()) }, { additionalProperties: false })),
    security: Type.Optional(
      Type.Object(
        {
          requireAuth: Type.Optional(Type.Boolean()),
          // Each list is its own key: a patch naming one leaves the other as it is; [] allows every address.
          allowFrom: Type.Optional(
            Type.Object(
              { management: Type.Optional(Type.Array(Type.String())), chat: Type.Optional(Type.Array(Type.String())) },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** 400 naming every key of `patch` that `update` would refuse, before anything is written. */
export function assertConfigPatch(patch: unknown): asserts patch is object {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) throw new Errors.VALIDATION('body must be a JSON object');
  const problems = describeErrors(ConfigPatch, patch).map((p) =>
    p.startsWith('unknown key ') ? `${p.slice('unknown key '.length)} cannot be changed through this endpoint` : p,
  );
  if (problems.length > 0) throw new Errors.VALIDATION(problems.join('; '));
}

/** The settings table as LiveConfig needs it (structural, so runtime does not import db). */
export interface SettingsAccess {
  list(prefix: string): Promise<Array<{ key: string; value: unknown }>>;
  set(key: string, value: unknown): Promise<void>;
  delete(key: string): Promise<void>;
}

/** The pub/sub port as LiveConfig needs it. */
export interface InvalidationBus {
  publish(channel: typeof PubSubChannels.invalidate, message: InvalidateMessage): Promise<void>;
  subscribe(channel: typeof PubSubChannels.invalidate, handler: (message: InvalidateMessage) => void): Promise<() => Promise<void>>;
}

/** GET /config: exactly the spec's fields, secrets hidden. */
export interface ConfigView {
  server: { host: string; port: number };
  data: { root_dir: string; logs_dir: string };
  models: {
    default_provider: string;
    providers: Record<string, { id: string; name: string; base_url: string; model: string; models: Array<{ name: string; alias?: string }> }>;
  };
  security: { requireAuth: boolean; users: Record<string, true>; allowFrom: { management: string[]; chat: string[] } };
}

function get(obj: unknown, key: string): unknown {
  return key.split('.').reduce<unknown>((node, part) => (node && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined), obj);
}

function flatten(obj: unknown, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const v = get(obj, key);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

export class LiveConfig {
  #current: AgentryConfig;
  #live: Record<string, unknown> = {};
  #listeners = new Set<(config: AgentryConfig) => void>();
  #unsubscribe: (() => Promise<void>) | null = null;
  #refresh: PeriodicPass | null = null;
  #ignored = '{}';

  private constructor(
    private readonly loaded: LoadedConfig,
    private readonly settings: SettingsAccess,
    private readonly bus: InvalidationBus,
    private readonly logger: Logger,
  ) {
    this.#current = loaded.config;
  }

  static async open(opts: {
    loaded: LoadedConfig;
    settings: SettingsAccess;
    bus: InvalidationBus;
    logger: Logger;
    /** Safety-net re-read interval; 0 disables it. */
    refreshMs?: number;
  }): Promise<LiveConfig> {
    const live = new LiveConfig(opts.loaded, opts.settings, opts.bus, opts.logger);
    await live.#seed();
    await live.reload();
    live.#unsubscribe = await opts.bus.subscribe(PubSubChannels.invalidate, (msg) => {
      if (msg.area === 'config') {
        live.reload().catch((err: unknown) => live.logger.error({ err }, 'config reload failed'));
      }
    });
    const refreshMs = opts.refreshMs ?? 30_000;
    if (refreshMs > 0) {
      live.#refresh = startPeriodic({ name: 'config-reload', everyMs: () => refreshMs, logger: live.logger, pass: () => live.reload() });
    }
    return live;
  }

  /** Imports the file's editable values that changed since the last import. */
  async #seed(): Promise<void> {
    const fileFlat = flatten(this.loaded.fileValues, EDITABLE_KEYS);
    const seeds = new Map((await this.settings.list(SEED)).map((r) => [r.key.slice(SEED.length), r.value]));
    for (const key of EDITABLE_KEYS) {
      if (key in fileFlat) {
        if (!seeds.has(key) || !isDeepStrictEqual(seeds.get(key), fileFlat[key])) {
          await this.settings.set(LIVE + key, fileFlat[key]);
          await this.settings.set(SEED + key, fileFlat[key]);
        }
      } else if (seeds.has(key)) {
        await this.settings.delete(SEED + key);
      }
    }
  }

  get current(): AgentryConfig {
    return this.#current;
  }

  /** Where the file came from, for logs. */
  get source(): string | null {
    return this.loaded.source;
  }

  onChange(listener: (config: AgentryConfig) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async reload(): Promise<void> {
    const rows = await this.settings.list(LIVE);
    let live: Record<string, unknown> = {};
    for (const { key, value } of rows) {
      const name = key.slice(LIVE.length);
      if ((EDITABLE_KEYS as readonly string[]).includes(name)) live[name] = value;
    }
    let next: AgentryConfig;
    try {
      next = this.#compose(live);
    } catch {
      // A stored value that no longer fits (say, a provider removed from the file) must not
      // stop the service: keep every stored value that still fits, drop the others, say so.
      const kept: Record<string, unknown> = {};
      const ignored: Record<string, string> = {};
      for (const [key, value] of Object.entries(live)) {
        try {
          this.#compose({ ...kept, [key]: value });
          kept[key] = value;
        } catch (err) {
          ignored[key] = isAppError(err) ? err.message : String(err);
        }
      }
      // Periodic reloads would repeat the warning; say it once per distinct problem.
      const summary = JSON.stringify(ignored);
      if (summary !== this.#ignored) this.logger.warn({ ignored }, 'stored configuration values ignored: they no longer validate');
      this.#ignored = summary;
      live = kept;
      next = this.#compose(kept);
    }
    this.#live = live;
    this.#set(next);
  }

  #compose(live: Record<string, unknown>): AgentryConfig {
    const merged = applyFlat(this.loaded.fileValues, live);
    return applyFlat(validateConfig(merged, 'configuration'), this.loaded.envPatch);
  }

  #set(next: AgentryConfig): void {
    const changed = !isDeepStrictEqual(next, this.#current);
    this.#current = next;
    if (changed) for (const l of this.#listeners) l(next);
  }

  /** Validates a partial configuration, persists it, and tells every replica. */
  async update(patch: unknown): Promise<AgentryConfig> {
    assertConfigPatch(patch);
    const flat = flatten(patch, EDITABLE_KEYS);
    const live = { ...this.#live, ...flat };
    let next: AgentryConfig;
    try {
      next = this.#compose(live);
    } catch (err) {
      throw new Errors.VALIDATION(isAppError(err) ? err.message.replace(/^Configuration error: configuration: /, '') : String(err));
    }
    for (const [key, value] of Object.entries(flat)) await this.settings.set(LIVE + key, value);
    this.#live = live;
    this.#set(next);
    const msg: InvalidateMessage = { area: 'config' };
    await this.bus.publish(PubSubChannels.invalidate, msg);
    return next;
  }

  view(): ConfigView {
    const c = this.#current;
    const root = c.data.root_dir;
    const users = Object.keys(c.security.users);
    return {
      server: { host: c.server.host, port: c.server.port },
      data: { root_dir: root, logs_dir: c.data.logs_dir ?? `${root.replace(/\/+$/, '')}/logs` },
      models: {
        default_provider: c.models.default_provider,
        providers: Object.fromEntries(
          Object.entries(c.models.providers).map(([id, p]) => [
            id,
            {
              id,
              name: p.name ?? id,
              base_url: p.base_url,
              model: p.model ?? p.models?.find((m) => m.alias === 'default')?.name ?? p.models?.[0]?.name ?? '',
              models: (p.models ?? []).map((m) => (m.alias ? { name: m.name, alias: m.alias } : { name: m.name })),
            },
          ]),
        ),
      },
      security: {
        requireAuth: c.security.requireAuth,
        users: Object.fromEntries((users.length > 0 ? users : ['admin']).map((u) => [u, true as const])),
        allowFrom: { management: [...c.security.allowFrom.management], chat: [...c.security.allowFrom.chat] },
      },
    };
  }

  async close(): Promise<void> {
    await this.#refresh?.stop();
    this.#refresh = null;
    await this.#unsubscribe?.();
    this.#unsubscribe = null;
  }
}
