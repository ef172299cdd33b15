import { describe, expect, it } from 'vitest';
import { Sealer } from '@agentry/runtime';
import { SEALED_PREFIX, SECRET_MARKER, holdsSecrets, isSecretHeader, isSecretKey, isSecretUrl, redactDefinition, sealDefinition, sealStoredPlaintext, unsealDefinition, validateRuleChain } from '@agentry/definitions';

/** The secret-field rule and the seal / redact / unseal round trip of definitions. */
const sealer = new Sealer('definition-secrets-master-key-0123456789');
const other = new Sealer('another-master-key-that-differs-0123456789');

function agent(tools: unknown[], extraNodes: unknown[] = []) {
  return {
    ruleChain: { id: 'a', name: 'A' },
    metadata: {
      nodes: [{ id: 'agent', type: 'ai/agent', configuration: { provider: 'p', params: { maxTokens: 100 }, tools } }, ...extraNodes],
      connections: [],
    },
  };
}

const mcp = (headers: Record<string, unknown>, name = 'docs') => ({ type: 'mcp', name, config: { url: 'https://mcp.example.com/mcp', headers } });
const rest = (headers: Record<string, unknown>) => ({
  id: 'call',
  type: 'restApiCall',
  configuration: { restEndpointUrlPattern: 'https://api.example.com/x', headers },
});

interface Dsl {
  metadata: { nodes: Array<{ configuration: { params?: unknown; tools?: unknown; headers?: Record<string, string> } }> };
}
const tools = (d: unknown) => (d as Dsl).metadata.nodes[0]!.configuration.tools as Array<{ config: { headers: Record<string, string>; url: string } }>;
const restHeaders = (d: unknown) => (d as Dsl).metadata.nodes[1]!.configuration.headers;

describe('the secret-field rule', () => {
  it('names keys, headers and URLs that carry credentials', () => {
    for (const key of ['token', 'accessToken', 'api_key', 'apiKey', 'API-KEY', 'clientSecret', 'password', 'privateKey', 'credentials', 'Authorization', 'cookie']) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of ['url', 'name', 'timeout', 'allowHosts', 'model', 'systemPrompt', 'keyword']) expect(isSecretKey(key), key).toBe(false);
    for (const h of ['Authorization', 'proxy-authorization', 'Cookie', 'X-Api-Key', 'X-Auth-Token', 'X-Auth-Key', 'api-key']) expect(isSecretHeader(h), h).toBe(true);
    for (const h of ['Accept', 'Content-Type', 'X-Request-Id', 'User-Agent']) expect(isSecretHeader(h), h).toBe(false);
    expect(isSecretUrl('https://user:pw@host/x')).toBe(true);
    expect(isSecretUrl('https://host/x?api_key=1')).toBe(true);
    expect(isSecretUrl('https://host/x?a=1&access%5Ftoken=2')).toBe(true);
    expect(isSecretUrl('https://host/x?key=abc')).toBe(true);
    expect(isSecretUrl('https://host/x?q=token')).toBe(false);
    expect(isSecretUrl('https://host/path@x')).toBe(false);
    expect(isSecretUrl('not a url user:pw@host')).toBe(false);
  });

  it('seals every secret place of a definition and nothing else', () => {
    const dsl = agent(
      [
        mcp({ Authorization: 'Bearer mcp-token', Accept: 'application/json' }),
        { type: 'builtin', name: 'http_fetch', config: { timeout: 5, apiToken: 'tool-token', nested: { credentials: { user: 'nested-user', pass: 'nested-pass' } } } },
        { type: 'mcp', name: 'userinfo', config: { url: 'https://bob:pw@mcp.example.com/' } },
      ],
      [rest({ 'X-Api-Key': 'rest-key', 'content-type': 'text/plain' })],
    );
    const sealed = sealDefinition(dsl, undefined, sealer) as Dsl;
    const text = JSON.stringify(sealed);
    for (const plain of ['mcp-token', 'tool-token', 'rest-key', 'nested-user', 'nested-pass', 'bob:pw']) expect(text).not.toContain(plain);
    expect(tools(sealed)[0]!.config.headers.Authorization).toMatch(new RegExp(`^${SEALED_PREFIX}v1\\.`));
    expect(tools(sealed)[0]!.config.headers.Accept).toBe('application/json');
    expect(restHeaders(sealed)?.['content-type']).toBe('text/plain');
    expect(sealed.metadata.nodes[0]!.configuration.params).toEqual({ maxTokens: 100 });
    // Still a valid chain: sealed values are strings where strings were.
    expect(validateRuleChain(sealed, { requireAgent: true })).toEqual({ ok: true, errors: [], warnings: [] });
    expect(unsealDefinition(sealed, sealer, 'agent "a"')).toEqual(dsl);
  });
});

