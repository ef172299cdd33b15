import path from 'node:path';
import type { Runtime } from '@agentry/runtime';
import { DEFAULT_ADMIN_PASSWORD, hasDefaultPassword } from './auth/passwords.js';

const LOOPBACK = ['127.0.0.1', 'localhost', '::1'];

/**
 * The few lines a person starting the service on a terminal needs, instead of the log: where to
 * open the UI, how to log in, and whether the server is open, in one line each. Read after the
 * gateway listens (the seeded users exist by then).
 */
export async function startupBanner(runtime: Pick<Runtime, 'config' | 'db' | 'loaded'>, port: number): Promise<string[]> {
  const { server, security } = runtime.config.current;
  const host = server.host === '0.0.0.0' || server.host === '::' ? 'localhost' : server.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const defaultPassword = await hasDefaultPassword(runtime.db.db);
  const logFile = path.relative(process.cwd(), path.join(runtime.loaded.paths.logsDir, 'agentry.log')) || 'agentry.log';
  const loopback = LOOPBACK.includes(server.host);
  const reach = loopback ? 'from this machine only' : `from anywhere that reaches port ${port}`;

  const login = security.requireAuth
    ? defaultPassword
      ? `Log in:   admin / ${DEFAULT_ADMIN_PASSWORD} (the default password), in the browser or with \`agentry login\``
      : 'Log in:   with a user from security.users, in the browser or with `agentry login`'
    : 'Log in:   not needed (chat and management are open); `agentry login` as admin for your own API key';
  const state = security.requireAuth
    ? defaultPassword
      ? `Security: closed (login required), but admin still has the default password: change it with \`agentry passwd\``
      : `Security: closed: management needs a login, ${reach}`
    : loopback
      ? `Security: open server ${reach}: anyone on it manages agents without a login (security.requireAuth: false)`
      : `Security: OPEN server ${reach}: anyone can manage agents without a login; set security.requireAuth: true`;
  return [`Agentry is ready: open ${url}`, `  ${login}`, `  ${state}`, `  Logs:     ${logFile}; only warnings and errors show here from now on`];
}
