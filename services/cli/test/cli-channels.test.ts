import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeTelegram, waitFor, type FakePlatform } from '@agentry/testing';
import { runCli, startGateway, tempHome, type CliOptions, type TestGateway } from './support.js';

/**
 * `agentry channels list` and `agentry send` against a real gateway whose chat_d account talks
 * to a fake Telegram Bot API (spec: "Channels and bindings", "Outbound messages").
 */
let gw: TestGateway;
let tg: FakePlatform;
let home: string;
const cli = (args: string[], opts: CliOptions = {}) => runCli(args, home, gw.url, opts);

beforeAll(async () => {
  tg = await startFakeTelegram();
  gw = await startGateway({
    config: ['channels:', '  chat_d:', '    accounts:', `      bot: ${JSON.stringify({ name: 'Ops bot', ...tg.account })}`],
  });
  home = tempHome();
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await tg?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

describe('channels', () => {
  it('channels list shows every platform account, never a secret', async () => {
    const list = await cli(['channels', 'list']);
    expect(list.code, list.stderr).toBe(0);
    const view = list.json<{ platforms: Record<string, { enabled: boolean; accounts: Record<string, unknown> }> }>();
    expect(view.platforms.chat_d).toMatchObject({ enabled: true, accounts: { bot: { id: 'bot', name: 'Ops bot', enabled: true, hasSecret: true } } });
    for (const [key, value] of Object.entries(tg.account)) {
      if (/token|secret|key/i.test(key)) expect(list.stdout).not.toContain(value);
    }
  });

  it('send delivers a text message through the account (argument words, or stdin with "-")', async () => {
    const sent = await cli(['send', 'chat_d', '4242', 'Deploy', 'finished', '--account', 'bot']);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.json()).toMatchObject({ success: true });
    await waitFor(async () => tg.sent.find((m) => m.chatId === '4242' && m.text === 'Deploy finished'), 10_000);

    const piped = await cli(['send', 'chat_d', '4242', '-'], { input: 'line one\nline two\n' });
    expect(piped.code, piped.stderr).toBe(0);
    await waitFor(async () => tg.sent.find((m) => m.text === 'line one\nline two'), 10_000);
  });

  it('refuses what cannot be sent: exit 1 with the server message, exit 2 for an empty message', async () => {
    const unknownAccount = await cli(['send', 'chat_d', '4242', 'hi', '--account', 'ghost']);
    expect(unknownAccount.code).toBe(1);
    expect(unknownAccount.stderr).toMatch(/^error: .*ghost/);

    const api = await cli(['send', 'api', '1', 'hi']);
    expect(api.code).toBe(1);
    expect(api.stderr).toMatch(/^error: .*api platform/);

    const empty = await cli(['send', 'chat_d', '4242', ' ']);
    expect(empty.code).toBe(2);
  });
});
