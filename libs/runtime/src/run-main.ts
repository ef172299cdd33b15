import { isAppError } from '@agentry/errors';
import type { Lifecycle } from './lifecycle.js';

/**
 * What every `main.ts` does around its service: start it, turn a start-up failure into ONE
 * line on stderr and exit 1 (the stack only with `debug`, never for configuration problems), and on SIGTERM or
 * SIGINT shut down within the deadline, exiting 1 if that deadline was missed. Only mains call
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
}
