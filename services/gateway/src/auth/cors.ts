import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';

/**
 * Cross-origin access (`server.cors_origins`). By default no other origin gets an
 * `Access-Control-Allow-Origin`, so a page elsewhere cannot read any answer of this gateway, and
 * its preflights are refused (404, or 401 where the route needs a login). The built-in UI is
 * same-origin and needs nothing. Listed origins get their preflights answered (every method the
 * API uses, the headers they ask for); `"*"` opens the API to any origin. No credentials mode:
 * tokens travel in the Authorization header, never in cookies.
 */
export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  const any = origins.includes('*');
  const allowed = new Set(origins.map((o) => o.toLowerCase()));
  await app.register(cors, {
    // No origin listed (the default): `false` skips @fastify/cors's per-request origin callback
    // and its `Vary: Origin`, since no answer then depends on the origin.
    origin: any ? '*' : allowed.size === 0 ? false : (origin, cb) => cb(null, origin !== undefined && allowed.has(origin.toLowerCase()) ? origin : false),
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    exposedHeaders: ['retry-after', 'x-request-id', 'content-disposition', 'x-should-retry'],
    credentials: false,
    maxAge: 600,
  });
}
