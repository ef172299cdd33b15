import { expect, it } from 'vitest';
import { agentDsl, createAgent, describeOnBothEngines, uid, type Env } from './resources-harness.js';

/** An admin's agents are shared with everyone (issue 35); the list shows it to the owner and admins. */
const EVERYONE = { everyone: true, users: [], roles: [], apiAccounts: [] };

/** `ruleChain.disabled`: stored and shown, left out of `/models`, refused by chat; on both engines. */
describeOnBothEngines('disabled agents', (env: () => Env) => {
  const req = (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) => env().req(method, `/api/v1${url}`, body);
  const disabledDsl = (id: string, disabled: boolean) => {
    const dsl = agentDsl(id);
    return { ...dsl, ruleChain: { ...dsl.ruleChain, disabled } };
  };
  const modelIds = async () => (await req('GET', '/models')).json().data.map((m: { id: string }) => m.id);
  const chat = (model: string) => req('POST', '/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }] });

  it('an agent created with ruleChain.disabled keeps it: GET shows it and the list marks it', async () => {
    const off = uid('off');
    const on = uid('on');
    const created = await req('POST', '/agents', disabledDsl(off, true));
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().ruleChain.disabled).toBe(true);
    expect((await req('GET', `/agents/${off}`)).body).toBe(JSON.stringify(disabledDsl(off, true)));
    await createAgent(env, on);

    const items = (await req('GET', '/agents?size=100')).json().data;
    expect(items).toContainEqual({ ruleChain: { id: off, name: `Agent ${off}`, disabled: true, owner: 'admin', audience: EVERYONE } });
    // Absent means enabled: the spec's item {id, name}, with the owner the UI shows.
    expect(items).toContainEqual({ ruleChain: { id: on, name: `Agent ${on}`, owner: 'admin', audience: EVERYONE } });
  });

  it('a flag that is not a boolean is 400', async () => {
    const res = await req('POST', '/agents', { ...agentDsl(uid('bad')), ruleChain: { ...agentDsl('x').ruleChain, id: uid('bad'), disabled: 'yes' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/ruleChain.disabled/);
  });

  it('a disabled agent is left out of GET /models and chat to it is 403 naming it, starting no run', async () => {
    const id = uid('quiet');
    await createAgent(env, id);
    expect(await modelIds()).toContain(id);

    const off = await req('PUT', `/agents/${id}`, disabledDsl(id, true));
    expect(off.statusCode, off.body).toBe(200);
    expect(await modelIds()).not.toContain(id);
    const refused = await chat(id);
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ error: { message: `Not allowed: agent "${id}" is disabled`, type: 'permission_error', param: null, code: 'forbidden' } });
    const runs = await env().db.selectFrom('runs').select('id').where('agent_id', '=', id).execute();
    expect(runs).toEqual([]);

    const on = await req('PUT', `/agents/${id}`, disabledDsl(id, false));
    expect(on.statusCode).toBe(200);
    expect((await req('GET', `/agents/${id}`)).json().ruleChain.disabled).toBe(false);
    expect(await modelIds()).toContain(id);
  });
});
