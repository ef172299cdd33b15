import type { Platform } from '@agentry/contracts';
import type { ChannelAdapter } from './adapter.js';
import { telegram } from './platforms/chat_d.js';
import { slack } from './platforms/chat_e.js';
import { lark } from './platforms/chat_a.js';
import { larkWebhook } from './platforms/chat_a_webhook.js';
import { dingtalk } from './platforms/chat_b.js';
import { wecom } from './platforms/chat_c.js';

/** One adapter per messaging platform; `api` has none (its clients call chat completions). */
export const ADAPTERS: Readonly<Record<Exclude<Platform, 'api'>, ChannelAdapter>> = {
  chat_a: lark,
  chat_a_webhook: larkWebhook,
  chat_b: dingtalk,
  chat_c: wecom,
  chat_d: telegram,
  chat_e: slack,
};

export function adapterFor(platform: Platform): ChannelAdapter | undefined {
  return platform === 'api' ? undefined : ADAPTERS[platform];
}
