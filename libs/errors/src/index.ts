/**
 * The one registry of errors. Each error is defined once with a code and an HTTP status;
 * callers throw `new Errors.NOT_FOUND('agent "x"')`, and only the gateway's error handler
 * turns an AppError into a response. The message is shown to the client, so it must never
 * contain a secret.
 */
export class AppError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AppError';
    this.code = code;
    this.status = status;
  }
}

export interface AppErrorClass {
  new (detail?: string, options?: { cause?: unknown }): AppError;
  readonly code: string;
  readonly status: number;
}

function define(code: string, status: number, prefix: string): AppErrorClass {
  const cls = class extends AppError {
    static readonly code = code;
    static readonly status = status;
    constructor(detail?: string, options?: { cause?: unknown }) {
      super(code, status, detail ? `${prefix}: ${detail}` : prefix, options);
    }
  };
  Object.defineProperty(cls, 'name', { value: code });
  return cls;
}

export const Errors = {
  BAD_REQUEST: define('BAD_REQUEST', 400, 'Invalid request'),
  VALIDATION: define('VALIDATION', 400, 'Invalid input'),
  INVALID_JSON: define('INVALID_JSON', 400, 'Malformed JSON body'),
  UNAUTHORIZED: define('UNAUTHORIZED', 401, 'Authentication required'),
  FORBIDDEN: define('FORBIDDEN', 403, 'Not allowed'),
  NOT_FOUND: define('NOT_FOUND', 404, 'Not found'),
  ROUTE_NOT_FOUND: define('ROUTE_NOT_FOUND', 404, 'Route not found'),
  METHOD_NOT_ALLOWED: define('METHOD_NOT_ALLOWED', 405, 'Method not allowed'),
  REQUEST_TIMEOUT: define('REQUEST_TIMEOUT', 408, 'Request timeout'),
  CONFLICT: define('CONFLICT', 409, 'Already exists'),
  /** A chain or agent other definitions name: deleting it would leave a reference anyone could fill. */
  IN_USE: define('IN_USE', 409, 'Still in use'),
  QUOTA: define('QUOTA', 409, 'Limit reached'),
  GONE: define('GONE', 410, 'No longer available'),
  LAST_ADMIN: define('LAST_ADMIN', 409, 'At least one enabled admin must remain'),
  SEEDED_USER: define('SEEDED_USER', 409, 'This user comes from the configuration file'),
  PAYLOAD_TOO_LARGE: define('PAYLOAD_TOO_LARGE', 413, 'Request body too large'),
  URI_TOO_LONG: define('URI_TOO_LONG', 414, 'URL too long'),
  UNSUPPORTED_MEDIA_TYPE: define('UNSUPPORTED_MEDIA_TYPE', 415, 'Unsupported content type'),
  RATE_LIMITED: define('RATE_LIMITED', 429, 'Too many requests'),
  HEADERS_TOO_LARGE: define('HEADERS_TOO_LARGE', 431, 'Request headers too large'),
  /** A rule-chain script that cannot work whatever its input: it does not compile, or returns the wrong shape. */
  SCRIPT_INVALID: define('SCRIPT_INVALID', 422, 'The script is invalid'),
  INTERNAL: define('INTERNAL', 500, 'Internal server error'),
  UPSTREAM: define('UPSTREAM', 502, 'Upstream failure'),
  /** A rule-chain script that failed as it ran: threw, timed out, ran out of memory, or the sandbox was busy. */
  SCRIPT_FAILED: define('SCRIPT_FAILED', 502, 'The script failed'),
  NOT_READY: define('NOT_READY', 503, 'Service not ready'),
  /** Start-up configuration problems: reported as one line, never as an HTTP response. */
  CONFIG: define('CONFIG', 500, 'Configuration error'),
} as const;

export type ErrorCode = keyof typeof Errors;

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/** Is this error an instance of the given registry entry (works across module copies too)? */
export function hasCode(err: unknown, cls: AppErrorClass): err is AppError {
  return isAppError(err) && err.code === cls.code;
}
