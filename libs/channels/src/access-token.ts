import { PlatformError, type TokenCache } from './adapter.js';

/** The platform turned the access token down (revoked, or expired before it said): a fresh one may fix the call. */
export class TokenRejectedError extends PlatformError {}

/**
 * Runs `call` with the token cached under `key`. A token the platform rejects (the call throws
 * TokenRejectedError) is dropped and the call made once more with a fresh one; a second
 * rejection is reported as is, since another fetch would only repeat it. A failing token fetch
 * is never retried here: its error is about the app's credentials, not a stale token.
 */
export async function withAccessToken<T>(
  tokens: TokenCache,
  key: string,
  fetchToken: () => Promise<{ token: string; expiresInMs: number }>,
  call: (token: string) => Promise<T>,
): Promise<T> {
  const token = await tokens.get(key, fetchToken);
  try {
    return await call(token);
  } catch (err) {
    if (!(err instanceof TokenRejectedError)) throw err;
    tokens.invalidate(key);
  }
  return call(await tokens.get(key, fetchToken));
}
