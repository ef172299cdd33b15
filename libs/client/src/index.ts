export { AgentryClient, type SkillSelector, type StreamOptions } from './client.js';
export { Http, normaliseUrl, parseWarnings, type ClientOptions, type Purpose, type QueryValue, type RequestOptions, type TokenSource } from './http.js';
export { ApiError, ConnectionError, StreamError } from './errors.js';
export { parseSse, type SseBody, type SseEvent } from './sse.js';
export {
  chunkText,
  chunkToolEvent,
  readChatStream,
  parseRetryComment,
  describeRetry,
  type RetryNotice,
  type ResumeOptions,
  type ResumePoint,
  type AguiToolEvent,
  type ChatChunk,
  type ChatCompletion,
  type ChatMessage,
  type ChatRequest,
  type ChatUsage,
} from './chat.js';
export type * from './types.js';
export { humanError, type HumanError } from './human-error.js';
export { PLATFORM_NAMES, platformName } from './platforms.js';
