import { Errors } from '@agentry/errors';

/**
 * Credentials inside agent and rule-chain definitions (MCP server headers, `restApiCall`
 * headers, tokens in a tool's `config`, URLs that carry a password). The gateway seals them on
 * write and answers the marker in their place on every read; the worker opens them just before
 * a run. One rule decides which values are secret (`isSecretKey`, `isSecretHeader`,
 * `isSecretUrl`), so that the write, read and migration paths can never disagree.
 *
 * The rule, for every string anywhere in a definition (`ruleChain` and `metadata`, any depth):
 * 1. its key, or the key of any object or array it sits in, matches `SECRET_KEY_PATTERN`
 *    (`token`, `secret`, `password`, `api_key`, `authorization`, `cookie`, ...);
 * 2. it is a value of an object named `headers` (MCP servers, `restApiCall`, any node or
 *    tool) that is a credential by its name (rule 1's words, or a name part such as `key`,
 *    `signature`, `sig`, `auth`, `hmac`, `session`, `code`: `Ocp-Apim-Subscription-Key`,
 *    `x-functions-key`, `X-Signature`) or, for a header not among the few that only describe
 *    the request (`Accept`, `Content-Type`, `User-Agent`, `X-Request-Id`, ...: BENIGN_HEADERS),
 *    by the shape of its value with the chain's `vars` filled in (an auth scheme and its token,
 *    `Bearer ...`, or one long opaque token of letters and digits). `X-Tenant: acme` is not;
 *    `X-Custom: 8f3a9c0d2b7e4f1a` is;
 * 3. it is a URL (`scheme://...`) with user info (`https://user:pass@host`) or with a query
 *    parameter shaped like a credential (`?api_key=`, `&access_token=`, `?key=`, `?sig=`,
 *    `?code=`, `X-Amz-Signature`, `?subscription-key=`): the whole URL is then the secret;
 * 4. it is a value of `ruleChain.configuration.vars` that a secret place (1-3) names as
 *    `${vars.<name>}`: the header `Bearer ${vars.token}` makes `vars.token` a secret.
 * Non-string values (`maxTokens: 1000`) are never secret. Empty strings hold nothing to seal.
 */

/** What every read answers in place of a stored secret; sending it back keeps the secret. */
export const SECRET_MARKER = '[secret]';

/**
 * Sealed values are stored as `sealed:<the Sealer's text>`. Clients never see this form, and a
 * value starting with it is refused on write anywhere a secret is not expected (a client must
 * not be able to plant a sealed blob the worker would open).
 */
export const SEALED_PREFIX = 'sealed:';

