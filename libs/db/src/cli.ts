// Main file of `npm run migrate`: the only file in @agentry/db that reads process.env.
import { isAppError } from '@agentry/errors';
import { withFileSecrets } from './env-files.js';
import { runMigrateCommand } from './migrate-command.js';

let env: Record<string, string | undefined>;
try {
  // DATABASE_URL_FILE / DATABASE_PASSWORD_FILE, as every service reads them (compose secrets).
  env = withFileSecrets(process.env);
} catch (err) {
  process.stderr.write(`migrate failed: ${isAppError(err) ? err.message : String(err)}\n`);
  process.exit(1);
}
process.exitCode = await runMigrateCommand(
  process.argv.slice(2),
  { databaseUrl: env.DATABASE_URL || undefined },
  {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  },
);
