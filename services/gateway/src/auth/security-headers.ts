import type { FastifyInstance } from 'fastify';

/**
 * What a browser must not do with any answer of this gateway: guess a content type (a JSON or
 * workspace body sniffed as HTML), render it as a page with scripts, or frame it. The UI's own
 * pages replace the policy with theirs (ui.ts); everything else (JSON, SSE, downloads, probes)
 * is data, so it gets the strictest one.
 */
export const API_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox";

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': API_CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
} as const;

export function registerSecurityHeaders(app: FastifyInstance): void {
  // A callback, not an async hook: nothing here waits, and every request would pay a promise.
  app.addHook('onRequest', (_req, reply, done) => {
    reply.headers(SECURITY_HEADERS);
    done();
  });
}
