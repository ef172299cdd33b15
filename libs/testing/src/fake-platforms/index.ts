export * from './types.js';
export { startFakeLark } from './chat_a.js';
export { startFakeLarkWebhook } from './chat_a_webhook.js';
export { startFakeDingTalk } from './chat_b.js';
export { startFakeWeCom } from './chat_c.js';
export { startFakeTelegram } from './chat_d.js';
export { startFakeSlack } from './chat_e.js';
