export * from './types.js';
export * from './message.js';
export * from './placeholders.js';
export * from './runner.js';
export { nodeExecutors } from './nodes/index.js';
export { REST_DEFAULT_TIMEOUT_MS } from './nodes/rest-api-call.js';
export { outboundRequest, OutboundRequestError, safeUrl, type OutboundRequest, type OutboundResponse } from './http-request.js';
