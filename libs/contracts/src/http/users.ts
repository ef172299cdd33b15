import Type, { type Static } from 'typebox';
import { IsoDate } from './common.js';
import { Budget } from './usage.js';

export const UserRole = Type.Union([Type.Literal('admin'), Type.Literal('user')]);
export type UserRole = Static<typeof UserRole>;

/** A user as an admin sees it: never a password hash or a key, only whether a key exists. */
export const User = Type.Object({
  username: Type.String(),
  role: UserRole,
  disabled: Type.Boolean(),
  hasApiKey: Type.Boolean(),
  /** What the user may spend on chat; absent: no limit. */
  budget: Type.Optional(Budget),
  /** `file`: seeded from `security.users` of the configuration file; `api`: created through the API. */
  source: Type.Union([Type.Literal('file'), Type.Literal('api')]),
  createdAt: IsoDate,
  updatedAt: IsoDate,
});
export type User = Static<typeof User>;

export const UserList = Type.Object({ users: Type.Array(User) });
export type UserList = Static<typeof UserList>;
