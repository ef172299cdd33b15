import type { Logger as PinoLogger } from 'pino';

/** The slice of a pino logger this package uses, so callers may pass a child or a stub. */
export type DbLogger = Pick<PinoLogger, 'debug' | 'info' | 'warn' | 'error'>;
