/** How a provider's models are named: the default model, and a requested name or alias. */

interface ProviderModels {
  /** Default model name as written ('' when not set). */
  model: string;
  models: ReadonlyArray<{ name: string; alias?: string }>;
}

/** `model`, else the entry with alias `default`, else the first entry; '' when there is none. */
export function defaultModelOf(p: ProviderModels): string {
  return p.model || p.models.find((m) => m.alias === 'default')?.name || p.models[0]?.name || '';
}

/**
 * The model name to send for a requested name or alias (absent or `default`: the default
 * model). A provider that lists models accepts only those (by name or alias) and its `model`;
 * one that lists none passes any name through. Undefined: unknown (or no default model).
 */
export function resolveModel(p: ProviderModels, requested?: string): string | undefined {
  if (!requested || (requested === 'default' && !p.models.some((m) => m.name === 'default'))) return defaultModelOf(p) || undefined;
  if (requested === p.model || p.models.some((m) => m.name === requested)) return requested;
  const aliased = p.models.find((m) => m.alias === requested);
  if (aliased) return aliased.name;
  return p.models.length === 0 ? requested : undefined;
}
