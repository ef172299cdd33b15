export * from './types.js';
export { defaultModelOf, resolveModel } from '@agentry/definitions';
export { ModelProviders, type ModelProvidersDeps, type SecretOpener, type InvalidationSource } from './providers.js';
export { ConnectTimeoutError } from './http.js';
