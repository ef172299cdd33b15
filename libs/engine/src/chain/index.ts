export * from './types.js';
export * from './message.js';
export * from './placeholders.js';
export * from './runner.js';
export { outboundRequest, OutboundRequestError, safeUrl, type OutboundRequest, type OutboundResponse } from './http-request.js';
export * from './tool.js';
