import { describeWithServers } from '@agentry/testing';
import { agentDeletionConformance, chatConformance, requestTimeoutConformance, sessionConformance, skillsConformance } from './chat-conformance.js';
import { clusterTarget } from './targets.js';

/**
 * The same conformance suite against cluster mode: the gateway and two agent-workers as
 * separate processes on real Postgres and Redis.
 */
describeWithServers('chat completions, cluster mode (separate gateway and worker processes)', () => {
  const target = clusterTarget();
  chatConformance(target);
  agentDeletionConformance(target);
  requestTimeoutConformance(target);
  sessionConformance(target);
  skillsConformance(target);
});