describe('reads and updates', () => {
  const stored = sealDefinition(
    agent([mcp({ Authorization: 'Bearer one' })], [rest({ 'X-Api-Key': 'k1', Accept: 'a/b' })]),
    undefined,
    sealer,
  );

  it('answers the marker in place of every secret, sealed or not yet sealed', () => {
    const read = redactDefinition(stored);
    expect(tools(read)[0]!.config.headers).toEqual({ Authorization: SECRET_MARKER });
    expect(restHeaders(read)).toEqual({ 'X-Api-Key': SECRET_MARKER, Accept: 'a/b' });
    expect(JSON.stringify(read)).not.toContain(SEALED_PREFIX);
    const legacy = redactDefinition(agent([mcp({ authorization: 'Bearer plain' })]));
    expect(JSON.stringify(legacy)).not.toContain('plain');
  });

  it('keeps a secret sent back as the marker, also when its tool moved and its header changed case', () => {
    const read = redactDefinition(stored) as Dsl;
    const moved = agent([{ type: 'builtin', name: 'read' }, mcp({ authorization: SECRET_MARKER })], [rest({ 'x-api-key': SECRET_MARKER })]);
    const next = sealDefinition(moved, stored, sealer);
    expect(tools(unsealDefinition(next, sealer, 'a'))[1]!.config.headers).toEqual({ authorization: 'Bearer one' });
    expect(restHeaders(unsealDefinition(next, sealer, 'a'))).toEqual({ 'x-api-key': 'k1' });
    // GET then PUT unchanged stores the same sealed text.
    expect(sealDefinition(read, stored, sealer)).toEqual(stored);
    // A row an older replica wrote in plain text keeps its secret too, sealed now.
    const legacy = agent([mcp({ Authorization: 'Bearer legacy' })]);
    const fromLegacy = sealDefinition(redactDefinition(legacy), legacy, sealer);
    expect(JSON.stringify(fromLegacy)).not.toContain('legacy');
    expect(unsealDefinition(fromLegacy, sealer, 'a')).toEqual(legacy);
  });

  it('replaces a secret with a new value and removes it on an empty string or null', () => {
    const replaced = unsealDefinition(sealDefinition(agent([mcp({ Authorization: 'Bearer two' })]), stored, sealer), sealer, 'a');
    expect(tools(replaced)[0]!.config.headers).toEqual({ Authorization: 'Bearer two' });
    const emptied = sealDefinition(agent([mcp({ Authorization: '' })], [rest({ 'X-Api-Key': null, Accept: 'a/b' })]), stored, sealer);
    expect(tools(emptied)[0]!.config.headers).toEqual({});
    expect(restHeaders(emptied)).toEqual({ Accept: 'a/b' });
  });

  it('drops a kept secret whose tool or node now sends elsewhere, unless the request gives it again', () => {
    const elsewhere = (tool: ReturnType<typeof mcp>) => ({ ...tool, config: { ...tool.config, url: 'https://attacker.example.net/mcp' } });
    const moved = sealDefinition(
      agent([elsewhere(mcp({ Authorization: SECRET_MARKER }))], [{ ...rest({ 'X-Api-Key': SECRET_MARKER, Accept: 'a/b' }), configuration: { restEndpointUrlPattern: 'https://attacker.example.net/x', headers: { 'X-Api-Key': SECRET_MARKER, Accept: 'a/b' } } }]),
      stored,
      sealer,
    );
    expect(tools(moved)[0]!.config.headers).toEqual({});
    expect(restHeaders(moved)).toEqual({ Accept: 'a/b' });
    const given = unsealDefinition(sealDefinition(agent([elsewhere(mcp({ Authorization: 'Bearer for-the-new-host' }))]), stored, sealer), sealer, 'a');
    expect(tools(given)[0]!.config.headers).toEqual({ Authorization: 'Bearer for-the-new-host' });
    // Another tool's address changing does not matter.
    const other = sealDefinition(agent([mcp({ Authorization: SECRET_MARKER }), elsewhere(mcp({}, 'second'))]), stored, sealer);
    expect(tools(unsealDefinition(other, sealer, 'a'))[0]!.config.headers).toEqual({ Authorization: 'Bearer one' });
  });

  it('refuses a marker with nothing stored behind it, and a planted sealed value', () => {
    expect(() => sealDefinition(agent([mcp({ Authorization: SECRET_MARKER })]), undefined, sealer)).toThrow(
      /metadata\.nodes\[0\]\.configuration\.tools\[0\]\.config\.headers\.Authorization: holds the secret marker "\[secret\]" but no secret is stored there/,
    );
    // Another tool's secret cannot be claimed by sending the marker at its own place.
    expect(() => sealDefinition(agent([mcp({ Authorization: SECRET_MARKER }, 'other')]), stored, sealer)).toThrow(/no secret is stored there/);
    const planted = tools(stored)[0]!.config.headers.Authorization;
    const dsl = agent([{ type: 'builtin', name: 'read', description: planted }]);
    expect(() => sealDefinition(dsl, stored, sealer)).toThrow(/values starting with "sealed:" are reserved/);
    // At a secret place a sealed-looking value is just text to seal: the worker opens it back to itself.
    const resealed = sealDefinition(agent([mcp({ Authorization: planted })]), undefined, sealer);
    expect(tools(unsealDefinition(resealed, sealer, 'a'))[0]!.config.headers.Authorization).toBe(planted);
  });
});

