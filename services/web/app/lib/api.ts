import type { AuthStatus } from './types';

/** The gateway's API, same origin: every request of the UI goes through here (or streamChat). */
export const API = '/api/v1';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'agentry.token';

interface StoredToken {
  token: string;
  expireAt: string;
}

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
  current = value;
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, JSON.stringify(value));
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage refused (private mode): memory only
  }
}

/** Called on any 401 of an authenticated request: the app drops the token and shows the login. */
export function setUnauthorizedHandler(fn: (() => void) | null): void {
  onUnauthorized = fn;
}

export function authHeaders(): Record<string, string> {
  const token = getToken();
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** `?a=1&b=x` from the defined values, or ''. */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const entries = Object.entries(params).filter((e): e is [string, string | number | boolean] => e[1] !== undefined && e[1] !== null && e[1] !== '');
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}` : '';
}

export async function errorOf(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = (await res.json()) as { error?: unknown };
    if (typeof body.error === 'string') message = body.error;
  } catch {
    // not JSON
  }
  return new ApiError(res.status, message);
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** A 401 is the caller's answer (the login form), not a reason to log out. */
  noRedirect?: boolean;
  headers?: Record<string, string>;
}

/** A raw response of the API (after the 401 check); throws ApiError on a non-2xx status. */
export async function apiFetch(path: string, init: RequestInit & RequestOptions = {}): Promise<Response> {
  const { noRedirect, headers, ...rest } = init;
  const res = await fetch(`${API}${path}`, { ...rest, headers: { ...authHeaders(), ...headers } });
  if (res.status === 401 && !noRedirect) {
    setToken(null);
    onUnauthorized?.();
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

async function request<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
  const isForm = body instanceof FormData;
  const res = await apiFetch(path, {
    method,
    ...opts,
    headers: { accept: 'application/json', ...(body !== undefined && !isForm ? { 'content-type': 'application/json' } : {}), ...opts.headers },
    ...(body !== undefined ? { body: isForm ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const api = {
  get: <T>(path: string, opts?: RequestOptions) => request<T>('GET', path, undefined, opts),
  post: <T>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('POST', path, body, opts),
  put: <T>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('PUT', path, body, opts),
  patch: <T>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('PATCH', path, body, opts),
  delete: <T>(path: string, opts?: RequestOptions) => request<T>('DELETE', path, undefined, opts),
};

export async function login(username: string, password: string): Promise<void> {
  const answer = await api.post<StoredToken>('/auth/login', { username, password }, { noRedirect: true });
  setToken(answer);
}

export function authStatus(): Promise<AuthStatus> {
  return api.get<AuthStatus>('/auth/status', { noRedirect: true });
}

/** Text of any error, for showing inline. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Saves a response body as a file (downloads need the Authorization header, so no plain link). */
export async function downloadFile(path: string, fallbackName: string): Promise<void> {
  const res = await apiFetch(path);
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
