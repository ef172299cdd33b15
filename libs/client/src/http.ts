import { ApiError, ConnectionError } from './errors.js';

/**
 * What a request is for, which decides the credential it carries: `chat` (chat completions
 * and `/models`: an API key or a JWT), `management` (every other `/api/v1` route: a JWT when
 * the server requires authentication), `account` (the caller's API key and password: always a
 * JWT), `public` (login, health: nothing).
 */
export type Purpose = 'chat' | 'management' | 'account' | 'public';

/** The bearer token for a purpose, or undefined to send none. */
export type TokenSource = string | ((purpose: Purpose) => string | undefined | Promise<string | undefined>);

export interface ClientOptions {
  /** The server address (`http://localhost:9527`); a trailing `/api/v1` is accepted and dropped. */
  url: string;
  token?: TokenSource;
  /**
   * Called when a request that carried a token was refused with 401: answer a fresh token to
   * retry once with, or undefined to give up (the 401 is then thrown).
   */
  onUnauthorized?: (purpose: Purpose, error: ApiError, token: string) => Promise<string | undefined>;
  /** Replaces the global fetch (tests). */
  fetch?: typeof globalThis.fetch;
  /** Extra headers on every request (for instance a user agent). */
  headers?: Record<string, string>;
  /**
   * Called with the text of each `Warning` header of an answer (as Kubernetes' client does): a
   * chain saved with unknown node-configuration fields under `fieldValidation=Warn`.
   */
  onWarning?: (text: string) => void;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  purpose?: Purpose;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as multipart/form-data. */
  form?: FormData;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Resolve `url` against the server root instead of `/api/v1`. */
  root?: boolean;
}

/** The server root without a trailing slash or `/api/v1`. */
export function normaliseUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`"${url}" is not a URL (expected something like http://localhost:9527)`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`"${url}" is not an http(s) URL`);
  const path = u.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
  return `${u.origin}${path}`;
}

/** Why fetch failed, in words: the cause's code when undici gives one. */
function describeFetchFailure(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } } | null)?.cause;
  if (cause?.code === 'ECONNREFUSED') return 'connection refused';
  if (cause?.code === 'ENOTFOUND') return 'host not found';
  if (cause?.code) return cause.message ? `${cause.code}: ${cause.message}` : cause.code;
  return cause?.message ?? (err as Error).message ?? String(err);
}

/** The transport under the typed client: fetch, credentials, one retry after a 401, errors. */
export class Http {
  readonly root: string;
  readonly #fetch: typeof globalThis.fetch;

  constructor(private readonly opts: ClientOptions) {
    this.root = normaliseUrl(opts.url);
    // Called through a closure: a browser's fetch refuses any receiver but the window
    // ("Illegal invocation"), and `this.#fetch(...)` would pass this Http.
    const fetch = opts.fetch ?? globalThis.fetch;
    this.#fetch = (input, init) => fetch(input, init);
  }

  url(path: string, query?: Record<string, QueryValue>, root = false): string {
    const u = new URL(`${this.root}${root ? '' : '/api/v1'}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    return u.toString();
  }

  async #token(purpose: Purpose): Promise<string | undefined> {
    if (purpose === 'public') return undefined;
    const t = this.opts.token;
    return typeof t === 'function' ? await t(purpose) : t;
  }

  /** Sends the request; throws ApiError for status >= 400 and ConnectionError when unreachable. */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const purpose = opts.purpose ?? 'management';
    const url = this.url(path, opts.query, opts.root);
    const attempt = async (token: string | undefined): Promise<Response> => {
      const headers: Record<string, string> = { ...this.opts.headers, ...opts.headers };
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | FormData | undefined;
      if (opts.form) body = opts.form;
      else if (opts.json !== undefined) {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(opts.json);
      }
      let res: Response;
      try {
        res = await this.#fetch(url, { method, headers, body, signal: opts.signal });
      } catch (err) {
        if ((err as Error).name === 'AbortError') throw err;
        throw new ConnectionError(this.root, `cannot reach ${this.root} (${describeFetchFailure(err)})`, { cause: err });
      }
      if (res.status < 400) {
        const warning = res.headers.get('warning');
        if (warning && this.opts.onWarning) for (const text of parseWarnings(warning)) this.opts.onWarning(text);
        return res;
      }
      throw await toApiError(res);
    };
    const token = await this.#token(purpose);
    try {
      return await attempt(token);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401 || !this.opts.onUnauthorized) throw err;
      const fresh = await this.opts.onUnauthorized(purpose, err, token ?? '');
      if (fresh === undefined) throw err;
      return attempt(fresh);
    }
  }

  /** Sends the request and parses a JSON answer (text when the answer is not JSON). */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    const text = await res.text();
    if ((res.headers.get('content-type') ?? '').includes('json')) return (text === '' ? undefined : JSON.parse(text)) as T;
    return text as T;
  }
}

/**
 * The warn-texts of `Warning` headers (`299 - "text"`), which fetch joins with ", ": a comma
 * inside a quoted text is not a separator, so the quoted strings are read one by one.
 */
export function parseWarnings(header: string): string[] {
  const out: string[] = [];
  for (const m of header.matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)) out.push(m[1]!.replace(/\\(.)/g, '$1'));
  return out;
}

async function toApiError(res: Response): Promise<ApiError> {
  const requestId = res.headers.get('x-request-id') ?? undefined;
  const text = await res.text().catch(() => '');
  let body: unknown = text;
  let message = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  try {
    body = JSON.parse(text);
    const e = (body as { error?: unknown } | null)?.error;
    if (typeof e === 'string') message = e;
    else if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') message = (e as { message: string }).message;
  } catch {
    if (text.trim() !== '' && text.length < 300) message = `${message}: ${text.trim()}`;
  }
  return new ApiError(res.status, message, body, requestId);
}
