import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { Static } from 'typebox';
import { httpFetchSpec } from '@agentry/definitions';
import { AddressNotAllowedError, assertPublicAddress, policyLookup, type AddressPolicy } from '../net-policy.js';
import { ToolError } from '../types.js';
import { checkArgs, checkConfig, isBinary, plural, type BuiltinTool } from './common.js';

const Parameters = httpFetchSpec.parameters;
type Args = Static<typeof Parameters>;

const Config = httpFetchSpec.configSchema;
type Config = Static<typeof Config>;

interface Fetched {
  status: number;
  statusText: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  cut: boolean;
}

const FORBIDDEN_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-authorization', 'proxy-connection']);

function fetchOnce(url: URL, method: string, headers: Record<string, string>, body: string | undefined, policy: AddressPolicy, signal: AbortSignal, maxBytes: number): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, { method, headers, lookup: policyLookup(policy), signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let cut = false;
      res.on('data', (chunk: Buffer) => {
        if (cut) return;
        const room = maxBytes - size;
        if (chunk.byteLength > room) {
          chunks.push(chunk.subarray(0, room));
          size = maxBytes;
          cut = true;
          res.destroy();
          resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: res.headers, body: Buffer.concat(chunks), cut });
          return;
        }
        chunks.push(chunk);
        size += chunk.byteLength;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: res.headers, body: Buffer.concat(chunks), cut }));
      res.on('error', (err) => (cut ? undefined : reject(err)));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const SKIPPED_ELEMENTS = new Set(['script', 'style', 'noscript', 'template', 'svg']);
const BLOCK_ELEMENTS = new Set(['br', 'p', 'div', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'li', 'tr', 'section', 'article', 'hr', 'ul', 'ol', 'table', 'pre', 'blockquote', 'header', 'footer', 'main', 'nav', 'title']);
const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/**
 * Rough text of an HTML page: scripts, styles and tags dropped, block ends as line breaks,
 * entities decoded, blank runs collapsed. One pass with indexOf (no backtracking regex over the
 * page: a hostile page must not be able to stall the worker).
 */
export function htmlToText(html: string): string {
  // ASCII-only, so indexes stay those of `html` (full Unicode lowercasing can change lengths).
  const lower = html.replace(/[A-Z]+/g, (m) => m.toLowerCase());
  const out: string[] = [];
  const n = html.length;
  let i = 0;
  while (i < n) {
    const lt = html.indexOf('<', i);
    if (lt < 0) {
      out.push(html.slice(i));
      break;
    }
    out.push(html.slice(i, lt));
    if (html.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      i = end < 0 ? n : end + 3;
      out.push(' ');
      continue;
    }
    const gt = html.indexOf('>', lt + 1);
    if (gt < 0) {
      out.push(html.slice(lt));
      break;
    }
    const name = /^\/?([a-zA-Z][a-zA-Z0-9-]*)/.exec(html.slice(lt + 1, Math.min(gt, lt + 64)));
    if (!name) {
      out.push(html.slice(lt, gt + 1));
      i = gt + 1;
      continue;
    }
    const tag = (name[1] as string).toLowerCase();
    const closing = html[lt + 1] === '/';
    if (!closing && SKIPPED_ELEMENTS.has(tag) && html[gt - 1] !== '/') {
      const close = lower.indexOf(`</${tag}`, gt + 1);
      const end = close < 0 ? -1 : html.indexOf('>', close);
      i = end < 0 ? n : end + 1;
      out.push(' ');
      continue;
    }
    out.push(BLOCK_ELEMENTS.has(tag) ? (tag === 'li' && !closing ? '\n- ' : '\n') : ' ');
    i = gt + 1;
  }
  return out
    .join('')
    .replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|[a-z]{2,8});/gi, (all, e: string) => {
      if (e[0] === '#') {
        const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
        return Number.isFinite(code) && code > 0 && code < 0x110000 ? String.fromCodePoint(code) : all;
      }
      return ENTITIES[e.toLowerCase()] ?? all;
    })
    .replace(/[ \t\f\v\r]+/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{2,}/g, '\n')
    .trim();
}

