import { describeWithServers } from '@agentry/testing';
import { clientToolsConformance } from './client-tools.js';
import { clusterTarget } from './targets.js';

/** The client's own tools beside the agent's (issue 38), cluster mode: gateway and workers as processes on Postgres and Redis. */
describeWithServers('client tools, cluster mode (separate gateway and worker processes)', () => {
  clientToolsConformance(clusterTarget());
});
