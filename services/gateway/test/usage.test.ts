import { beforeAll, expect, it } from 'vitest';
import { describeOnBothEngines } from './resources-harness.js';

/**
 * `GET /usage` over stored `run_usage` rows on both engines (open mode: the caller is an admin).
 * Who sees what, and budgets through chat, are e2e/usage-budgets.test.ts.
 */

describeOnBothEngines('usage report', (env) => {
  beforeAll(async () => {
    const row = (agent: string, principal: string, provider: string, at: string, prompt: number, completion: number) => ({
      run_id: `r-${Math.random()}`,
      agent_id: agent,
      principal,
      provider,
      model: 'm',
      prompt_tokens: prompt,
      completion_tokens: completion,
      created_at: at,
    });
    await env()
      .db.insertInto('run_usage')
      .values([
        row('a1', 'user:dave', 'p1', '2026-03-01T10:00:00Z', 10, 5),
        row('a1', 'user:dave', 'p2', '2026-03-01T23:59:00Z', 1, 1),
        row('a2', 'api:app', 'p1', '2026-03-02T00:00:01Z', 100, 50),
        row('a2', '', 'p1', '2026-03-05T12:00:00Z', 7, 3),
      ])
      .execute();
  });

  const get = async (query: string) => {
    const res = await env().req('GET', `/api/v1/usage?${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { data: Array<{ key: string; promptTokens: number; completionTokens: number; totalTokens: number; requests: number }>; from: string; to: string; groupBy: string };
  };

  it('groups by agent, principal, provider and UTC day, over [from, to)', async () => {
    const window = 'from=2026-03-01&to=2026-03-02';
    const byAgent = await get(`groupBy=agent&${window}`);
    expect(byAgent).toEqual({
      data: [
        { key: 'a1', promptTokens: 11, completionTokens: 6, totalTokens: 17, requests: 2 },
        { key: 'a2', promptTokens: 100, completionTokens: 50, totalTokens: 150, requests: 1 },
      ],
      // A date as `to` takes in the whole day.
      from: '2026-03-01T00:00:00.000Z',
      to: '2026-03-03T00:00:00.000Z',
      groupBy: 'agent',
    });
    expect((await get(`groupBy=principal&${window}`)).data.map((r) => [r.key, r.totalTokens])).toEqual([
      ['api:app', 150],
      ['user:dave', 17],
    ]);
    expect((await get('groupBy=provider&from=2026-03-01&to=2026-03-31')).data.map((r) => [r.key, r.requests, r.totalTokens])).toEqual([
      ['p1', 3, 175],
      ['p2', 1, 2],
    ]);
    expect((await get('groupBy=day&from=2026-03-01&to=2026-03-31')).data.map((r) => [r.key, r.totalTokens])).toEqual([
      ['2026-03-01', 17],
      ['2026-03-02', 150],
      ['2026-03-05', 10],
    ]);
    // Times are exact: the row one second after midnight falls outside a `to` of midnight.
    expect((await get('groupBy=day&from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z')).data.map((r) => r.key)).toEqual(['2026-03-01']);
  });

  it("an admin narrows to one principal; the default window is the last 30 days, grouped by day", async () => {
    expect((await get('groupBy=agent&principal=user:dave&from=2026-01-01&to=2026-12-31')).data.map((r) => [r.key, r.totalTokens])).toEqual([['a1', 17]]);
    const recent = await get('');
    expect(recent.groupBy).toBe('day');
    expect(Date.parse(recent.to) - Date.parse(recent.from)).toBe(30 * 86_400_000);
    expect(recent.data.every((r) => r.key >= recent.from.slice(0, 10))).toBe(true);
  });

  it('refuses bad input with 400 {error}', async () => {
    for (const query of ['groupBy=model', 'from=yesterday', 'to=2026-13-45', 'from=2026-03-02&to=2026-03-01']) {
      const res = await env().req('GET', `/api/v1/usage?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(Object.keys(res.json() as object)).toEqual(['error']);
    }
  });
});
