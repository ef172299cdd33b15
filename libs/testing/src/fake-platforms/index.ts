export * from './types.js';
// Each fake is named after the platform it imitates, like its adapter; which spec id
// (`chat_a`..`chat_e`) each platform stands for is the ADAPTERS table in libs/channels/src/registry.ts.
export { startFakeDingTalk } from './dingtalk.js';
export { startFakeLarkWebhook } from './lark-webhook.js';
export { startFakeLark } from './lark.js';
export { startFakeSlack } from './slack.js';
export { startFakeTelegram } from './telegram.js';
export { startFakeWeCom } from './wecom.js';
