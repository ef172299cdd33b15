import { expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { warningHeaders, MAX_WARNING_HEADERS } from '../src/routes/chain-support.js';
import { agentDsl, createAgent, describeOnBothEngines, ruleDsl, uid, type Env } from './resources-harness.js';

/**
 * `?fieldValidation=Strict|Warn|Ignore` on every route that takes a chain DSL, found in the
 * gateway's own route table (a body schema with `ruleChain` and `metadata`), so that a DSL route
 * added later is walked too. The unknown field is the one RuleGo's own fork/delay/join testdata
 * carries (`period` on a delay node), with its hint.
 */

type Dsl = ReturnType<typeof agentDsl> | ReturnType<typeof ruleDsl>;
type Route = { method: string; url: string; body?: unknown };

const PERIOD_WARNING = /^299 - "metadata\.nodes\[\d\] \(\\"wait\\"\), delay: configuration: unknown field \\"period\\" \(did you mean delayMs\? RuleGo has no \\"period\\" and would not delay at all\)"$/;

function takesDsl(route: Route): boolean {
  const props = (route.body as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
  return 'ruleChain' in props && 'metadata' in props;
}

/** The DSL of the route's kind with a delay node whose configuration has RuleGo's `period`. */
function withPeriod(dsl: Dsl): Dsl {
  const wait = { id: 'wait', type: 'delay', configuration: { delayMs: 0, period: 500 } };
  return { ...dsl, metadata: { ...dsl.metadata, nodes: [...dsl.metadata.nodes, wait] } } as Dsl;
}

function warnings(res: LightMyRequestResponse): string[] {
  const h = res.headers.warning;
  return h === undefined ? [] : Array.isArray(h) ? h : [String(h)];
}

describeOnBothEngines('field validation of chain DSLs', (env: () => Env) => {
  /** A concrete call of the route: its path filled with existing chains, and the DSL it takes. */
  async function target(route: Route): Promise<{ url: string; dsl: Dsl; get: string }> {
    const agentId = uid('fv_agent');
    await createAgent(env, agentId);
    const forAgent = route.url.startsWith('/api/v1/agents') && !route.url.includes('/rules');
    if (forAgent) {
      const id = route.method === 'POST' ? uid('fv_new_agent') : agentId;
      return { url: route.url.replace(':agentId', agentId), dsl: agentDsl(id), get: `/api/v1/agents/${id}` };
    }
    const id = uid('fv_rule');
    const base = route.url.includes(':agentId') ? `/api/v1/agents/${agentId}/rules` : '/api/v1/rules';
    if (route.method === 'PUT') expect((await env().req('POST', base, ruleDsl(id))).statusCode).toBe(201);
    return { url: route.url.replace(':agentId', agentId).replace(':id', id), dsl: ruleDsl(id), get: `${base}/${id}` };
  }

  function dslRoutes(): Route[] {
    const routes = env().app.routeAccess.filter(takesDsl);
    // The six writes of the spec's agents and rule chains; a new one joins them by itself.
    expect(routes.map((r) => `${r.method} ${r.url}`).sort()).toEqual(
      expect.arrayContaining([
        'POST /api/v1/agents',
        'PUT /api/v1/agents/:agentId',
        'POST /api/v1/rules',
        'PUT /api/v1/rules/:id',
        'POST /api/v1/agents/:agentId/rules',
        'PUT /api/v1/agents/:agentId/rules/:id',
      ]),
    );
    return routes;
  }

  it('Warn (the default): the unknown field is kept as written and reported in a Warning header with its hint', async () => {
    for (const route of dslRoutes()) {
      for (const query of ['', '?fieldValidation=Warn']) {
        const { url, dsl, get } = await target(route);
        const body = withPeriod(dsl);
        const res = await env().req(route.method as 'POST', `${url}${query}`, body);
        const what = `${route.method} ${route.url}${query}`;
        expect(res.statusCode, `${what}: ${res.body}`).toBe(route.method === 'POST' ? 201 : 200);
        expect(res.json(), what).toEqual(body);
        expect(warnings(res), what).toEqual([expect.stringMatching(PERIOD_WARNING)]);
        expect((await env().req('GET', get)).json(), what).toEqual(body);
      }
    }
  });

  it('Strict: the unknown field is a 400 naming it, and nothing is stored', async () => {
    for (const route of dslRoutes()) {
      const { url, dsl, get } = await target(route);
      const before = (await env().req('GET', get)).body;
      const res = await env().req(route.method as 'POST', `${url}?fieldValidation=Strict`, withPeriod(dsl));
      const what = `${route.method} ${route.url}`;
      expect(res.statusCode, what).toBe(400);
      expect(res.json().error, what).toMatch(/delay: configuration: unknown field "period" \(did you mean delayMs\?/);
      expect(warnings(res), what).toEqual([]);
      expect((await env().req('GET', get)).body, what).toBe(before);
    }
  });

  it('Ignore: the unknown field is kept, and nothing is reported', async () => {
    for (const route of dslRoutes()) {
      const { url, dsl, get } = await target(route);
      const body = withPeriod(dsl);
      const res = await env().req(route.method as 'POST', `${url}?fieldValidation=Ignore`, body);
      const what = `${route.method} ${route.url}`;
      expect(res.statusCode, `${what}: ${res.body}`).toBe(route.method === 'POST' ? 201 : 200);
      expect(warnings(res), what).toEqual([]);
      expect((await env().req('GET', get)).json(), what).toEqual(body);
    }
  });

  it('every other problem is an error whatever the mode; a mode that is not one of the three is a 400', async () => {
    for (const route of dslRoutes()) {
      for (const mode of ['Warn', 'Ignore']) {
        const { url, dsl } = await target(route);
        const bad = withPeriod(dsl);
        (bad.metadata.nodes.at(-1)!.configuration as Record<string, unknown>).delayMs = 'soon';
        (bad.metadata.nodes.at(-1)!.configuration as Record<string, unknown>).overwrite = true;
        const res = await env().req(route.method as 'POST', `${url}?fieldValidation=${mode}`, bad);
        expect(res.statusCode, `${route.method} ${route.url} ${mode}`).toBe(400);
        expect(res.json().error).toMatch(/overwrite: true is not supported/);
      }
      const { url, dsl } = await target(route);
      const res = await env().req(route.method as 'POST', `${url}?fieldValidation=strict`, dsl);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/fieldValidation/);
    }
  });

  it('the kept fields load: the rule list and reload list them as warnings, a clean chain has none', async () => {
    const id = uid('fv_listed');
    expect((await env().req('POST', '/api/v1/rules', withPeriod(ruleDsl(id)))).statusCode).toBe(201);
    const item = ((await env().req('GET', '/api/v1/rules')).json() as Array<{ ruleChain: { id: string }; loaded: boolean; warnings?: string[] }>).find((i) => i.ruleChain.id === id);
    expect(item).toMatchObject({ loaded: true, warnings: [expect.stringContaining('unknown field "period"')] });
    expect((await env().req('POST', `/api/v1/rules/${id}/reload`)).json()).toEqual({
      success: true,
      warnings: [expect.stringMatching(/^metadata\.nodes\[2\] \("wait"\), delay: configuration: unknown field "period" \(did you mean delayMs\?/)],
    });
    const clean = uid('fv_clean');
    expect((await env().req('POST', '/api/v1/rules', ruleDsl(clean))).statusCode).toBe(201);
    expect((await env().req('POST', `/api/v1/rules/${clean}/reload`)).json()).toEqual({ success: true });
  });

  it('the heartbeat route, a management body, saves an agent that keeps unknown fields and stays strict itself', async () => {
    const id = uid('fv_hb');
    expect((await env().req('POST', '/api/v1/agents', withPeriod(agentDsl(id)))).statusCode).toBe(201);
    const put = await env().req('PUT', `/api/v1/agents/${id}/heartbeat`, { interval: '30m' });
    expect(put.statusCode, put.body).toBe(200);
    expect(warnings(put)).toEqual([]);
    const refused = await env().req('PUT', `/api/v1/agents/${id}/heartbeat`, { interval: '30m', timeZone: 'Europe/Paris' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatch(/timeZone/);
  });
});

it('Warning headers are bounded, quoted and plain ASCII whatever the field names are', () => {
  const many = Array.from({ length: 500 }, (_, i) => `metadata.nodes[${i}] ("n${i}"), log: configuration: unknown field "${'x'.repeat(1000)}"`);
  const headers = warningHeaders(many);
  expect(headers).toHaveLength(MAX_WARNING_HEADERS);
  expect(headers.at(-1)).toBe(`299 - "and ${500 - MAX_WARNING_HEADERS + 1} more warnings (the reload answer lists them all)"`);
  expect(headers.join('').length).toBeLessThan(8 * 1024);
  const [odd] = warningHeaders(['unknown field "a\\"b\u00e9\n\u{1F600}"']);
  expect(odd).toBe('299 - "unknown field \\"a\\\\\\"b????\\""');
  for (const h of headers) expect(h).toMatch(/^299 - "(?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$/);
});
