/**
 * The run protocol's public surface: what the gateway, scheduler, worker and engine import, named
 * one by one. Inside the package, modules import each other directly.
 */
export { AgentCache, OwnerAdminCache, SkillsCache } from './agent-cache.js';
export { TokenBudgets } from './token-budget.js';
export { agentDisabledError, assertAgentEnabled, isAgentDisabled } from './agent-enabled.js';
export { cancelRun } from './cancel.js';
export { COMPACTION_PICKUP_MS, requestCompaction, type CompactionRequest } from './compact.js';
export { createCronJob } from './create-cron-job.js';
export { cronJobView } from './cron-job-view.js';
export { completeCronRun, deliveryOf, recordCronRun, type CronRunOutcome } from './cron-run.js';
export { RunEventPublisher, type EventBody } from './events/publisher.js';
export { EventGapError, RunEventQueue } from './events/queue.js';
export { RunRelay, storedEnding } from './events/relay.js';
export { RunLeaseWatch, WORKER_LOST_MESSAGE, relayLease, type RelayLease, type WatchedLease } from './events/lease.js';
export { GatewayReplies, runEventChannel } from './events/replies.js';
export { resumeRunEvents } from './events/resume.js';
export {
  HEARTBEAT_OK,
  HEARTBEAT_SESSION,
  heartbeatOfDsl,
  heartbeatProblems,
  heartbeatSchedule,
  isHeartbeatOk,
  parseHeartbeatTarget,
  withinActiveHours,
} from './heartbeat.js';
export { heartbeatJobId, isHeartbeatJob, syncHeartbeatJob } from './heartbeat-job.js';
export { LocalClaims } from './local-claims.js';
export { checkSchedule, nextTick, shortestGapSeconds } from './schedule.js';
export { enqueueRun, newRunId, submitRun, type SubmitRunInput } from './submit.js';