export const httpFetchTool: BuiltinTool = {
  ...httpFetchSpec,
  async run(raw, ctx) {
    const args = checkArgs<Args>('http_fetch', Parameters, raw);
    const cfg = checkConfig<Config>('http_fetch', Config, ctx.config);
    const policy: AddressPolicy = { allowPrivateNetworks: cfg.allowPrivateNetworks ?? false, allowHosts: cfg.allowHosts ?? [] };
    let method = args.method ?? 'GET';
    let body = args.body;
    if (body !== undefined && (method === 'GET' || method === 'HEAD')) throw new ToolError(`body: a ${method} request has no body`);
    const headers: Record<string, string> = { 'user-agent': 'Agentry-http_fetch/1', accept: '*/*' };
    for (const [name, value] of Object.entries(args.headers ?? {})) {
      if (FORBIDDEN_HEADERS.has(name.toLowerCase())) throw new ToolError(`headers: "${name}" may not be set`);
      headers[name.toLowerCase()] = value;
    }
    headers['accept-encoding'] = 'identity';

    const timeoutMs = (cfg.timeout ?? 30) * 1000;
    const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]);
    const maxRedirects = cfg.maxRedirects ?? 5;
    let url: URL;
    let res: Fetched;
    try {
      url = await assertPublicAddress(args.url, policy);
      for (let hop = 0; ; hop++) {
        res = await fetchOnce(url, method, headers, body, policy, signal, cfg.maxResponseBytes ?? 1024 * 1024);
        const location = res.headers.location;
        if (![301, 302, 303, 307, 308].includes(res.status) || !location) break;
        if (hop >= maxRedirects) throw new ToolError(`stopped after ${plural(maxRedirects, 'redirect')} (last: ${url.href} -> ${location})`);
        const next = await assertPublicAddress(new URL(location, url), policy);
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
          method = method === 'HEAD' ? 'HEAD' : 'GET';
          body = undefined;
        }
        if (next.origin !== url.origin) {
          delete headers.authorization;
          delete headers.cookie;
        }
        url = next;
      }
    } catch (err) {
      if (err instanceof ToolError) throw err;
      if (err instanceof AddressNotAllowedError) throw new ToolError(`http_fetch refused: ${err.message}`);
      if (ctx.signal.aborted) throw err;
      if (signal.aborted) throw new ToolError(`http_fetch timed out after ${timeoutMs / 1000} s (${args.url})`);
      const e = err as NodeJS.ErrnoException;
      throw new ToolError(`http_fetch failed: ${e.code ? `${e.code} ` : ''}${e.message}`);
    }

    const type = String(res.headers['content-type'] ?? '');
    const lines = [`HTTP ${res.status} ${res.statusText}`.trimEnd(), `url: ${url.href}`];
    if (type) lines.push(`content-type: ${type}`);
    if (method === 'HEAD' || res.body.byteLength === 0) return `${lines.join('\n')}\n\n(empty body)`;
    if (isBinary(res.body) && !/^text\/|json|xml|javascript/i.test(type)) {
      return `${lines.join('\n')}\n\n[binary body: ${plural(res.body.byteLength, 'byte')}${res.cut ? ' read (cut)' : ''}; not shown]`;
    }
    let text = res.body.toString('utf8');
    if (/html/i.test(type) && !args.raw) text = htmlToText(text);
    const maxChars = cfg.maxOutputChars ?? 100_000;
    const notes: string[] = [];
    if (res.cut) notes.push(`the body was cut after ${cfg.maxResponseBytes ?? 1024 * 1024} bytes`);
    if (text.length > maxChars) {
      notes.push(`${text.length - maxChars} more characters not shown`);
      text = text.slice(0, maxChars);
    }
    return `${lines.join('\n')}\n\n${text}${notes.length > 0 ? `\n[... truncated: ${notes.join('; ')}]` : ''}`;
  },
};
