import type { FastifyInstance } from 'fastify';

/**
 * What a browser must not do with any answer of this gateway: guess a content type (a JSON or
 * workspace body sniffed as HTML), render it as a page with scripts, or frame it. The UI's own
 * pages replace the policy with theirs (ui.ts); everything else (JSON, SSE, downloads, probes)
 * is data, so it gets the strictest one.
 */
export const API_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox";

export function registerSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', async (_req, reply) => {
    reply.headers({
      'x-content-type-options': 'nosniff',
      'content-security-policy': API_CONTENT_SECURITY_POLICY,
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    });
  });
}
