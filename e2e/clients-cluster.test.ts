import { describeWithServers } from '@agentry/testing';
import { clientsConformance } from './clients-conformance.js';
import { responsesClientsConformance } from './clients-responses.js';
import { pythonClientsConformance } from './python-clients.js';
import { clusterTarget } from './targets.js';

/**
 * Third-party clients against cluster mode: the gateway and two agent-workers as separate
 * processes on real Postgres and Redis.
 */
describeWithServers('third-party clients, cluster mode (separate gateway and worker processes)', () => {
  const target = clusterTarget();
  clientsConformance(target);
  responsesClientsConformance(target);
  pythonClientsConformance(target);
});
