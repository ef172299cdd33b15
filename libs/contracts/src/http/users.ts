import Type, { type Static } from 'typebox';
import { Closed, IsoDate } from './common.js';
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

// Requests.

export const UserParams = Type.Object({ name: Type.String({ maxLength: 128 }) });
export type UserParams = Static<typeof UserParams>;
// Role and name are checked by the route, so that the 400 says what a name or role may be.
export const UserCreateBody = Type.Object(
  {
    username: Type.String({ maxLength: 1024, description: 'letters, digits, ".", "_" and "-"; 1-64 characters, starting with a letter or digit' }),
    password: Type.String({ maxLength: 4096 }),
    role: Type.String({ maxLength: 64, description: '"admin" or "user"' }),
  },
  Closed,
);
export type UserCreateBody = Static<typeof UserCreateBody>;
export const UserUpdateBody = Type.Object(
  {
    role: Type.Optional(Type.String({ maxLength: 64, description: '"admin" or "user"' })),
    disabled: Type.Optional(Type.Boolean()),
    password: Type.Optional(Type.String({ maxLength: 4096, description: 'a new password; every JWT of the user stops working' })),
    budget: Type.Optional(Type.Union([Budget, Type.Null()], { description: 'what the user may spend on chat; null removes it' })),
  },
  Closed,
);
export type UserUpdateBody = Static<typeof UserUpdateBody>;
