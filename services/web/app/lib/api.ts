import { AgentryClient, ApiError, type LoginResult, type Page } from '@agentry/client';

export { ApiError };

const TOKEN_KEY = 'agentry.token';

type StoredToken = Pick<LoginResult, 'token' | 'expireAt'>;

/** The JWT: in memory, and in sessionStorage so that a reload of this tab keeps the login. */
let current: StoredToken | null = readStored();
let onUnauthorized: (() => void) | null = null;

function readStored(): StoredToken | null {
  try {
    const raw = sessionStorage.getItem(TOKEN_KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as StoredToken;
    return typeof parsed.token === 'string' && Date.parse(parsed.expireAt) > Date.now() ? parsed : null;
  } catch {
    return null;
  }
}

export function getToken(): string | null {
  if (current && Date.parse(current.expireAt) <= Date.now()) setToken(null);
  return current?.token ?? null;
}

export function setToken(value: StoredToken | null): void {
  current = value ? { token: value.token, expireAt: value.expireAt } : null;
  try {
    if (current) sessionStorage.setItem(TOKEN_KEY, JSON.stringify(current));
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage refused (private mode): memory only
  }
}

/** Called on any 401 of an authenticated request: the app drops the token and shows the login. */
export function setUnauthorizedHandler(fn: (() => void) | null): void {
  onUnauthorized = fn;
}

/**
 * Every request of the UI goes through this client: the gateway at this page's origin, the JWT
 * of this tab's login on each request. A 401 logs out and opens the login form; a `public`
 * request's 401 (a wrong password at login) is the form's own answer, not a reason to log out.
 */
export const client = new AgentryClient({
  url: window.location.origin,
  token: () => getToken() ?? undefined,
  onWarning: (text) => void warnings.push(text),
  onUnauthorized: (purpose) => {
    if (purpose !== 'public') {
      setToken(null);
      onUnauthorized?.();
    }
    return Promise.resolve(undefined);
  },
});

/** `Warning` headers of answers not yet taken (a chain saved with fields its node types do not name). */
const warnings: string[] = [];

/** The warnings answered since the last call (`Warning` headers, newest last), and forgets them. */
export function takeWarnings(): string[] {
  return warnings.splice(0);
}

/** `?a=1&b=x` from the defined values, or '' (an empty value is left out, not sent as `a=`). */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const entries = Object.entries(params).filter((e): e is [string, string | number | boolean] => e[1] !== undefined && e[1] !== null && e[1] !== '');
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}` : '';
}

function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const payload = body === undefined ? {} : body instanceof FormData ? { form: body } : { json: body };
  return client.http.request<T>(method, path, payload);
}

/** Routes by path under `/api/v1` (the pages build their paths and queries with `qs`). */
export const api = {
  get: <T>(path: string) => request<T>('GET', path),
  post: <T>(path: string, body?: unknown) => request<T>('POST', path, body),
  put: <T>(path: string, body?: unknown) => request<T>('PUT', path, body),
  patch: <T>(path: string, body?: unknown) => request<T>('PATCH', path, body),
  delete: <T>(path: string) => request<T>('DELETE', path),
};

export async function login(username: string, password: string): Promise<void> {
  setToken(await client.auth.login(username, password));
}

/** Text of any error, for showing inline. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Saves a response body as a file (downloads need the Authorization header, so no plain link). */
export async function downloadFile(path: string, fallbackName: string): Promise<void> {
  const res = await client.http.send('GET', path);
  const disposition = res.headers.get('content-disposition') ?? '';
  const m = /filename\*=UTF-8''([^;]+)|filename="([^"]+)"/i.exec(disposition);
  const name = m ? decodeURIComponent(m[1] ?? m[2] ?? fallbackName) : fallbackName;
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * Every item of a paged list (`{data, total, page, size}`), fetched 100 at a time: the pages
 * show whole lists and filter them in the browser.
 */
export async function fetchAll<T>(path: string, params: Record<string, string | number | boolean | undefined> = {}): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; ; page++) {
    const p = await api.get<Page<T>>(`${path}${qs({ ...params, page, size: 100 })}`);
    out.push(...p.data);
    if (p.data.length === 0 || out.length >= p.total) return out;
  }
}