describe('the worker and the start-up pass', () => {
  it('fails with the place, not the value, when the key differs', () => {
    const sealed = sealDefinition(agent([mcp({ Authorization: 'Bearer one' })]), undefined, sealer);
    expect(() => unsealDefinition(sealed, other, 'agent "a"')).toThrow(/agent "a": the secret at metadata\.nodes\[0\]\.configuration\.tools\[0\]\.config\.headers\.Authorization cannot be opened/);
    expect(() => unsealDefinition(sealed, undefined, 'agent "a"')).toThrow(/holds sealed secrets but this process has no secret key/);
  });

  it('copies a "__proto__" key as a key', () => {
    const dsl = JSON.parse('{"ruleChain":{"id":"a","name":"A","configuration":{"__proto__":{"token":"t-1"}}},"metadata":{"nodes":[],"connections":[]}}');
    const sealed = sealDefinition(dsl, undefined, sealer) as { ruleChain: { configuration: object } };
    expect(Object.keys(sealed.ruleChain.configuration)).toEqual(['__proto__']);
    expect(JSON.stringify(redactDefinition(sealed))).toContain('"__proto__":{"token":"[secret]"}');
    expect(unsealDefinition(sealed, sealer, 'a')).toEqual(dsl);
  });

  it('seals plain text stored earlier, once', () => {
    const legacy = agent([mcp({ Authorization: 'Bearer legacy', Accept: 'x' })]);
    const first = sealStoredPlaintext(legacy, sealer);
    expect(first.changed).toBe(true);
    expect(JSON.stringify(first.dsl)).not.toContain('legacy');
    expect(unsealDefinition(first.dsl, sealer, 'a')).toEqual(legacy);
    const again = sealStoredPlaintext(first.dsl, sealer);
    expect(again).toEqual({ dsl: first.dsl, changed: false });
  });
});

