import { describeWithServers, startTestCluster } from '@agentry/testing';
import { PROBES, authorityMatrix } from './authority-matrix-suite.js';

/**
 * The run-time authority matrix in cluster mode (gateway, agent-worker and scheduler as processes
 * on Postgres and Redis), on a representative subset: one probe per kind of recorder and carrier
 * (bash: the canary executable; http_fetch: a built-in's network switch; restApiCall with a sealed
 * header: a node, its credential and the lending rule) over every reach and asker. The other
 * probes differ from these only in the field set, which the embedded run covers in full.
 */
const SUBSET = new Set(['bash', 'http_fetch allowPrivateNetworks', 'restApiCall sealed header']);

describeWithServers('authority matrix (cluster mode)', () => {
  authorityMatrix({
    probes: PROBES.filter((p) => SUBSET.has(p.name)),
    start: async (configLines) => {
      const cluster = await startTestCluster({ workers: 1, schedulers: 1, configLines });
      return { baseURL: cluster.baseURL, stop: () => cluster.stop() };
    },
  });
});
