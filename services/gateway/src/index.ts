export { buildGateway } from './app.js';
export type { GatewayDeps } from './deps.js';
export { startGateway } from './service.js';
export { seedGateway } from './seed.js';
export { toAppError } from './http-errors.js';
export type { Access } from './auth/auth.js';
export type { Principal } from './auth/credentials.js';
export { startupBanner } from './banner.js';
