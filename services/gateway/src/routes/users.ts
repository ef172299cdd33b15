import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';
import { deleteUser, getUser, inTransaction, insertUser, listUsers, lockEnabledAdmins, updateUser, type Role, type UserChange, type UserRecord } from '@agentry/db';
import { SuccessBody, User, UserCreateBody, UserList, UserParams, UserUpdateBody, announceChange } from '@agentry/contracts';
import type { GatewayDeps } from '../deps.js';
import type { Auth } from '../auth/auth.js';
import { hashPassword, newPasswordProblem } from '../auth/passwords.js';
import { typed, type TypedReply, type TypedRequest } from './common.js';

/** Names a login form, a URL segment and a log line carry without quoting. */
const USERNAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ROLES: readonly Role[] = ['admin', 'user'];

/** What an admin sees of a user: never a hash or a key, only whether a key exists. */
export function userView(u: UserRecord): User {
  return {
    username: u.username,
    role: u.role,
    disabled: u.disabled,
    hasApiKey: u.apiKeyHash !== null,
    ...(u.budget ? { budget: u.budget } : {}),
    source: u.fileHmac === null ? 'api' : 'file',
    createdAt: u.createdAt.toISOString(),
    updatedAt: u.updatedAt.toISOString(),
  };
}

function checkRole(role: string | undefined): Role | undefined {
  if (role === undefined || (ROLES as readonly string[]).includes(role)) return role as Role | undefined;
  throw new Errors.VALIDATION(`role must be "admin" or "user", not ${JSON.stringify(role.slice(0, 64))}`);
}

function checkPassword(password: string | undefined): void {
  const problem = password === undefined ? undefined : newPasswordProblem('password', password);
  if (problem) throw new Errors.VALIDATION(problem);
}

/**
 * Refuses a change that would leave no enabled admin (nobody could manage the service any more).
 * Runs inside the change's transaction, on locked rows, so two such changes cannot pass at once.
 */
async function keepAnAdmin(trx: Parameters<typeof lockEnabledAdmins>[0], username: string, removesAdmin: boolean): Promise<void> {
  if (!removesAdmin) return;
  const admins = await lockEnabledAdmins(trx);
  if (admins.length === 1 && admins[0] === username) {
    throw new Errors.LAST_ADMIN(`"${username}" is the only enabled admin; give another user the admin role first`);
  }
}

const ListUsers = { response: { 200: UserList } };
const CreateUser = { body: UserCreateBody, response: { 201: User } };
const UpdateUser = { params: UserParams, body: UserUpdateBody, response: { 200: User } };
const DeleteUser = { params: UserParams, response: { 200: SuccessBody } };

/** What every handler here works with. */
interface UserContext {
  deps: GatewayDeps;
  /**
   * This replica at once, the others by the message: a revoked JWT or key stops working
   * everywhere (a lost message is healed by each replica's periodic credential reload).
   */
  announce(): Promise<void>;
}

/** Admin user management: list, create, change (role, disabled, password), delete. */
export function userRoutes(app: FastifyInstance, deps: GatewayDeps, auth: Auth): void {
  const api = typed(app);
  const admin = { access: 'admin' as const };
  const ctx: UserContext = {
    deps,
    announce: async () => {
      await auth.index.reload();
      await announceChange(deps.bus.pubsub, deps.logger, 'users');
    },
  };
  api.get('/users', { config: admin, schema: ListUsers }, listAllUsers(ctx));
  api.post('/users', { config: admin, schema: CreateUser }, createUser(ctx));
  api.put('/users/:name', { config: admin, schema: UpdateUser }, changeUser(ctx));
  api.delete('/users/:name', { config: admin, schema: DeleteUser }, removeUser(ctx));
}

function listAllUsers({ deps }: UserContext) {
  return async function listAllUsers(): Promise<UserList> {
    return { users: (await listUsers(deps.db.db)).map(userView) };
  };
}

function createUser({ deps, announce }: UserContext) {
  return async function createUser(req: TypedRequest<typeof CreateUser>, reply: TypedReply<typeof CreateUser>) {
    const { username, password } = req.body;
    if (!USERNAME.test(username)) {
      throw new Errors.VALIDATION('username must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit');
    }
    const role = checkRole(req.body.role)!;
    checkPassword(password);
    const created = await insertUser(deps.db.db, { username, passwordHash: await hashPassword(password), role });
    if (!created) throw new Errors.CONFLICT(`user "${username}"`);
    await announce();
    req.log.info({ username, role }, 'user created');
    return reply.status(201).send(userView(created));
  };
}

function changeUser({ deps, announce }: UserContext) {
  return async function changeUser(req: TypedRequest<typeof UpdateUser>): Promise<User> {
    const name = req.params.name;
    const { disabled, password, budget } = req.body;
    const role = checkRole(req.body.role);
    if (role === undefined && disabled === undefined && password === undefined && budget === undefined) throw new Errors.VALIDATION('send at least one of role, disabled, password, budget');
    checkPassword(password);
    const change: UserChange = { ...(role ? { role } : {}), ...(disabled !== undefined ? { disabled } : {}), ...(budget !== undefined ? { budget } : {}) };
    if (password !== undefined) change.passwordHash = await hashPassword(password);
    const updated = await inTransaction(deps.db.db, async (trx) => {
      await keepAnAdmin(trx, name, role === 'user' || disabled === true);
      return updateUser(trx, name, change);
    });
    if (!updated) throw new Errors.NOT_FOUND(`user "${name}"`);
    await announce();
    req.log.info({ username: name, changed: Object.keys(req.body) }, 'user changed by an admin');
    return userView(updated);
  };
}

function removeUser({ deps, announce }: UserContext) {
  return async function removeUser(req: TypedRequest<typeof DeleteUser>): Promise<SuccessBody> {
    const name = req.params.name;
    await inTransaction(deps.db.db, async (trx) => {
      const user = await getUser(trx, name);
      if (!user) throw new Errors.NOT_FOUND(`user "${name}"`);
      // The next start would import it again: removing it from the file is what deletes it.
      if (user.fileHmac !== null) {
        throw new Errors.SEEDED_USER(`remove "${name}" from security.users in the configuration file to delete it, or disable it here`);
      }
      await keepAnAdmin(trx, name, user.role === 'admin' && !user.disabled);
      await deleteUser(trx, name);
    });
    await announce();
    req.log.info({ username: name }, 'user deleted');
    return { success: true };
  };
}
