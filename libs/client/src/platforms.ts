/**
 * The names people know the channel platforms by. The API and the stored data keep the spec's
 * ids (`chat_a` ... `chat_e`); every place a person reads one (the CLI's tables, the web UI)
 * shows this name instead.
 */
export const PLATFORM_NAMES: Readonly<Record<string, string>> = {
  api: 'API',
  chat_a: 'Lark',
  chat_a_webhook: 'Lark webhook',
  chat_b: 'DingTalk',
  chat_c: 'WeCom',
  chat_d: 'Telegram',
  chat_e: 'Slack',
  cron: 'cron',
};

/** A platform (or session channel) id as a person reads it; an unknown id as it is. */
export function platformName(id: string): string {
  return PLATFORM_NAMES[id] ?? id;
}
