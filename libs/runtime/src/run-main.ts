import { isAppError } from '@agentry/errors';
import type { Lifecycle } from './lifecycle.js';

/**
 * What every `main.ts` does around its service: start it, turn a start-up failure into ONE
 * line on stderr and exit 1 (the stack only with `debug`, never for configuration problems), and on SIGTERM or
 * SIGINT shut down within the deadline, exiting 1 if that deadline was missed; an uncaught error
 * is logged and shuts down the same way, exiting 1. Only mains call
 * this: it is the one place that touches process signals and exit codes.
 */
export async function runMain(
  name: string,
  start: () => Promise<{ lifecycle: Lifecycle }>,
  opts: { debug?: boolean } = {},
): Promise<void> {
  let lifecycle: Lifecycle;
  try {
    ({ lifecycle } = await start());
  } catch (err) {
    const message = isAppError(err) ? err.message : err instanceof Error ? `${err.message}` : String(err);
    process.stderr.write(`agentry ${name}: ${message}\n`);
    if (!isAppError(err) && opts.debug && err instanceof Error) process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  }
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      process.stderr.write(`agentry ${name}: second ${signal}, exiting now\n`);
      process.exit(1);
    }
    void lifecycle.shutdown(signal).then((clean) => process.exit(clean ? 0 : 1));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // An error thrown from a callback (a driver's, a timer's) has no caller left to handle it.
  // Node's default prints it and exits at once, mid-write; instead it is logged as one line and
  // the process leaves through the lifecycle (consumers stop, jobs go back), exiting 1 so that
  // the orchestrator restarts it and says why.
  let fatal = false;
  const onFatal = (kind: string) => (err: unknown) => {
    const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
    process.stderr.write(`agentry ${name}: ${kind}, shutting down: ${text}\n`);
    if (fatal) return;
    fatal = true;
    void lifecycle.shutdown(kind).finally(() => process.exit(1));
  };
  process.on('uncaughtException', onFatal('uncaught exception'));
  process.on('unhandledRejection', onFatal('unhandled promise rejection'));
}
