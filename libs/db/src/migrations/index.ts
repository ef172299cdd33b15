import type { Migration } from 'kysely';
import * as settings from './20261122T000000_settings.js';
import * as agents from './20261122T010000_agents.js';
import * as auth from './20261122T020000_auth.js';
import * as runsSessions from './20261122T030000_runs_sessions.js';
import * as providers from './20261122T040000_providers.js';
import * as cron from './20261122T050000_cron.js';
import * as channels from './20261122T060000_channels.js';
import * as runsUnfinished from './20261123T000000_runs_unfinished.js';
import * as retention from './20261124T000000_retention.js';
import * as ownership from './20261125T000000_ownership.js';
import * as usersDisabled from './20261125T010000_users_disabled.js';
import * as cronRunsSkipped from './20261125T220000_cron_runs_skipped.js';
import * as sessionTurnStatus from './20261126T000000_session_turn_status.js';
import * as runsReplyTo from './20261126T000100_runs_reply_to.js';
import * as sessionCompaction from './20261126T010000_session_compaction.js';
import * as usage from './20261126T010100_usage.js';
import * as runsSteps from './20261126T020000_runs_steps.js';
import * as agentAudience from './20261128T020000_agent_audience.js';
import * as cronRunsRunId from './20261128T060000_cron_runs_run_id.js';
import * as usageKind from './20261129T030000_usage_kind.js';

/**
 * Every migration, by name. Listed by hand rather than read from the folder so the set is the
 * same under tsx, compiled JS and bundles. Names are `YYYYMMDDTHHMMSS_topic` (UTC) and run in
 * name order; add new ones at the end, never edit or rename an applied one.
 */
export const migrations: Record<string, Migration> = {
  '20261122T000000_settings': settings,
  '20261122T010000_agents': agents,
  '20261122T020000_auth': auth,
  '20261122T030000_runs_sessions': runsSessions,
  '20261122T040000_providers': providers,
  '20261122T050000_cron': cron,
  '20261122T060000_channels': channels,
  '20261123T000000_runs_unfinished': runsUnfinished,
  '20261124T000000_retention': retention,
  '20261125T000000_ownership': ownership,
  '20261125T010000_users_disabled': usersDisabled,
  '20261125T220000_cron_runs_skipped': cronRunsSkipped,
  '20261126T000000_session_turn_status': sessionTurnStatus,
  '20261126T000100_runs_reply_to': runsReplyTo,
  '20261126T010000_session_compaction': sessionCompaction,
  '20261126T010100_usage': usage,
  '20261126T020000_runs_steps': runsSteps,
  '20261128T020000_agent_audience': agentAudience,
  '20261128T060000_cron_runs_run_id': cronRunsRunId,
  '20261129T030000_usage_kind': usageKind,
};
