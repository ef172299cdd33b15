import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './auth-harness.js';

/**
 * A management body is closed: a field the schema does not name is a 400 naming it, never
 * stored and ignored (a tool entry's `parameters` beside its `config` was once offered with an
 * empty schema). This walks every route's declared body schema, so a new route with an open
 * object fails here rather than in a user's hands.
 */

/** Bodies that are open on purpose, each with why. */
const OPEN_BODIES: ReadonlyArray<{ method: string; url: string; why: string }> = [
  { method: 'POST', url: '/api/v1/chat/completions', why: 'OpenAI clients send fields an agent may ignore harmlessly (spec: the chat body stays tolerant)' },
  { method: 'POST', url: '/api/v1/responses', why: 'the Responses API body, tolerant like chat' },
];

/**
 * Places inside a closed body that stay open on purpose, as JSON paths of the schema walk
 * (`*` is any item). A rule-chain DSL keeps RuleGo's fields as written (its node configurations
 * are checked per node type by validateRuleChain, not by the route schema).
 */
const OPEN_PLACES: ReadonlyArray<{ url: RegExp; path: RegExp; why: string }> = [
  { url: /^\/api\/v1\/(agents|rules)/, path: /^(ruleChain|metadata)(\.|$)/, why: 'a RuleGo DSL keeps unknown fields as written; node configurations are closed per node type' },
  {
    url: /^\/api\/v1\/channels\/:platform\/accounts/,
    path: /^$/,
    why: "each platform takes fields of its own: checkWrittenFields refuses any its adapter does not read (tested in channels-api.test.ts)",
  },
];

interface Found {
  path: string;
  why: string;
}

function isObjectSchema(s: Record<string, unknown>): boolean {
  return s.type === 'object' || (s.properties !== undefined && s.type === undefined);
}

/** Every object in the schema that takes fields nobody named, by path. */
function openObjects(schema: unknown, at = ''): Found[] {
  if (!schema || typeof schema !== 'object') return [];
  const s = schema as Record<string, unknown>;
  const found: Found[] = [];
  if (isObjectSchema(s)) {
    const closed = s.additionalProperties === false || (typeof s.additionalProperties === 'object' && s.additionalProperties !== null);
    // A map (patternProperties or additionalProperties as a schema) names its values, not its keys.
    if (!closed && s.patternProperties === undefined) found.push({ path: at, why: 'object without additionalProperties: false' });
    for (const [key, sub] of Object.entries((s.properties as Record<string, unknown> | undefined) ?? {})) {
      found.push(...openObjects(sub, at ? `${at}.${key}` : key));
    }
    if (typeof s.additionalProperties === 'object') found.push(...openObjects(s.additionalProperties, `${at}.*`));
    for (const sub of Object.values((s.patternProperties as Record<string, unknown> | undefined) ?? {})) found.push(...openObjects(sub, `${at}.*`));
  }
  if (s.items) found.push(...openObjects(s.items, `${at}[*]`));
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    for (const sub of (s[key] as unknown[] | undefined) ?? []) found.push(...openObjects(sub, at));
  }
  return found;
}

describe('management bodies are closed', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness(
      [
        'security:',
        '  users: {admin: "admin-password-closed-bodies"}',
        'channels:',
        '  chat_d:',
        '    accounts:',
        '      tg1: {name: TG, app_secret: "123:abc", bot_token: "123:abc"}',
      ].join('\n'),
    );
  });
  afterAll(async () => h?.close());

  it('every declared body schema refuses fields it does not name', () => {
    const withBodies = h.app.routeAccess.filter((r) => r.body !== undefined);
    // The walk saw the families it guards.
    expect(withBodies.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining(['POST /api/v1/agents', 'POST /api/v1/cron', 'POST /api/v1/config/models/providers', 'POST /api/v1/channels/:platform/accounts']),
    );
    const open = withBodies
      .filter((r) => !OPEN_BODIES.some((o) => o.method === r.method && o.url === r.url))
      .flatMap((r) =>
        openObjects(r.body)
          .filter((f) => !OPEN_PLACES.some((p) => p.url.test(r.url) && p.path.test(f.path)))
          .map((f) => `${r.method} ${r.url} at ${f.path || '(body)'}: ${f.why}`),
      );
    expect(open).toEqual([]);
  });

  it("an account in the configuration file with a field its platform never reads is imported with a warning naming it", () => {
    const warning = h.logs.map((l) => JSON.parse(l) as { level: number; msg: string; fields?: string[] }).find((l) => l.msg.includes('channels.chat_d.accounts.tg1'));
    expect(warning).toMatchObject({ level: 40, fields: ['bot_token'] });
    expect(warning?.msg).toContain('bot_token is not read by chat_d accounts');
    expect(h.logs.join('\n')).not.toContain('123:abc');
  });

  it('the walk finds an open object (it can fail)', () => {
    expect(openObjects({ type: 'object', properties: { a: { type: 'object', properties: {} } }, additionalProperties: false })).toEqual([
      { path: 'a', why: 'object without additionalProperties: false' },
    ]);
    expect(openObjects({ type: 'array', items: { type: 'object', properties: {} } })).toHaveLength(1);
    expect(openObjects({ anyOf: [{ type: 'object', properties: {}, additionalProperties: false }, { type: 'string' }] })).toEqual([]);
  });
});