describe('secrets found by schema, not by a name list (issue 35, finding 7)', () => {
  it('a header is a secret by a credential name, or by a credential-shaped value unless it only describes the request', () => {
    for (const h of ['Ocp-Apim-Subscription-Key', 'x-functions-key', 'X-Signature', 'X-Hub-Signature-256', 'DD-API-KEY', 'apikey', 'X-Amz-Security-Token', 'X-Goog-Auth']) {
      expect(isSecretHeader(h, 'abc'), h).toBe(true);
    }
    // Plain request metadata is not, even when its value looks opaque (a request id is a UUID).
    const benign: Array<[string, string]> = [
      ['Accept', 'application/json'],
      ['content-type', 'application/json; charset=utf-8'],
      ['User-Agent', 'agentry/1.0 (+https://example.com)'],
      ['X-Request-Id', '3f2b8c1e-9d4a-4e6f-8a7b-1c2d3e4f5a6b'],
      ['X-Tenant', 'acme'],
      ['X-Tenant', 'acme-corp-europe'],
      ['Accept-Language', 'en-GB'],
      ['Cache-Control', 'no-cache'],
      ['X-Api-Version', '2024-10-01'],
      // A name part says key, but an idempotency key only names the request.
      ['Idempotency-Key', '7c9e6679-7425-40de-944b-e07fc1f90ae7'],
    ];
    for (const [h, v] of benign) expect(isSecretHeader(h, v), `${h}: ${v}`).toBe(false);
    // A custom header carrying a credential-shaped value is.
    const shaped: Array<[string, string]> = [
      ['X-Custom', 'Bearer abc'],
      ['X-Custom', '8f3a9c0d2b7e4f1a6c5d'],
      ['X-Tenant', 'sk-live-51HqLyjWDarjtT1zdp7dc'],
      ['X-Shared', 'SharedAccessSignature sr=x&sig=y'],
    ];
    for (const [h, v] of shaped) expect(isSecretHeader(h, v), `${h}: ${v}`).toBe(true);
  });

  it('seals a custom header by its value with the vars filled in, and leaves plain request metadata readable (issue 35)', () => {
    const dsl = {
      ruleChain: { id: 'c', name: 'C', configuration: { vars: { tenant: 'acme', ref: 'tok9f8e7d6c5b4a3921' } } },
      metadata: {
        nodes: [
          {
            id: 'call',
            type: 'restApiCall',
            configuration: {
              restEndpointUrlPattern: 'https://api.example.com/x',
              headers: { Accept: 'application/json', 'X-Request-Id': '3f2b8c1e-9d4a-4e6f-8a7b-1c2d3e4f5a6b', 'X-Tenant': '${vars.tenant}', 'X-Custom': '${vars.ref}', 'X-Plain': 'hello' },
            },
          },
        ],
        connections: [],
      },
    };
    const sealed = sealDefinition(dsl, undefined, sealer) as typeof dsl;
    const headers = sealed.metadata.nodes[0]!.configuration.headers;
    // X-Custom carries a credential once its var is filled in: it is a secret place, and so is the var.
    expect(headers).toEqual({ Accept: 'application/json', 'X-Request-Id': '3f2b8c1e-9d4a-4e6f-8a7b-1c2d3e4f5a6b', 'X-Tenant': '${vars.tenant}', 'X-Custom': expect.stringMatching(/^sealed:/), 'X-Plain': 'hello' });
    expect(sealed.ruleChain.configuration.vars.tenant).toBe('acme');
    expect(sealed.ruleChain.configuration.vars.ref).toMatch(/^sealed:/);
    const read = redactDefinition(sealed);
    expect(read.ruleChain.configuration.vars).toEqual({ tenant: 'acme', ref: SECRET_MARKER });
    // Sent back as read, the marker keeps the sealed var.
    expect(unsealDefinition(sealDefinition(read, sealed, sealer), sealer, 'c')).toEqual(dsl);
    // Only the ref's value makes the chain one that holds secrets (and so runs for another owner only when lent).
    expect(holdsSecrets(dsl)).toBe(true);
    expect(holdsSecrets({ ...dsl, ruleChain: { id: 'c', name: 'C', configuration: { vars: { tenant: 'acme', ref: 'plain' } } } })).toBe(false);
  });

  it('credential-shaped query parameters make the URL a secret', () => {
    for (const url of [
      'https://fn.azurewebsites.net/api/hook?code=abc',
      'https://bucket.s3.amazonaws.com/o?X-Amz-Signature=abc&X-Amz-Credential=x',
      'https://acct.blob.core.windows.net/c?sv=2020&sig=abc',
      'https://api.example.com/x?subscription-key=abc',
      'https://api.example.com/x?token=abc',
      'https://api.example.com/x?client_key=abc',
    ]) {
      expect(isSecretUrl(url), url).toBe(true);
    }
    for (const url of ['https://api.example.com/x?q=code', 'https://api.example.com/x?page=2&sort=name']) expect(isSecretUrl(url), url).toBe(false);
  });

  it('seals unknown headers, ?code= URLs and the vars a secret place refers to; reads show the marker; a run gets them back', () => {
    const dsl = {
      ruleChain: { id: 'c', name: 'C', configuration: { vars: { subKey: 'azure-sub-key', plain: 'visible', hookUrl: 'unused' } } },
      metadata: {
        nodes: [
          {
            id: 'call',
            type: 'restApiCall',
            configuration: {
              restEndpointUrlPattern: 'https://fn.azurewebsites.net/api/hook?code=fn-code-123',
              headers: { 'Ocp-Apim-Subscription-Key': '${vars.subKey}', 'x-functions-key': 'fn-key-456', 'X-Signature': 'sig-789', 'Content-Type': 'application/json' },
            },
          },
          { id: 'log', type: 'log', configuration: { jsScript: "return '${vars.plain}';" } },
        ],
        connections: [],
      },
    };
    const sealed = sealDefinition(dsl, undefined, sealer);
    const text = JSON.stringify(sealed);
    for (const plain of ['azure-sub-key', 'fn-code-123', 'fn-key-456', 'sig-789']) expect(text, plain).not.toContain(plain);
    const read = redactDefinition(sealed) as typeof dsl;
    expect(read.ruleChain.configuration.vars).toEqual({ subKey: SECRET_MARKER, plain: 'visible', hookUrl: 'unused' });
    expect(read.metadata.nodes[0]!.configuration.headers).toEqual({
      'Ocp-Apim-Subscription-Key': SECRET_MARKER,
      'x-functions-key': SECRET_MARKER,
      'X-Signature': SECRET_MARKER,
      'Content-Type': 'application/json',
    });
    expect(read.metadata.nodes[0]!.configuration.restEndpointUrlPattern).toBe(SECRET_MARKER);
    expect(unsealDefinition(sealed, sealer, 'chain "c"')).toEqual(dsl);
    // What a client read, sent back unchanged, keeps every secret.
    expect(unsealDefinition(sealDefinition(read, sealed, sealer), sealer, 'chain "c"')).toEqual(dsl);
  });
});

