import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastifyStatic from '@fastify/static';
import type { GatewayDeps } from './deps.js';

/**
 * The built-in web UI: the static files of `uiDir` (services/web/build) at `/`, with a
 * history-API fallback (any other GET outside `/api` answers index.html, so that client-side
 * routes survive a reload) and security headers on every UI response. The API keeps `/api/v1`;
 * `/health`, `/ready` and `/metrics` are routes of their own and win over the fallback.
 */

/** No inline scripts or styles, no other host: the UI talks to this gateway only. */
export const UI_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';
const NO_CACHE = 'no-cache';

export async function uiRoutes(app: FastifyInstance, deps: Pick<GatewayDeps, 'logger'>, uiDir: string): Promise<void> {
  const root = path.resolve(uiDir);
  if (!fs.existsSync(path.join(root, 'index.html'))) {
    deps.logger.warn({ uiDir: root }, 'the web UI is not built, so / is not served: run `npm run build` (or `npm start`, which builds it)');
    return;
  }

  await app.register(async (ui) => {
    // Only decorates reply.sendFile here: the one route below decides what is served.
    await ui.register(fastifyStatic, { root, serve: false, cacheControl: false, dotfiles: 'deny', index: false });

    const serve = async (req: FastifyRequest, reply: FastifyReply) => {
      const urlPath = req.url.split('?')[0] ?? '/';
      if (urlPath === '/api' || urlPath.startsWith('/api/')) return reply.callNotFound();
      reply.headers({
        'content-security-policy': UI_CONTENT_SECURITY_POLICY,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
      });
      const file = await existingFile(root, urlPath);
      if (file) {
        // Hashed bundles never change under their name; everything else is revalidated.
        reply.header('cache-control', file.startsWith('assets/') ? IMMUTABLE : NO_CACHE);
        return reply.sendFile(file);
      }
      // A missing bundle is a 404, not the page (a stale tab must not run HTML as a script).
      if (urlPath.startsWith('/assets/')) return reply.callNotFound();
      reply.header('cache-control', NO_CACHE);
      return reply.sendFile('index.html');
    };
    ui.get('/', { config: { access: 'public', addressList: 'none' }, logLevel: 'warn' }, serve);
    ui.get('/*', { config: { access: 'public', addressList: 'none' }, logLevel: 'warn' }, serve);
  });
}

/** The path of a regular file under root that the URL names (relative, with `/`), or undefined. */
async function existingFile(root: string, urlPath: string): Promise<string | undefined> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  const relative = path.posix.normalize(decoded).replace(/^\/+/, '');
  if (relative === '' || relative.startsWith('..') || relative.split('/').some((part) => part.startsWith('.'))) return undefined;
  const absolute = path.join(root, relative);
  if (!absolute.startsWith(root + path.sep)) return undefined;
  const stat = await fs.promises.stat(absolute).catch(() => undefined);
  return stat?.isFile() ? relative : undefined;
}
