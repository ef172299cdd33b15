import type { Runtime } from '@agentry/runtime';

/** What the gateway is built from; tests pass their own. */
export type GatewayDeps = Pick<Runtime, 'config' | 'loaded' | 'logger' | 'health' | 'metrics' | 'db' | 'bus' | 'mode' | 'secrets'>;
