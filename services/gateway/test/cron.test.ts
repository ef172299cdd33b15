import { expect, it } from 'vitest';
import { PubSubChannels } from '@agentry/contracts';
import { finishCronRun, insertCronRun, upsertChannelAccount } from '@agentry/db';
import { agentDsl, createAgent, describeOnBothEngines, uid, type Env } from './resources-harness.js';

interface Job {
  id: string;
  name: string;
  schedule: string;
  message: string;
  target: string;
  disabled: boolean;
  timezone: string;
  deliver: { platform: string; accountId: string; chatId: string } | null;
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastStatus: string | null;
  createdAt: string;
  updatedAt: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** /cron and /agents/{agentId}/cron, on both engines (PGlite: embedded mode; Postgres). */
describeOnBothEngines('cron jobs', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  const newAgent = async () => {
    const id = uid('cron_agent');
    await createAgent(env, id);
    return id;
  };
  const create = async (body: Record<string, unknown>): Promise<Job> => {
    const res = await req('POST', '/cron', body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as Job;
  };
  const job = (target: string, extra: Record<string, unknown> = {}) => ({ name: 'Nightly digest', schedule: '0 30 2 * * *', message: 'Summarise the day', target, ...extra });

  it('POST /cron creates a job (201, id generated) with every field; GET /cron/{id} and GET /cron return it', async () => {
    const agent = await newAgent();
    const before = Date.now();
    const created = await create(job(agent, { schedule: '  0  30 2 * * *  ' }));
    expect(created).toEqual({
      id: expect.stringMatching(/^[A-Za-z0-9_-]{1,64}$/),
      name: 'Nightly digest',
      schedule: '0 30 2 * * *',
      message: 'Summarise the day',
      target: agent,
      disabled: false,
      timezone: 'UTC',
      deliver: null,
      owner: 'admin',
      nextRunAt: expect.stringMatching(ISO),
      lastRunAt: null,
      lastStatus: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    const next = new Date(created.nextRunAt!);
    expect(next.getTime()).toBeGreaterThan(before);
    expect(next.getTime() - before).toBeLessThanOrEqual(24 * 3600_000);
    expect([next.getUTCHours(), next.getUTCMinutes(), next.getUTCSeconds()]).toEqual([2, 30, 0]);

    expect((await req('GET', `/cron/${created.id}`)).json()).toEqual(created);
    const all = (await req('GET', '/cron')).json() as Job[];
    expect(Array.isArray(all)).toBe(true);
    expect(all.find((j) => j.id === created.id)).toEqual(created);
    expect(((await req('GET', `/cron?agentId=${agent}`)).json() as Job[]).map((j) => j.id)).toEqual([created.id]);
    expect((await req('GET', '/cron?agentId=nobody')).json()).toEqual([]);

    const second = await create(job(agent, { name: 'Second' }));
    expect(second.id).not.toBe(created.id);
    expect(((await req('GET', `/cron?agentId=${agent}`)).json() as Job[]).map((j) => j.id)).toEqual([created.id, second.id]);
  });

  it('schedules are six fields (second minute hour day month weekday), validated on write with the reason', async () => {
    const agent = await newAgent();
    const cases: Array<[string, RegExp]> = [
      ['* * * * *', /has 5 fields; it needs exactly six: second minute hour day month weekday; did you mean "0 \* \* \* \* \*"/],
      ['30  9 * * MON-FRI', /did you mean "0 30 9 \* \* MON-FRI" \(a crontab line with the seconds in front\)\?$/],
      ['0 * * * * * *', /has 7 fields; it needs exactly six: second minute hour day month weekday$/],
      ['', /must NOT have fewer than 1 characters|has 0 fields/],
      ['   ', /has 0 fields/],
      ['60 * * * * *', /Invalid value for second: 60/],
      ['0 60 * * * *', /Invalid value for minute: 60/],
      ['0 0 24 * * *', /Invalid value for hour: 24/],
      ['0 0 0 32 * *', /Invalid value for day/],
      ['0 0 0 0 * *', /Invalid value for day/],
      ['0 0 0 * 13 *', /Invalid value for month/],
      ['0 0 0 * * 8', /Invalid value for dayOfWeek/],
      ['x * * * * *', /illegal characters/],
      ['0 0 0 31 2 *', /never fires/],
      ['0 0 0 15W * *', /W \(nearest weekday\)/],
      ['@daily', /has 1 field; it needs exactly six/],
    ];
    for (const [schedule, reason] of cases) {
      const res = await req('POST', '/cron', job(agent, { schedule }));
      expect(res.statusCode, schedule).toBe(400);
      expect(res.json().error, schedule).toMatch(reason);
    }
    for (const schedule of ['*/1 * * * * *', '0 */5 9-17 * * MON-FRI', '30 0 0 1,15 * *', '0 0 12 L * *', '0 0 0 * * 7', '0 0 8 * JAN-MAR 1#1', '0 0 0 ? * *']) {
      const res = await req('POST', '/cron', job(agent, { schedule }));
      expect(res.statusCode, `${schedule}: ${res.body}`).toBe(201);
    }
    expect(((await req('GET', `/cron?agentId=${agent}`)).json() as Job[]).length).toBe(7);
  });

  it('other fields are validated too: missing ones, an unknown target agent, a bad time zone (400)', async () => {
    const agent = await newAgent();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ schedule: '* * * * * *', message: 'm', target: agent }, /name/],
      [{ name: 'n', message: 'm', target: agent }, /schedule/],
      [{ name: 'n', schedule: '* * * * * *', target: agent }, /message/],
      [{ name: 'n', schedule: '* * * * * *', message: 'm' }, /target/],
      [{ ...job(agent), name: '' }, /name/],
      [{ ...job(agent), message: '' }, /message/],
      [job('no_such_agent'), /target: agent "no_such_agent" does not exist/],
      [{ ...job(agent), timezone: 'Mars/Olympus' }, /timezone "Mars\/Olympus" is not a known IANA time zone/],
      [{ ...job(agent), disabled: 'maybe' }, /disabled/],
      // Unknown fields are named, never dropped (a misspelt time zone would otherwise run in UTC).
      [{ ...job(agent), timeZone: 'Europe/Paris' }, /unknown field "?timeZone"?/],
    ];
    for (const [body, reason] of cases) {
      const res = await req('POST', '/cron', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error, JSON.stringify(body)).toMatch(reason);
    }
    // A rule chain is not an agent.
    const rule = uid('plain_rule');
    expect((await req('POST', '/rules', { ruleChain: { id: rule, name: 'r' }, metadata: { nodes: [{ id: 'e', type: 'end' }], connections: [] } })).statusCode).toBe(201);
    const res = await req('POST', '/cron', job(rule));
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/does not exist/);
  });

