export * from './types.js';
export * from './resolve.js';
export { ModelProviders, type ModelProvidersDeps, type SecretOpener, type InvalidationSource } from './providers.js';
export { ConnectTimeoutError } from './http.js';
