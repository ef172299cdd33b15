import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, Errors, isAppError } from '@agentry/errors';
import { isDatabaseUnavailable, isForeignKeyViolation } from '@agentry/db';
import type { ErrorBody, OpenAIErrorBody } from '@agentry/contracts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `openai`: the route answers errors in OpenAI's shape (see errorAnswer); otherwise `{error}`. */
    errors?: 'openai';
  }
}

/** OpenAI's `type` for a status, as its API and SDKs name them. */
function openAiType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** OpenAI's `code` for our error: its names where it has one for the case, else ours in its casing. */
function openAiCode(err: AppError): string {
  if (err.status === 401) return 'invalid_api_key';
  if (err.status === 429) return 'rate_limit_exceeded';
  return err.code.toLowerCase();
}

/** The field a validation error names (`body.messages.0.role: ...` -> `messages`), for OpenAI's `param`. */
function paramOf(err: AppError): string | null {
  if (err.status !== 400) return null;
  return /^[^:]+: body\.([A-Za-z_][A-Za-z0-9_]*)/.exec(err.message)?.[1] ?? null;
}

/**
 * The body (and headers) of an error answer: `{error: message}`, or on the OpenAI-compatible
 * routes OpenAI's `{error: {message, type, param, code}}` with the same message. `Retry-After` on
 * every 429 and 503 (a limit that knows its wait has set it already); `x-should-retry: false` on
 * a run's failure of 5xx: the worker has already retried the provider, and an OpenAI SDK would
 * otherwise run the whole agent twice more.
 */
export function errorAnswer(req: FastifyRequest, reply: FastifyReply, err: AppError, message: string): ErrorBody | OpenAIErrorBody {
  if ((err.status === 429 || err.status === 503) && !reply.hasHeader('retry-after')) reply.header('retry-after', '1');
  if (err.code === 'RUN_FAILED' && err.status >= 500) reply.header('x-should-retry', 'false');
  if (req.routeOptions.config?.errors !== 'openai') return { error: message };
  return { error: { message, type: openAiType(err.status), param: paramOf(err), code: openAiCode(err) } };
}

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message: string;
  validation?: Array<{ instancePath?: string; message?: string; params?: Record<string, unknown> }>;
  validationContext?: string;
}

/**
 * Maps anything thrown inside a request to an AppError from the registry: our own errors as
 * they are, fastify's client errors to the matching entry, an unreachable database to NOT_READY,
 * everything else to INTERNAL (whose message never carries the original text, which may hold
 * internals).
 */
export function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const e = (err ?? {}) as FastifyLikeError;
  if (e.validation) {
    const ctx = e.validationContext ?? 'body';
    const details = e.validation.map((v) => {
      const extra = v.params?.additionalProperty ?? (v.params?.additionalProperties as string[] | undefined)?.join(', ');
      const where = `${ctx}${(v.instancePath ?? '').replace(/\//g, '.')}`;
      return extra ? `${where}: unknown field ${extra}` : `${where}: ${v.message ?? 'invalid'}`;
    });
    return new Errors.VALIDATION(details.join('; '));
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Errors.PAYLOAD_TOO_LARGE();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Errors.UNSUPPORTED_MEDIA_TYPE(e.message.replace(/^Unsupported Media Type: ?/, '') || undefined);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new Errors.INVALID_JSON('the body is empty');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Errors.INVALID_JSON();
    case 'FST_ERR_BAD_URL':
      return new Errors.BAD_REQUEST('the URL is not valid (a malformed percent-encoding)');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new Errors.URI_TOO_LONG('a path segment is longer than 100 characters');
    default:
      break;
  }
  const refused = databaseRefusal(err);
  if (refused) return refused;
  if (err instanceof SyntaxError && e.statusCode === 400) return new Errors.INVALID_JSON();
  // A database restart or failover: the client may retry (503), it is no server bug (500).
  if (isDatabaseUnavailable(err)) return new Errors.NOT_READY('the database is unavailable; try again shortly', { cause: err });
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.statusCode === 413) return new Errors.PAYLOAD_TOO_LARGE();
    if (e.statusCode === 415) return new Errors.UNSUPPORTED_MEDIA_TYPE();
    return new AppError('BAD_REQUEST', e.statusCode, e.message);
  }
  return new Errors.INTERNAL(undefined, { cause: err });
}

/**
 * Postgres (and PGlite) refusing a value the client sent: every query is parameterised, so a
 * data exception (SQLSTATE class 22: a NUL character, invalid UTF-8, a number out of range), a
 * check constraint or a value nested too deeply for the server's stack is bad input, a 400,
 * not a server failure; a foreign key whose target a concurrent request deleted is a 404. The
 * database's own text stays in the log (it may quote the value).
 */
function databaseRefusal(err: unknown): AppError | undefined {
  const e = err as { code?: unknown; severity?: unknown } | null;
  if (!e || typeof e.code !== 'string' || typeof e.severity !== 'string' || !/^[0-9A-Z]{5}$/.test(e.code)) return undefined;
  const code = e.code;
  const options = { cause: err };
  if (code === '22021' || code === '22P05') return new Errors.VALIDATION('text may not contain NUL (\\u0000) characters or invalid UTF-8', options);
  if (code === '22003') return new Errors.VALIDATION('a number is out of range', options);
  if (code === '22001') return new Errors.VALIDATION('a value is too long', options);
  if (code === '54001') return new Errors.VALIDATION('a value is nested too deeply', options);
  if (code === '23514') return new Errors.VALIDATION('a value is not allowed here', options);
  // Checked to exist, then gone before the write: deleted by a concurrent request.
  if (isForeignKeyViolation(err)) return new Errors.NOT_FOUND('a resource this request refers to (it was deleted meanwhile)', options);
  if (code.startsWith('22')) return new Errors.VALIDATION('a value cannot be stored', options);
  return undefined;
}

/**
 * fastify's `frameworkErrors`: what its router refuses before any route or error handler runs
 * (a malformed percent-encoding, an over-long path parameter). Its own answer would carry
 * `code`, `message` and `statusCode` beside `error`; ours is `{error}` like every other.
 */
export function sendFrameworkError(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const appErr = toAppError(err);
  req.log.info({ code: appErr.code, msg: appErr.message }, 'request rejected');
  reply.header('x-request-id', req.id);
  void reply.status(appErr.status).send(errorAnswer(req, reply, appErr, appErr.message));
}

/**
 * The HTTP server's `clientError`: a request Node's parser refused (headers too large, a broken
 * request line) or one that timed out. There is no request to reply to, so the answer is written
 * on the socket, as `{error}`, and the connection closed.
 */
export function onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const appErr =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new Errors.REQUEST_TIMEOUT()
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new Errors.HEADERS_TOO_LARGE()
        : new Errors.BAD_REQUEST('the HTTP request could not be parsed');
  const body = JSON.stringify({ error: appErr.message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${appErr.status} ${STATUS_CODES[appErr.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