  it('timezone defaults to UTC and is settable; nextRunAt follows it', async () => {
    const agent = await newAgent();
    const berlin = await create(job(agent, { schedule: '0 0 9 * * *', timezone: 'Europe/Berlin' }));
    expect(berlin.timezone).toBe('Europe/Berlin');
    const next = new Date(berlin.nextRunAt!);
    const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(next);
    expect(local).toBe('09:00:00');
    expect([7, 8]).toContain(next.getUTCHours());
    const changed = await req('PUT', `/cron/${berlin.id}`, { timezone: 'America/New_York' });
    expect(changed.statusCode).toBe(200);
    expect(changed.json().timezone).toBe('America/New_York');
    expect((await req('PUT', `/cron/${berlin.id}`, { timezone: 'Nowhere/Land' })).statusCode).toBe(400);
  });

  it('PUT /cron/{id}/toggle disables and enables (nextRunAt null while disabled); unknown ids are 404', async () => {
    const agent = await newAgent();
    const created = await create(job(agent));
    const off = await req('PUT', `/cron/${created.id}/toggle`, { disabled: true });
    expect(off.statusCode).toBe(200);
    expect(off.json()).toMatchObject({ id: created.id, disabled: true, nextRunAt: null });
    expect((await req('GET', `/cron/${created.id}`)).json()).toMatchObject({ disabled: true, nextRunAt: null });
    const on = await req('PUT', `/cron/${created.id}/toggle`, { disabled: false });
    expect(on.json()).toMatchObject({ disabled: false, nextRunAt: expect.stringMatching(ISO) });
    expect((await req('PUT', `/cron/${created.id}/toggle`, {})).statusCode).toBe(400);
    expect((await req('PUT', `/cron/${created.id}/toggle`, { disabled: 'x' })).statusCode).toBe(400);
    const missing = await req('PUT', '/cron/nope/toggle', { disabled: true });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'Not found: cron job "nope"' });
    expect((await req('GET', '/cron/nope')).statusCode).toBe(404);
    // Created disabled.
    expect((await create(job(agent, { disabled: true }))).disabled).toBe(true);
  });

  it('PUT /cron/{id} changes fields (validated like a create)', async () => {
    const agent = await newAgent();
    const other = await newAgent();
    const created = await create(job(agent));
    const res = await req('PUT', `/cron/${created.id}`, { name: 'Renamed', schedule: '*/10 * * * * *', message: 'New text', target: other });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: created.id, name: 'Renamed', schedule: '*/10 * * * * *', message: 'New text', target: other, createdAt: created.createdAt });
    expect((await req('PUT', `/cron/${created.id}`, { schedule: '* * * * *' })).json().error).toMatch(/has 5 fields/);
    expect((await req('PUT', `/cron/${created.id}`, { target: 'ghost' })).json().error).toMatch(/target: agent "ghost" does not exist/);
    expect((await req('PUT', '/cron/nope', { name: 'x' })).statusCode).toBe(404);
  });

  it('DELETE /cron/{id} answers {success: true}; the job is gone (404 after)', async () => {
    const agent = await newAgent();
    const created = await create(job(agent));
    const res = await req('DELETE', `/cron/${created.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect((await req('GET', `/cron/${created.id}`)).statusCode).toBe(404);
    expect((await req('DELETE', `/cron/${created.id}`)).statusCode).toBe(404);
  });

  it('every change is announced as {area: "cron", id} on the invalidate channel', async () => {
    const agent = await newAgent();
    const seen: unknown[] = [];
    const unsubscribe = await env().runtime.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => seen.push(m));
    try {
      const created = await create(job(agent));
      await req('PUT', `/cron/${created.id}/toggle`, { disabled: true });
      await req('PUT', `/cron/${created.id}`, { name: 'x' });
      await req('DELETE', `/cron/${created.id}`);
      await new Promise((r) => setTimeout(r, 50));
      expect(seen.filter((m) => (m as { area: string }).area === 'cron')).toEqual(Array(4).fill({ area: 'cron', id: created.id }));
    } finally {
      await unsubscribe();
    }
  });

  it('agent-level routes: the target is the agent in the path, another agent\'s job is 404', async () => {
    const a = await newAgent();
    const b = await newAgent();
    const res = await req('POST', `/agents/${a}/cron`, { name: 'Mine', schedule: '0 0 * * * *', message: 'hello' });
    expect(res.statusCode, res.body).toBe(201);
    const mine = res.json() as Job;
    expect(mine.target).toBe(a);
    const same = await req('POST', `/agents/${a}/cron`, { name: 'Explicit', schedule: '0 0 * * * *', message: 'hello', target: a });
    expect(same.statusCode).toBe(201);
    const wrong = await req('POST', `/agents/${a}/cron`, { name: 'Wrong', schedule: '0 0 * * * *', message: 'hello', target: b });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().error).toMatch(/does not match the agent in the path/);
    const theirs = await create(job(b));

    expect(((await req('GET', `/agents/${a}/cron`)).json() as Job[]).map((j) => j.id)).toEqual([mine.id, same.json().id]);
    expect(((await req('GET', `/agents/${b}/cron`)).json() as Job[]).map((j) => j.id)).toEqual([theirs.id]);
    expect((await req('GET', `/agents/${a}/cron/${mine.id}`)).json()).toEqual(mine);
    expect((await req('GET', `/agents/${a}/cron/${theirs.id}`)).statusCode).toBe(404);
    expect((await req('DELETE', `/agents/${a}/cron/${theirs.id}`)).statusCode).toBe(404);
    expect((await req('PUT', `/agents/${a}/cron/${theirs.id}/toggle`, { disabled: true })).statusCode).toBe(404);
    expect((await req('GET', `/agents/${a}/cron/${theirs.id}/runs`)).statusCode).toBe(404);
    expect((await req('GET', `/cron/${theirs.id}`)).json()).toMatchObject({ disabled: false });

    const toggled = await req('PUT', `/agents/${a}/cron/${mine.id}/toggle`, { disabled: true });
    expect(toggled.json()).toMatchObject({ id: mine.id, disabled: true });
    expect((await req('PUT', `/agents/${a}/cron/${mine.id}`, { target: b })).statusCode).toBe(400);
    expect((await req('DELETE', `/agents/${a}/cron/${mine.id}`)).json()).toEqual({ success: true });
    expect((await req('GET', `/cron/${mine.id}`)).statusCode).toBe(404);

    for (const [method, url] of [
      ['GET', '/agents/ghost/cron'],
      ['POST', '/agents/ghost/cron'],
      ['GET', `/agents/ghost/cron/${theirs.id}`],
    ] as const) {
      const r = await req(method, url, method === 'POST' ? { name: 'n', schedule: '* * * * * *', message: 'm' } : undefined);
      expect(r.statusCode, url).toBe(404);
      expect(r.json().error).toBe('Not found: agent "ghost"');
    }
  });

  it('deleting the agent deletes its jobs', async () => {
    const agent = await newAgent();
    const created = await create(job(agent));
    expect((await req('DELETE', `/agents/${agent}`)).statusCode).toBe(200);
    expect((await req('GET', `/cron/${created.id}`)).statusCode).toBe(404);
  });

  it('GET /cron/{id}/runs is paged, newest tick first, with each fire\'s outcome', async () => {
    const agent = await newAgent();
    const created = await create(job(agent));
    expect((await req('GET', `/cron/${created.id}/runs`)).json()).toEqual({ data: [], total: 0, page: 1, size: 20 });
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    for (let i = 0; i < 3; i++) {
      const row = await insertCronRun(env().db, { cronJobId: created.id, scheduledAt: new Date(t0 + i * 1000), runId: `run${i}` });
      if (i < 2) await finishCronRun(env().db, row!.id, i === 0 ? { status: 'succeeded', outputExcerpt: 'all good' } : { status: 'failed', error: 'provider down' });
    }
    // A second delivery of a tick inserts nothing.
    expect(await insertCronRun(env().db, { cronJobId: created.id, scheduledAt: new Date(t0), runId: 'again' })).toBeUndefined();
    const page = (await req('GET', `/cron/${created.id}/runs`)).json();
    expect(page).toMatchObject({ total: 3, page: 1, size: 20 });
    expect(page.data.map((r: { scheduledAt: string }) => r.scheduledAt)).toEqual([2, 1, 0].map((i) => new Date(t0 + i * 1000).toISOString()));
    expect(page.data[0]).toEqual({
      id: expect.any(Number),
      cronJobId: created.id,
      scheduledAt: new Date(t0 + 2000).toISOString(),
      runId: 'run2',
      startedAt: expect.stringMatching(ISO),
      finishedAt: null,
      status: 'running',
      outputExcerpt: null,
      error: null,
      deliveryStatus: null,
      deliveryError: null,
    });
    expect(page.data[1]).toMatchObject({ status: 'failed', error: 'provider down', finishedAt: expect.stringMatching(ISO) });
    expect(page.data[2]).toMatchObject({ status: 'succeeded', outputExcerpt: 'all good' });
    const second = (await req('GET', `/cron/${created.id}/runs?page=2&size=1`)).json();
    expect(second).toMatchObject({ total: 3, page: 2, size: 1 });
    expect(second.data.map((r: { runId: string }) => r.runId)).toEqual(['run1']);
    expect((await req('GET', `/agents/${agent}/cron/${created.id}/runs?size=2`)).json().data.length).toBe(2);
    expect((await req('GET', `/cron/${created.id}/runs?size=0`)).statusCode).toBe(400);
    expect((await req('GET', `/cron/${created.id}/runs?page=0`)).statusCode).toBe(400);
    expect((await req('GET', '/cron/nope/runs')).statusCode).toBe(404);
    // The job mirrors its newest tick.
    expect((await req('GET', `/cron/${created.id}`)).json()).toMatchObject({ lastRunAt: new Date(t0 + 2000).toISOString(), lastStatus: 'running' });
  });

  it('deliver {platform, accountId, chatId} is stored and validated against the channel accounts', async () => {
    const agent = await newAgent();
    await upsertChannelAccount(env().db, {
      platform: 'chat_a',
      id: 'team',
      name: 'Team',
      enabled: true,
      settings: {},
      secretsSealed: null,
      apiKeyHash: null,
      fileHmac: null,
    });
    const deliver = { platform: 'chat_a', accountId: 'team', chatId: 'room-42' };
    // Only through an account an admin bound to the agent (bindings are admin-only).
    const unbound = await req('POST', '/cron', job(agent, { deliver }));
    expect(unbound.statusCode).toBe(403);
    expect(unbound.json().error).toMatch(new RegExp(`agent "${agent}" may not send through chat_a account "team": no binding connects them`));
    const bound = await req('PUT', '/bindings', { bindings: [{ agentId: agent, match: { channel: 'chat_a', accountId: 'team' } }] });
    expect(bound.statusCode, bound.body).toBe(200);
    const created = await create(job(agent, { deliver }));
    expect(created.deliver).toEqual(deliver);
    expect((await req('GET', `/cron/${created.id}`)).json().deliver).toEqual(deliver);
    const cleared = await req('PUT', `/cron/${created.id}`, { deliver: null });
    expect(cleared.json().deliver).toBeNull();
    const cases: Array<[unknown, RegExp]> = [
      [{ ...deliver, platform: 'fax' }, /deliver.platform "fax" is not a messaging platform/],
      [{ ...deliver, platform: 'api' }, /deliver.platform "api" is not a messaging platform/],
      [{ ...deliver, accountId: 'other' }, /deliver.accountId "other" is not a chat_a account/],
      [{ platform: 'chat_a', accountId: 'team' }, /chatId/],
    ];
    for (const [d, reason] of cases) {
      const res = await req('POST', '/cron', job(agent, { deliver: d }));
      expect(res.statusCode, JSON.stringify(d)).toBe(400);
      expect(res.json().error).toMatch(reason);
    }
  });
  it('deliver reaches only the chats the account admits: an allowlist account only those in allow_from (403 otherwise)', async () => {
    const agent = await newAgent();
    await upsertChannelAccount(env().db, {
      platform: 'chat_a',
      id: 'listed',
      name: 'Listed',
      enabled: true,
      settings: { dm_policy: 'allowlist', group_policy: 'disabled', allow_from: ['room-1'] },
      secretsSealed: null,
      apiKeyHash: null,
      fileHmac: null,
    });
    const bound = await req('PUT', '/bindings', { bindings: [{ agentId: agent, match: { channel: 'chat_a', accountId: 'listed' } }] });
    expect(bound.statusCode, bound.body).toBe(200);
    const other = await req('POST', '/cron', job(agent, { deliver: { platform: 'chat_a', accountId: 'listed', chatId: 'someone-else' } }));
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toMatch(/chat "someone-else" is not in the allow_from of chat_a account "listed"/);
    const created = await create(job(agent, { deliver: { platform: 'chat_a', accountId: 'listed', chatId: 'room-1' } }));
    const moved = await req('PUT', `/cron/${created.id}`, { deliver: { platform: 'chat_a', accountId: 'listed', chatId: 'room-2' } });
    expect(moved.statusCode).toBe(403);
  });
  it("an agent's heartbeat is the cron job heartbeat:<id>: made by a save of the agent, announced, refused by the cron routes, disabled when removed", async () => {
    const agent = uid('beat_agent');
    const dsl = agentDsl(agent);
    const withHeartbeat = (heartbeat: unknown) => ({
      ...dsl,
      metadata: { ...dsl.metadata, nodes: dsl.metadata.nodes.map((n) => (n.type === 'ai/agent' ? { ...n, configuration: { ...n.configuration, heartbeat } } : n)) },
    });
    await upsertChannelAccount(env().db, { platform: 'chat_a', id: 'beat', name: 'Beat', enabled: true, settings: {}, secretsSealed: null, apiKeyHash: null, fileHmac: null });
    const seen: unknown[] = [];
    const unsubscribe = await env().runtime.bus.pubsub.subscribe(PubSubChannels.invalidate, (m) => seen.push(m));
    try {
      // On create the agent has no binding yet: only the account is checked (every tick checks the binding).
      const created = await req('POST', '/agents', withHeartbeat({ interval: '1h', timezone: 'Asia/Tokyo', target: 'chat_a:beat:room' }));
      expect(created.statusCode, created.body).toBe(201);
      const id = `heartbeat:${agent}`;
      const job = (await req('GET', `/cron/${id}`)).json() as Job;
      expect(job).toMatchObject({ id, name: 'heartbeat', target: agent, schedule: '0 0 */1 * * *', timezone: 'Asia/Tokyo', disabled: false, deliver: { platform: 'chat_a', accountId: 'beat', chatId: 'room' } });
      expect(job.message).toContain('HEARTBEAT_OK');
      // An agent setting, not a job to manage: out of the lists, readable by id.
      expect(((await req('GET', '/cron')).json() as Job[]).map((j) => j.id)).not.toContain(id);
      expect(((await req('GET', `/agents/${agent}/cron`)).json() as Job[]).map((j) => j.id)).not.toContain(id);
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toContainEqual({ area: 'cron', id });

      // On update the binding is checked, as a cron job's deliver is.
      const unbound = await req('PUT', `/agents/${agent}`, withHeartbeat({ interval: '30m', target: 'chat_a:beat:room' }));
      expect(unbound.statusCode).toBe(403);
      expect(unbound.json().error).toMatch(/may not send through chat_a account "beat": no binding connects them/);
      const badAccount = await req('PUT', `/agents/${agent}/heartbeat`, { interval: '30m', target: 'chat_a:gone:room' });
      expect(badAccount.statusCode).toBe(400);
      expect(badAccount.json().error).toMatch(/heartbeat.target account "gone" is not a chat_a account/);
      const badShape = await req('PUT', `/agents/${agent}/heartbeat`, { interval: '30m', every: '1h' });
      expect(badShape.statusCode).toBe(400);
      expect((await req('PUT', `/agents/${agent}/heartbeat`, { interval: '30m', prompt: 'anything?' })).json()).toMatchObject({ schedule: '0 */30 * * * *', heartbeat: { prompt: 'anything?' } });
      expect((await req('GET', `/cron/${id}`)).json()).toMatchObject({ message: 'anything?', deliver: null });

      // Derived from the DSL: the cron routes would change what the next save reverts.
      for (const [method, url, body] of [['PUT', `/cron/${id}`, { name: 'x' }], ['PUT', `/cron/${id}/toggle`, { disabled: true }], ['DELETE', `/cron/${id}`, undefined]] as const) {
        const res = await req(method, url, body);
        expect(res.statusCode, `${method} ${url}`).toBe(400);
        expect(res.json().error).toMatch(/is the heartbeat of agent .*change it in the agent/);
      }
      expect((await req('DELETE', `/agents/${agent}/heartbeat`)).json()).toEqual({ success: true });
      expect((await req('GET', `/cron/${id}`)).json()).toMatchObject({ disabled: true, nextRunAt: null });
      expect((await req('GET', `/agents/${agent}/heartbeat`)).json()).toEqual({ heartbeat: null, cronJobId: id, schedule: null, nextTickAt: null });
    } finally {
      await unsubscribe();
    }
  });
});
