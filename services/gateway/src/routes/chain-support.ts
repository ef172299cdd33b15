import type { FastifyReply } from 'fastify';
import type { ReloadResult } from '@agentry/contracts';
import { Errors } from '@agentry/errors';
import { validateRuleChain, type ChainCache, type FieldValidation, type LoadResult, type RuleChainDsl, type StoredChain } from '@agentry/definitions';
import type { RuleChainRow } from '@agentry/db';

/** What the agent and rule routes share: this replica's chain cache and change notification. */
export interface ChainRoutes {
  cache: ChainCache;
  /** After a commit: drop the chains here and tell every other replica to. */
  changed(ids: readonly string[]): Promise<void>;
  /** Drops a chain on every replica, then loads it again here: what reload answers. */
  reload(row: RuleChainRow): Promise<LoadResult>;
}

export function storedChain(row: RuleChainRow): StoredChain {
  return { id: row.id, dsl: row.dsl, version: row.updatedAt.getTime(), isAgent: row.kind === 'agent' };
}

/**
 * 400 listing every problem of a DSL (each naming its node or connection); else the warnings of
 * `fieldValidation` (default `Warn`), which the caller sends with `sendWarnings`. A chain saved
 * by the server itself (the heartbeat route) passes `Ignore`: its stored fields were reported
 * when they were written.
 */
export function checkChain(dsl: unknown, isAgent: boolean, fieldValidation: FieldValidation = 'Warn'): string[] {
  const result = validateRuleChain(dsl, { requireAgent: isAgent, fieldValidation });
  if (!result.ok) throw new Errors.VALIDATION(result.errors.join('; '));
  return result.warnings;
}

/** `checkChain` for a DSL the server itself rewrote (unknown fields were reported when written). */
export function assertValidChain(dsl: unknown, isAgent: boolean): asserts dsl is RuleChainDsl {
  checkChain(dsl, isAgent, 'Ignore');
}

/** Most `Warning` headers one answer carries; the rest are counted in a last one. */
export const MAX_WARNING_HEADERS = 20;
/** Longest warn-text of one header (a node id and a field name are user input of any length). */
const MAX_WARNING_TEXT = 300;

/**
 * The warnings as RFC 7234 `Warning` headers, as Kubernetes sends them: `299 - "text"`, one per
 * warning. The text is a quoted-string: `\` and `"` escaped; a character outside printable ASCII
 * becomes `?` (header values are bytes, and a JSON list of the answer keeps the exact text).
 * Bounded, so that a chain with thousands of unknown fields cannot make the answer's headers
 * larger than clients accept (16 KiB in Node's).
 */
export function warningHeaders(warnings: readonly string[]): string[] {
  const quote = (text: string) => {
    const short = text.length > MAX_WARNING_TEXT ? `${text.slice(0, MAX_WARNING_TEXT - 3)}...` : text;
    return `299 - "${short.replace(/[^\x20-\x7e]/g, '?').replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  };
  const shown = warnings.length > MAX_WARNING_HEADERS ? warnings.slice(0, MAX_WARNING_HEADERS - 1) : warnings;
  const headers = shown.map(quote);
  if (shown.length < warnings.length) headers.push(quote(`and ${warnings.length - shown.length} more warnings (the reload answer lists them all)`));
  return headers;
}

/** Adds the warnings to the answer as `Warning` headers (none when there are none). */
export function sendWarnings(reply: FastifyReply, warnings: readonly string[]): void {
  if (warnings.length > 0) void reply.header('warning', warningHeaders(warnings));
}

/**
 * `{success: true}` (with the chain's `warnings`, its unknown node-configuration fields, when it
 * has some), or `{success: false, message}` when the chain fails to load.
 */
export function reloadAnswer(result: LoadResult): ReloadResult {
  if (!result.ok) return { success: false, message: result.error };
  return result.warnings ? { success: true, warnings: result.warnings } : { success: true };
}

/** The DSL of a PUT: the path's id wins; a different id in the body is a 400. */
export function withPathId(body: { ruleChain: { id?: string } & Record<string, unknown>; metadata: unknown }, id: string): RuleChainDsl {
  if (body.ruleChain.id !== undefined && body.ruleChain.id !== id) {
    throw new Errors.VALIDATION(`ruleChain.id "${body.ruleChain.id}" does not match the id in the path ("${id}")`);
  }
  const ruleChain = body.ruleChain.id === undefined ? { id, ...body.ruleChain } : body.ruleChain;
  return { ...body, ruleChain } as RuleChainDsl;
}

/**
 * The serializer of every route answering a DSL (or part of one): plain JSON.stringify. A chain
 * is answered exactly as it was written, key order included (editors and `git diff` of exported
 * chains rely on it), and a schema-driven serializer writes the declared keys first. The route's
 * response schema still documents the answer and types its handler; the DSL's schemas are open at
 * every level, so serializing with them would send the same keys, only reordered.
 */
export function serializeAsWritten(): (data: unknown) => string {
  return (data) => JSON.stringify(data);
}