const SECRET_KEY_PATTERN = /token|secret|password|passwd|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|credential|authorization|cookie/i;
/** Headers that describe the content or the client, never a credential: the only headers left unsealed. */
const BENIGN_HEADERS = new Set([
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'cache-control',
  'content-encoding',
  'content-language',
  'content-type',
  'pragma',
  'user-agent',
  'x-request-id',
  'x-correlation-id',
  'idempotency-key',
  'if-match',
  'if-none-match',
  'origin',
  'referer',
]);
/** A part of a header's name that says it carries a credential (beside SECRET_KEY_PATTERN's words). */
const CREDENTIAL_HEADER_PART = /(^|[-_.])(key|keys|sig|signature|auth|hmac|session|code|otp|jwt|sas|pat)($|[-_.0-9])/i;
/** A value naming an auth scheme before its token: `Bearer x`, `Basic x`, `SharedAccessSignature sr=...`. */
const AUTH_SCHEME_VALUE = /^(bearer|basic|token|digest|bot|hmac|sharedaccesssignature|sharedkey|aws4-hmac-sha256|apikey|key|sso-key)\s+\S/i;
/** Query parameter names that carry credentials although no secret word is in them (Azure `code`, S3 and GCS signatures, SAS `sig`). */
const SECRET_QUERY_NAME = /^(key|code|sig|signature|auth|sas|hmac|hash)$|signature|credential|subscription[-_]?key|[-_.]key$/i;
const VARS_REFERENCE = /\$\{\s*vars\.([A-Za-z0-9_.-]+)\s*\}/g;
const URL_START = /^[a-z][a-z0-9+.-]*:\/\/([^\s/?#]*)/i;

/** The port provider keys are sealed with (`Runtime.secrets`). */
export interface SecretSealer {
  seal(plain: string): string;
  open(sealed: string): string;
}

export function isSecretKey(key: string): boolean {
  return SECRET_KEY_PATTERN.test(key);
}

/**
 * A header that only describes the request (BENIGN_HEADERS) is never a secret; any other is one
 * by its name (a credential word or name part) or by its value's shape (`value`: the text the request
 * will carry, the chain's vars filled in; a sealed value or the marker stays a secret).
 */
export function isSecretHeader(name: string, value?: unknown): boolean {
  const n = name.trim().toLowerCase();
  if (BENIGN_HEADERS.has(n)) return false;
  if (SECRET_KEY_PATTERN.test(n) || CREDENTIAL_HEADER_PART.test(n)) return true;
  return typeof value === 'string' && (value.includes(SEALED_PREFIX) || value.includes(SECRET_MARKER) || isCredentialShaped(value));
}

/** An auth scheme and its token, or one opaque token (16+ characters, letters and digits mixed, no spaces). */
function isCredentialShaped(value: string): boolean {
  const v = value.trim();
  if (AUTH_SCHEME_VALUE.test(v)) return true;
  return v.length >= 16 && /^[A-Za-z0-9+/=_.~:-]+$/.test(v) && /[A-Za-z]/.test(v) && /[0-9]/.test(v);
}

/** The text a header will carry: its `${vars.x}` filled from the chain's vars (a missing one stays as written). */
function withVars(value: unknown, vars: Record<string, unknown>): unknown {
  if (typeof value !== 'string') return value;
  return value.replace(VARS_REFERENCE, (whole, name: string) => (typeof vars[name] === 'string' ? (vars[name] as string) : whole));
}

function varsOf(dsl: unknown): Record<string, unknown> {
  const vars = (dsl as { ruleChain?: { configuration?: { vars?: unknown } } } | null)?.ruleChain?.configuration?.vars;
  return vars !== null && typeof vars === 'object' && !Array.isArray(vars) ? (vars as Record<string, unknown>) : {};
}

/** A URL whose text carries a credential (user info, or a query parameter named like one). */
export function isSecretUrl(value: string): boolean {
  const start = URL_START.exec(value);
  if (!start) return false;
  if (start[1]!.includes('@')) return true;
  const query = value.indexOf('?');
  if (query < 0) return false;
  for (const pair of value.slice(query + 1).split(/[&#]/)) {
    const name = decodeName(pair.split('=')[0] ?? '');
    if (name && (SECRET_KEY_PATTERN.test(name) || SECRET_QUERY_NAME.test(name))) return true;
  }
  return false;
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}

function isSealed(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(SEALED_PREFIX);
}

/** Where a string sits: what the rule needs and a name for it that survives reordering. */
interface Position {
  /** Display path, as validation errors spell it: `metadata.nodes[0].configuration.headers.Authorization`. */
  path: string;
  /**
   * The same place named by identity rather than index (nodes by `id`, tools by `type:name`,
   * header names lower-cased), so that a secret follows its node or tool when the list is
   * reordered between GET and PUT.
   */
  key: string;
  /** The string sits under a key that matches `SECRET_KEY_PATTERN`, or is a secret header. */
  secretByName: boolean;
  /** `key` of the nearest list item it is in (its tool, its node): where its destination is. */
  scope: string;
}

/** What a transform answers for one string: a replacement, or REMOVE to drop the entry. */
const REMOVE = Symbol('remove');
type Visit = (value: string | null, at: Position) => string | null | typeof REMOVE;

/**
 * A copy of `value` with `visit` applied to every string and to every null that sits where a
 * secret would (so that `null` can remove one); everything else is copied as it is.
 */
function transform(value: unknown, visit: Visit): unknown {
  const secretVars = secretVarsOf(value);
  const vars = varsOf(value);
  const walk = (v: unknown, at: Position): unknown => {
    if (typeof v === 'string') return visit(v, at);
    if (v === null) return at.secretByName ? visit(null, at) : null;
    if (typeof v !== 'object') return v;
    if (Array.isArray(v)) {
      const seen = new Map<string, number>();
      const out: unknown[] = [];
      v.forEach((item, i) => {
        const identity = identityOf(item, i);
        const n = seen.get(identity) ?? 0;
        seen.set(identity, n + 1);
        const key = `${at.key}[${identity}${n > 0 ? `#${n}` : ''}]`;
        const r = walk(item, { path: `${at.path}[${i}]`, key, secretByName: at.secretByName, scope: key });
        if (r !== REMOVE) out.push(r);
      });
      return out;
    }
    const isHeaders = /^headers$/i.test(lastSegment(at.path));
    const isVars = at.path === VARS_PATH;
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
      const secretByName = at.secretByName || isSecretKey(k) || (isHeaders && isSecretHeader(k, withVars(item, vars))) || (isVars && secretVars.has(k));
      const r = walk(item, {
        path: at.path ? `${at.path}.${k}` : k,
        key: `${at.key}.${isHeaders ? k.toLowerCase() : k}`,
        secretByName,
        scope: at.scope,
      });
      // A stored `__proto__` key (JSON allows it) must stay a key, not become the prototype.
      if (r !== REMOVE) Object.defineProperty(out, k, { value: r, enumerable: true, writable: true, configurable: true });
    }
    return out;
  };
  return walk(value, { path: '', key: '', secretByName: false, scope: '' });
}

/** Where a chain's variables live: `${vars.x}` in its node configurations reads them. */
const VARS_PATH = 'ruleChain.configuration.vars';

/**
 * The names of the chain variables a secret place refers to (`Bearer ${vars.token}` in a
 * header): their values are the credential the secret place will carry, so they are secrets
 * too. A sealed secret place hides its references; its variables were sealed with it.
 */
function secretVarsOf(value: unknown): Set<string> {
  const names = new Set<string>();
  const vars = varsOf(value);
  const scan = (v: unknown, path: string, secretByName: boolean): void => {
    if (typeof v === 'string') {
      if (secretByName || isSecretUrl(v)) for (const m of v.matchAll(VARS_REFERENCE)) names.add(m[1]!);
      return;
    }
    if (v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      v.forEach((item, i) => scan(item, `${path}[${i}]`, secretByName));
      return;
    }
    const isHeaders = /^headers$/i.test(lastSegment(path));
    for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
      scan(item, path ? `${path}.${k}` : k, secretByName || isSecretKey(k) || (isHeaders && isSecretHeader(k, withVars(item, vars))));
    }
  };
  scan(value, '', false);
  return names;
}

function lastSegment(path: string): string {
  const dot = path.lastIndexOf('.');
  return dot < 0 ? path : path.slice(dot + 1);
}

function identityOf(item: unknown, index: number): string {
  if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
    const o = item as Record<string, unknown>;
    if (typeof o.id === 'string') return `id=${o.id}`;
    if (typeof o.name === 'string') return `${typeof o.type === 'string' ? o.type : ''}:${o.name}`;
  }
  return String(index);
}

/** Does the rule make the string at this place a secret? */
function isSecretAt(value: string, at: Position): boolean {
  return at.secretByName || isSecretUrl(value);
}

/**
 * Keys whose value is where a tool or node sends its requests (`url`, `restEndpointUrlPattern`,
 * `baseUrl`, `api_base`, `endpoint`): a secret kept by the marker must not follow a changed one.
 */
const DESTINATION_KEY = /url|endpoint|api_?base/i;

/** The destination values of each scope, as plain text, keyed by their identity path. */
type Destinations = Map<string, Map<string, string>>;

function addDestination(to: Destinations, at: Position, value: string): void {
  if (!DESTINATION_KEY.test(lastSegment(at.path))) return;
  const scope = to.get(at.scope) ?? new Map<string, string>();
  scope.set(at.key, value);
  to.set(at.scope, scope);
}

function sameDestinations(a: Map<string, string> | undefined, b: Map<string, string> | undefined): boolean {
  const flat = (m: Map<string, string> | undefined) => JSON.stringify([...(m ?? new Map<string, string>())].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
  return flat(a) === flat(b);
}

/**
 * The definition to store, from what a client sent and (on update) what is stored. At every
 * secret place: the marker keeps the stored sealed value, an empty string or null removes the
 * entry, anything else is a new value and is sealed. Everything a client sends is taken as
 * plain text: a value that merely looks sealed is sealed again where a secret belongs and
 * refused elsewhere. 400 for a marker where nothing is stored (a definition copied from
 * another server), naming the place. A kept secret is dropped when the URL of its tool or node
 * changed in the same request (as a provider's key goes with a changed `base_url`): otherwise
 * anyone allowed to edit could send it to a host of their own without ever knowing it.
 */
export function sealDefinition(incoming: unknown, stored: unknown, sealer: SecretSealer): unknown {
  const kept = new Map<string, string>();
  const before: Destinations = new Map();
  if (stored !== undefined) {
    transform(stored, (v, at) => {
      if (isSealed(v)) kept.set(at.key, v);
      // Written in plain text by an older replica (the start-up pass not yet run): kept all the same.
      else if (v !== null && v !== '' && v !== SECRET_MARKER && isSecretAt(v, at)) kept.set(at.key, SEALED_PREFIX + sealer.seal(v));
      if (typeof v === 'string') addDestination(before, at, isSealed(v) ? openQuietly(v, sealer) : v);
      return v;
    });
  }
  const after: Destinations = new Map();
  const reused: Position[] = [];
  const problems: string[] = [];
  const out = transform(incoming, (v, at) => {
    if (v === SECRET_MARKER) {
      const previous = kept.get(at.key);
      if (previous) {
        reused.push(at);
        addDestination(after, at, openQuietly(previous, sealer));
        return previous;
      }
      if (at.secretByName) problems.push(`${at.path}: holds the secret marker "${SECRET_MARKER}" but no secret is stored there; send the value itself`);
      return v;
    }
    if (typeof v === 'string') addDestination(after, at, v);
    if (v === null || v === '') return at.secretByName ? REMOVE : v;
    if (isSecretAt(v, at)) return SEALED_PREFIX + sealer.seal(v);
    if (isSealed(v)) problems.push(`${at.path}: values starting with "${SEALED_PREFIX}" are reserved for sealed secrets`);
    return v;
  });
  if (problems.length > 0) throw new Errors.VALIDATION(problems.join('; '));
  const moved = new Set(reused.filter((at) => !sameDestinations(before.get(at.scope), after.get(at.scope))).map((at) => at.key));
  return moved.size === 0 ? out : transform(out, (v, at) => (moved.has(at.key) ? REMOVE : v));
}

/** A stored value to compare destinations by; one that does not open compares as itself. */
function openQuietly(sealed: string, sealer: SecretSealer): string {
  try {
    return sealer.open(sealed.slice(SEALED_PREFIX.length));
  } catch {
    return sealed;
  }
}

/**
 * Whether a stored definition holds credentials (sealed, or at a secret place in plain text): a
 * definition that does may run for another owner only when its owner lends its powers.
 */
export function holdsSecrets(dsl: unknown): boolean {
  let found = false;
  transform(dsl, (v, at) => {
    if (v !== null && (isSealed(v) || (v !== '' && v !== SECRET_MARKER && isSecretAt(v, at)))) found = true;
    return v;
  });
  return found;
}

/**
 * What a read answers: the marker at every secret place and in place of anything sealed, so
 * that neither a secret nor its sealed form leaves the gateway (a row not yet sealed by the
 * start-up pass is redacted all the same).
 */
export function redactDefinition<T>(dsl: T): T {
  return transform(dsl, (v, at) => (v !== null && (isSealed(v) || (v !== '' && isSecretAt(v, at))) ? SECRET_MARKER : v)) as T;
}

/**
 * The definition with its secrets in plain text, for the run that needs them; never stored,
 * logged or put in a job. A value that does not open (the master key changed) fails with a
 * message naming the place, not the value.
 */
export function unsealDefinition<T>(dsl: T, sealer: SecretSealer | undefined, what: string): T {
  return transform(dsl, (v, at) => {
    if (!isSealed(v)) return v;
    if (!sealer) throw new Errors.INTERNAL(`${what} holds sealed secrets but this process has no secret key to open them`);
    try {
      return sealer.open(v.slice(SEALED_PREFIX.length));
    } catch (err) {
      throw new Errors.INTERNAL(`${what}: the secret at ${at.path} cannot be opened (${(err as Error).message})`);
    }
  }) as T;
}

/**
 * Seals the plain-text secrets of a definition stored before secrets were sealed (the start-up
 * pass). `changed` is false when there was nothing to seal, so that the pass writes only rows
 * that need it and running it again changes nothing.
 */
export function sealStoredPlaintext(dsl: unknown, sealer: SecretSealer): { dsl: unknown; changed: boolean } {
  let changed = false;
  const out = transform(dsl, (v, at) => {
    if (v === null || v === '' || v === SECRET_MARKER || isSealed(v) || !isSecretAt(v, at)) return v;
    changed = true;
    return SEALED_PREFIX + sealer.seal(v);
  });
  return { dsl: out, changed };
}
