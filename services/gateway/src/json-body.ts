import type { FastifyInstance } from 'fastify';
import { Errors } from '@agentry/errors';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes no body: an empty JSON one (as OpenAI's Python SDK sends) is none. */
    bodyless?: true;
  }
}

/**
 * Deepest nesting of arrays and objects a JSON body may have. Real bodies stay far below it
 * (an agent DSL is under 10 levels); far deeper ones (10,000 levels parse fine) later blow the
 * stack of whatever walks them recursively: JSON.stringify on the way to the database, schema
 * checks, the database's own parser.
 */
export const MAX_JSON_DEPTH = 64;

/** The nesting depth of a JSON text, counting brackets outside strings; stops past `limit`. */
export function jsonDepth(text: string, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i += 1; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth += 1;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x5d || c === 0x7d) depth -= 1;
  }
  return max;
}

/**
 * fastify's JSON parser (prototype-poisoning checks included), behind a depth check: a body
 * nested deeper than MAX_JSON_DEPTH is a 400 before it is parsed.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    // The Python SDK sends `content-type: application/json` with an empty body on DELETE and
    // bodyless POSTs (responses.delete, responses.cancel): nothing to parse on a DELETE or on a
    // route that says it takes no body. Any other (PUT /config reads its body by hand) still
    // answers "the body is empty".
    if (text === '' && (req.method === 'DELETE' || req.routeOptions.config.bodyless === true)) {
      done(null, undefined);
      return;
    }
    if (jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
      done(new Errors.VALIDATION(`the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`), undefined);
      return;
    }
    parse(req, text, done);
  });
}
