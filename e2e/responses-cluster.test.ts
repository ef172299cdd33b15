import { describeWithServers } from '@agentry/testing';
import { responsesConformance } from './responses-conformance.js';
import { responsesLifecycleConformance } from './responses-lifecycle.js';
import { clusterTarget } from './targets.js';

/**
 * The same Responses API suite against cluster mode: the gateway and two agent-workers as
 * separate processes on real Postgres and Redis.
 */
describeWithServers('responses API, cluster mode (separate gateway and worker processes)', () => {
  const target = clusterTarget();
  responsesConformance(target);
  responsesLifecycleConformance(target);
});
