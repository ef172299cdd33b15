import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * One registry per process (not prom-client's global), so that several apps built in one test
 * process, or the four services of embedded mode, do not collide.
 */
export function createMetricsRegistry(defaultLabels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(defaultLabels);
  collectDefaultMetrics({ register: registry });
  return registry;
}

export { Registry } from 'prom-client';
