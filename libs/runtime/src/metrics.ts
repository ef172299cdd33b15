import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';

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

/**
 * Embedded mode: PGlite's WebAssembly memory, which the default metrics count only inside
 * `nodejs_external_memory_bytes` (docs/benchmarks.md, "Memory of the embedded server").
 */
export function pgliteMemoryGauge(registry: Registry, bytes: () => number): void {
  new Gauge({
    name: 'agentry_pglite_memory_bytes',
    help: "Size of PGlite's WebAssembly memory (shared buffers and the backend's heap; it never shrinks)",
    registers: [registry],
    collect() {
      this.set(bytes());
    },
  });
}

export { Registry } from 'prom-client';
