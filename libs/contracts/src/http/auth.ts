import Type, { type Static } from 'typebox';
import { Closed, IsoDate } from './common.js';

/** `POST /auth/login` (spec): a JWT and when it expires. */
export const LoginResult = Type.Object({ token: Type.String(), expireAt: IsoDate });
export type LoginResult = Static<typeof LoginResult>;

/**
 * `GET /auth/status`: whether management needs a login and whose valid JWT was sent (null for
 * none). `defaultPassword` only in an admin's answer: whether admin still has the default password;
 * `chatNeedsKey` only on an open server.
 */
export const AuthStatus = Type.Object({
  requireAuth: Type.Boolean(),
  user: Type.Union([Type.Object({ username: Type.String(), role: Type.String() }), Type.Null()]),
  defaultPassword: Type.Optional(Type.Boolean()),
  /**
   * Open servers only (requireAuth false): whether chat already needs a credential, i.e. some API
   * key exists (an enabled user's own key, or an enabled account's on the enabled `api` platform),
   * exactly the gateway's rule. The web UI warns before the first one turns chat key-only.
   */
  chatNeedsKey: Type.Optional(Type.Boolean()),
});
export type AuthStatus = Static<typeof AuthStatus>;

/** `GET /auth/api-key`: the caller's key, null while it has none. */
export const ApiKeyAnswer = Type.Object({ apiKey: Type.Union([Type.String(), Type.Null()]) });
export type ApiKeyAnswer = Static<typeof ApiKeyAnswer>;

/** `POST /auth/api-key`: the new key (the old one stops working). */
export const ApiKeyRegenerated = Type.Object({ apiKey: Type.String() });
export type ApiKeyRegenerated = Static<typeof ApiKeyRegenerated>;

/** `PUT /auth/password`: every older token is revoked, so a fresh one comes back. */
export const PasswordChanged = Type.Object({ success: Type.Boolean(), message: Type.String(), token: Type.String(), expireAt: IsoDate });
export type PasswordChanged = Static<typeof PasswordChanged>;

// Requests.

export const LoginBody = Type.Object({ username: Type.String({ minLength: 1, maxLength: 128 }), password: Type.String({ minLength: 1, maxLength: 1024 }) }, Closed);
export type LoginBody = Static<typeof LoginBody>;
// No length floor here: the route says what a new password needs, in words.
export const PasswordChangeBody = Type.Object({ oldPassword: Type.String({ maxLength: 1024 }), newPassword: Type.String({ maxLength: 1024 }) }, Closed);
export type PasswordChangeBody = Static<typeof PasswordChangeBody>;
