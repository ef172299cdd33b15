import type { Platform } from '@agentry/contracts';
import type { ChannelAdapter } from './adapter.js';
import { dingtalk } from './platforms/dingtalk.js';
import { larkWebhook } from './platforms/lark-webhook.js';
import { lark } from './platforms/lark.js';
import { slack } from './platforms/slack.js';
import { telegram } from './platforms/telegram.js';
import { wecom } from './platforms/wecom.js';

/**
 * One adapter per messaging platform; `api` has none (its clients call chat completions).
 *
 * This is the one table from the spec's platform ids to platforms. The ids (`chat_a`..`chat_e`)
 * stay the public names (routes, config, database rows, logs), while modules are named after the
 * platform they speak so a reader finds Telegram in `telegram.ts`. The adapter of an id lives in
 * `src/platforms/<module>.ts` and its fake server in `libs/testing/src/fake-platforms/<module>.ts`.
 */
export const ADAPTERS: Readonly<Record<Exclude<Platform, 'api'>, ChannelAdapter>> = {
  chat_a: lark, // lark.ts: Lark/Feishu app bot
  chat_a_webhook: larkWebhook, // lark-webhook.ts: Lark/Feishu custom-bot webhook
  chat_b: dingtalk, // dingtalk.ts: DingTalk robot
  chat_c: wecom, // wecom.ts: WeCom (WeChat Work) app
  chat_d: telegram, // telegram.ts: Telegram Bot API
  chat_e: slack, // slack.ts: Slack Web API and Events API
};

export function adapterFor(platform: Platform): ChannelAdapter | undefined {
  return platform === 'api' ? undefined : ADAPTERS[platform];
}

/**
 * Fields an account of any platform may carry: routing and policy (read by the connector), and
 * `app_id`, which the spec gives every account (shown as `appId`) though not every platform reads it.
 */
const COMMON_ACCOUNT_FIELDS = ['description', 'app_id', 'dm_policy', 'group_policy', 'allow_from', 'session_scope'] as const;

/** Every written field an account of `platform` is read by (besides id, name, enabled, binding). */
export function accountFields(platform: Platform): readonly string[] {
  // An api account's `budget` is read by the gateway (chat's budget check), not by an adapter.
  const own = platform === 'api' ? { settings: ['budget'], secrets: ['api_key'] } : ADAPTERS[platform].fields;
  return [...COMMON_ACCOUNT_FIELDS, ...own.settings, ...own.secrets];
}
