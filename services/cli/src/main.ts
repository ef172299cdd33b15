import os from 'node:os';
import { run } from './program.js';

/**
 * The `agentry` entry point: the one file that reads process.env, handles signals and exits.
 * bin/agentry.js loads it (through tsx from the sources, or the built dist).
 */
const interruptHandlers: Array<() => void> = [];
process.on('SIGINT', () => {
  const handler = interruptHandlers.at(-1);
  if (handler) handler();
  else process.exit(130);
});
// A closed pipe (`agentry agents list | head -1`) is not an error worth a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

const code = await run(process.argv.slice(2), {
  env: process.env,
  cwd: process.cwd(),
  home: os.homedir(),
  io: { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
  onInterrupt: (handler) => {
    interruptHandlers.push(handler);
    return () => {
      const i = interruptHandlers.lastIndexOf(handler);
      if (i >= 0) interruptHandlers.splice(i, 1);
    };
  },
});
// Let stdout drain (a pipe may still hold the output), then leave without waiting for idle sockets.
process.stdout.write('', () => process.exit(code));
