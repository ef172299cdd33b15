// Main file of `npm run migrate`: the only file in @agentry/db that reads process.env.
import { runMigrateCommand } from './migrate-command.js';

process.exitCode = await runMigrateCommand(
  process.argv.slice(2),
  { databaseUrl: process.env.DATABASE_URL || undefined },
  {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  },
);
