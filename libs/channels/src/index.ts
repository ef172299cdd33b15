export * from './adapter.js';
export { callPlatform, httpError, retryAfterMs, type PlatformResponse } from './http.js';
export { MemoryTokenCache } from './token-cache.js';
export { splitText } from './split.js';
export { accountFields, adapterFor, ADAPTERS } from './registry.js';
export * from './outbox.js';
export * from './routing.js';
export { MEDIA_MAX_BYTES, mediaDirOf, normaliseMediaPath, readMediaFile, resolveMediaFile } from './media-area.js';
