import { AppError, Errors, isAppError } from '@agentry/errors';

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message: string;
  validation?: Array<{ instancePath?: string; message?: string; params?: Record<string, unknown> }>;
  validationContext?: string;
}

/**
 * Maps anything thrown inside a request to an AppError from the registry: our own errors as
 * they are, fastify's client errors to the matching entry, everything else to INTERNAL (whose
 * message never carries the original text, which may hold internals).
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
    default:
      break;
  }
  if (err instanceof SyntaxError && e.statusCode === 400) return new Errors.INVALID_JSON();
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.statusCode === 413) return new Errors.PAYLOAD_TOO_LARGE();
    if (e.statusCode === 415) return new Errors.UNSUPPORTED_MEDIA_TYPE();
    return new AppError('BAD_REQUEST', e.statusCode, e.message);
  }
  return new Errors.INTERNAL(undefined, { cause: err });
}
