import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentryClient } from '@agentry/client';
import { waitFor } from '@agentry/testing';
import { BIN, agentDsl, startGateway, tempHome, type TestGateway } from './support.js';

/**
 * `agentry` on a real terminal: a tmux server of our own (its own socket) runs the bin in a
 * pane, and the test reads the screen as a user would see it. Shows that chat streams tokens
 * as they arrive (the screen holds part of the answer while the rest is still coming), the
 * spinner, the conversation loop with typed lines, and tables.
 */
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const suite = hasTmux ? describe : process.env.CI === 'true' ? describe : describe.skip;
if (!hasTmux) console.warn('\n!!! SKIPPING the terminal tests of the CLI: tmux is not installed\n');

const SOCKET = `agentry-cli-test-${process.pid}`;
let gw: TestGateway;
let home: string;
let pane = 0;

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', SOCKET, '-f', '/dev/null', ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: home, TERM: 'xterm-256color', AGENTRY_URL: gw.url },
  });
}

/** Runs a shell command in a new 100x20 window; answers its name. The window stays after the command ends. */
function open(command: string): string {
  const name = `w${pane++}`;
  const shell = `${command}; echo "[exit $?]"; sleep 60`;
  if (pane === 1) tmux('new-session', '-d', '-s', 'cli', '-n', name, '-x', '100', '-y', '20', shell);
  else tmux('new-window', '-d', '-t', 'cli', '-n', name, shell);
  return name;
}

/** The pane's text; wrapped lines joined (-J), so a long line reads as one. */
/** Waits until the screen satisfies `ok`; a timeout shows the screen as it was. */
async function waitScreen(window: string, ok: (s: string) => boolean, timeoutMs = 10_000): Promise<string> {
  try {
    await waitFor(async () => ok(screen(window)), timeoutMs, 50);
  } catch (err) {
    throw new Error(`${(err as Error).message}; the screen:\n${screen(window)}`);
  }
  return screen(window);
}

function screen(window: string): string {
  return tmux('capture-pane', '-p', '-J', '-t', `cli:${window}`)
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .trim();
}

const agentry = `'${process.execPath}' '${BIN}'`;

suite('agentry on a terminal (tmux)', () => {
  beforeAll(async () => {
    if (!hasTmux) throw new Error('tmux is not installed (CI=true: the terminal tests must not be skipped)');
    gw = await startGateway();
    home = tempHome();
    await new AgentryClient({ url: gw.url }).agents.create(agentDsl('slow'));
  }, 60_000);

  afterAll(async () => {
    if (hasTmux && gw) spawnSync('tmux', ['-L', SOCKET, 'kill-server']);
    await gw?.stop();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  it('chat streams the answer token by token, after a spinner', async () => {
    const words = ['alpha ', 'beta ', 'gamma ', 'delta ', 'epsilon ', 'omega'];
    gw.fake.script({ text: words, delayMs: 1200, chunkDelayMs: 400 });
    const w = open(`${agentry} chat -a slow 'stream please'`);

    // Every distinct screen, in order, until the command has ended.
    const screens: string[] = [];
    await waitFor(
      async () => {
        const s = screen(w);
        if (s !== screens.at(-1)) screens.push(s);
        return s.includes('[exit ');
      },
      20_000,
      40,
    );
    const final = screens.at(-1)!;
    expect(final).toBe('alpha beta gamma delta epsilon omega\n[exit 0]');

    // The spinner showed while nothing had arrived, and is gone from the final screen.
    expect(screens.some((s) => /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] thinking$/.test(s))).toBe(true);
    // Parts of the answer were on the screen while the rest was still coming: one screen per
    // token count, growing.
    const partial = screens.filter((s) => s.startsWith('alpha') && !s.includes('[exit'));
    const counts = [...new Set(partial.map((s) => s.split(/\s+/).filter((x) => words.map((w) => w.trim()).includes(x)).length))];
    expect(counts.length).toBeGreaterThanOrEqual(4);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(counts[0]).toBeLessThan(words.length);
  });

  it('the spinner names the attempt while the server retries the provider, and is gone once the answer comes (issue 42)', async () => {
    gw.fake.reset();
    gw.fake.script({ status: 503, body: { error: { message: 'warming up' } } }, { text: 'recovered', delayMs: 1500 });
    const w = open(`${agentry} chat -a slow 'retry please'`);
    const screens: string[] = [];
    await waitFor(
      async () => {
        const s = screen(w);
        if (s !== screens.at(-1)) screens.push(s);
        return s.includes('[exit ');
      },
      20_000,
      40,
    );
    expect(screens.some((s) => /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] thinking \(attempt 2 of 3: provider error \(HTTP 503\)\)$/.test(s))).toBe(true);
    expect(screens.at(-1)).toBe('recovered\n[exit 0]');
  });

  it('without a message: a conversation in one session, a turn per typed line', async () => {
    const w = open(`${agentry} chat -a slow -s tty-1`);
    await waitFor(async () => screen(w).endsWith('you>'), 10_000, 50);
    expect(screen(w)).toMatch(/^chatting with slow in session tty-1 \(/);

    tmux('send-keys', '-t', `cli:${w}`, 'first line', 'Enter');
    await waitFor(async () => /^first line$/m.test(screen(w).split('you> first line')[1] ?? '') && screen(w).endsWith('you>'), 10_000, 50);
    tmux('send-keys', '-t', `cli:${w}`, 'second line', 'Enter');
    await waitFor(async () => /^second line$/m.test(screen(w).split('you> second line')[1] ?? '') && screen(w).endsWith('you>'), 10_000, 50);
    // The second turn carried the first: one session.
    expect(gw.fake.requests.at(-1)!.body.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['first line', 'second line']);

    tmux('send-keys', '-t', `cli:${w}`, '/exit', 'Enter');
    await waitFor(async () => screen(w).includes('[exit 0]'), 10_000, 50);
  });

  it('Ctrl-C stops an answer: the CLI leaves with 130 and the server cancels the run', async () => {
    gw.fake.reset();
    gw.fake.script({ text: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 250 });
    const w = open(`${agentry} chat -a slow 'a long answer'`);
    await waitFor(async () => /^w0 w1/.test(screen(w)), 10_000, 50);
    tmux('send-keys', '-t', `cli:${w}`, 'C-c');
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toMatch(/^w0 w1 .*\n\[exit 130\]$/s);
    expect(screen(w)).not.toMatch(/w39/);
    // The provider request is aborted: the gateway saw the client go and cancelled the run.
    await gw.fake.waitForAbort({ timeoutMs: 5_000 });

    // In a conversation, Ctrl-C stops the answer and the prompt comes back.
    gw.fake.script({ text: Array.from({ length: 40 }, (_, i) => `v${i} `), chunkDelayMs: 250 });
    const c = open(`${agentry} chat -a slow`);
    await waitFor(async () => screen(c).endsWith('you>'), 10_000, 50);
    tmux('send-keys', '-t', `cli:${c}`, 'go on', 'Enter');
    await waitFor(async () => /v0 v1/.test(screen(c)), 10_000, 50);
    tmux('send-keys', '-t', `cli:${c}`, 'C-c');
    await waitFor(async () => /\(interrupted; \/retry asks again\)\nyou>$/.test(screen(c)), 10_000, 50);
    tmux('send-keys', '-t', `cli:${c}`, 'C-d');
    await waitFor(async () => screen(c).endsWith('[exit 0]'), 10_000, 50);
  });

  it('login asks for the password without echoing it', async () => {
    const w = open(`${agentry} login`);
    await waitFor(async () => screen(w).endsWith('username:'), 10_000, 50);
    tmux('send-keys', '-t', `cli:${w}`, 'admin', 'Enter');
    await waitFor(async () => screen(w).endsWith('password for admin:'), 10_000, 50);
    tmux('send-keys', '-t', `cli:${w}`, 'admin', 'Enter');
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toMatch(/^username: admin\npassword for admin:\nlogged in to http:\/\/127\.0\.0\.1:\d+ as admin until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n\[exit 0\]$/);
  });

  it('login asks again after a wrong password, as sudo does', async () => {
    const w = open(`${agentry} login -u admin`);
    await waitFor(async () => screen(w).endsWith('password for admin:'), 10_000, 50);
    tmux('send-keys', '-t', `cli:${w}`, 'not-the-password', 'Enter');
    await waitScreen(w, (s) => /try again \(2 of 3\)\npassword for admin:$/.test(s));
    tmux('send-keys', '-t', `cli:${w}`, 'admin', 'Enter');
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toMatch(/^password for admin:\n.*wrong username or password.*; try again \(2 of 3\)\npassword for admin:\nlogged in to .* as admin until .*\n\[exit 0\]$/);
  });

  it('lists are aligned tables on a terminal', async () => {
    await new AgentryClient({ url: gw.url }).agents.create(agentDsl('a-much-longer-agent-id', 'Longer'));
    const w = open(`${agentry} agents list; ${agentry} cron list`);
    await waitFor(async () => screen(w).includes('[exit'), 10_000, 50);
    expect(screen(w)).toBe(['ID                      NAME    ENABLED', 'a-much-longer-agent-id  Longer  true', 'slow                    slow    true', 'no cron jobs yet: create one with agentry cron create -a <agent> --name <name> --schedule "0 0 9 * * *" -m <message>', '[exit 0]'].join('\n'));
  });

  // Issue 23, items 1-5: what a newcomer meets when something goes wrong.
  const upstream500 = { status: 500, body: { error: { message: 'fake upstream exploded', type: 'server_error', param: null, code: null } } };
  const type = (w: string, line: string) => {
    tmux('send-keys', '-t', `cli:${w}`, '-l', line);
    tmux('send-keys', '-t', `cli:${w}`, 'Enter');
  };

  it('a failed turn prints a human error and the conversation goes on (provider 500, broken stream); exit 1 at the end', async () => {
    gw.fake.reset();
    const w = open(`${agentry} chat -a slow -s tty-fail`);
    await waitFor(async () => screen(w).endsWith('you>'), 10_000, 50);
    type(w, 'first works');
    await waitScreen(w, (s) => /\nfirst works\nyou>$/.test(s));

    // The provider answers 500 to every attempt (the gateway retries twice).
    gw.fake.script(upstream500, upstream500, upstream500);
    type(w, 'second fails');
    await waitScreen(w, (s) => /\nyou>$/.test(s.split('you> second fails')[1] ?? ''), 20_000);
    expect(screen(w).split('you> second fails')[1]).toBe("\nerror: the model provider 'fake' failed: HTTP 500 fake upstream exploded (3 attempts)\n(/retry sends it again)\nyou>");

    // A stream that breaks after it started: the partial answer, then the error, then the prompt.
    gw.fake.script({ failAfterChunks: 2 });
    type(w, 'third breaks');
    await waitScreen(w, (s) => /\nyou>$/.test(s.split('you> third breaks')[1] ?? ''), 20_000);
    expect(screen(w).split('you> third breaks')[1]).toMatch(/\nerror: the model provider 'fake' failed: the answer broke off after it had started: .+\n\(\/retry sends it again\)\nyou>$/);

    // The next typed line is still a message to the agent, not a shell command.
    type(w, 'echo fourth still here');
    await waitScreen(w, (s) => /\necho fourth still here\nyou>$/.test(s));
    expect(gw.fake.requests.at(-1)!.body.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['first works', 'echo fourth still here']);

    type(w, '/exit');
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toMatch(/\nyou> \/exit\nerror: 2 of 4 turns failed\n\[exit 1\]$/);
  });

  it('/retry sends a failed turn again; an unknown /command is answered here; Ctrl-C at the prompt names the session to resume', async () => {
    gw.fake.reset();
    const w = open(`${agentry} chat -a slow -s tty-retry`);
    await waitFor(async () => screen(w).endsWith('you>'), 10_000, 50);
    type(w, '/retry');
    await waitScreen(w, (s) => /you> \/retry\nnothing to retry: the last turn got its answer\nyou>$/.test(s));

    gw.fake.script(upstream500, upstream500, upstream500);
    type(w, 'please answer');
    await waitScreen(w, (s) => /\(\/retry sends it again\)\nyou>$/.test(s), 20_000);
    // The provider is back: /retry sends the same message, and its answer (the fake echoes) comes.
    type(w, '/retry');
    await waitScreen(w, (s) => /you> \/retry\nretrying: please answer\nplease answer\nyou>$/.test(s), 20_000);

    // A typo of a command is not a message: the model is not asked, the list of commands is shown.
    const asked = gw.fake.requests.length;
    type(w, '/retyr');
    await waitScreen(w, (s) => /you> \/retyr\nunknown command \/retyr \(not sent to the agent\): \/new .*\/retry .*\nyou>$/.test(s));
    // A path is a message, and // sends a leading slash.
    type(w, '//help me');
    await waitScreen(w, (s) => /you> \/\/help me\n\/help me\nyou>$/.test(s));
    expect(gw.fake.requests.length).toBe(asked + 1);
    expect(gw.fake.requests.at(-1)!.body.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['please answer', '/help me']);

    tmux('send-keys', '-t', `cli:${w}`, 'C-c');
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toMatch(/\nsession tty-retry; resume it with: agentry chat -a slow -s tty-retry\n(.*\n)?\[exit 130\]$/);
  });

  it('piped: every line is a turn, a failure does not stop the rest, the exit status says one failed; --verbose shows the detail', async () => {
    gw.fake.reset();
    gw.fake.script({ text: 'one' }, upstream500, upstream500, upstream500, { text: 'three' });
    const w = open(`printf 'a\\nb\\nc\\n' | ${agentry} --verbose chat -a slow`);
    await waitFor(async () => screen(w).includes('[exit '), 30_000, 50);
    expect(screen(w)).toBe(
      [
        'one',
        "error: the model provider 'fake' failed: HTTP 500 fake upstream exploded (3 attempts)",
        '  detail: chain "slow", node "agent" (ai/agent): Upstream failure: provider "fake" (model fake-model): HTTP 500: fake upstream exploded (3 attempts)',
        'three',
        'error: 1 of 3 turns failed',
        '[exit 1]',
      ].join('\n'),
    );
  });

  it('agents show works (the verb the help names); -c takes a security.users key and whoami lists every source', async () => {
    const shown = open(`${agentry} agents show slow --json | head -3`);
    await waitFor(async () => screen(shown).includes('[exit '), 10_000, 50);
    expect(screen(shown)).toMatch(/^\{\n {2}"ruleChain": \{\n {4}"id": "slow",\n\[exit 0\]$/);
    // On a terminal without --json: a summary a person reads at a glance, and how to get the rest.
    const summary = open(`${agentry} agents show slow`);
    await waitFor(async () => screen(summary).includes('[exit '), 10_000, 50);
    expect(screen(summary)).toBe(
      [
        'agent   slow, enabled',
        'model   fake',
        'tools   read',
        'skills  none',
        'prompt  You are a test agent.',
        'nodes   2: ai/agent, end',
        'the whole definition: agentry agents show slow --json',
        '[exit 0]',
      ].join('\n'),
    );

    const config = `${home}/server-config.yaml`;
    fs.writeFileSync(config, 'security:\n  users:\n    admin: "admin:sk-from-the-users-entry-0042"\n');
    const w = open(`${agentry} whoami -c ${config}`);
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    const text = screen(w);
    expect(text).toContain('credential  API key sk-...0042 from user "admin" of security.users in ~/server-config.yaml (--config)');
    expect(text).toMatch(/sources {5}\(first found wins\)\n {2}env AGENTRY_API_KEY: nothing\n {2}env SERVICE_API_KEY: nothing\n {2}config file ~\/server-config\.yaml \(--config\): API key sk-\.\.\.0042 \(user "admin" of security\.users\) {2}<- in use\n {2}login cache ~\/\.config\/agentry\/credentials\.json: JWT of admin {2}\(not used\)/);
    expect(text).not.toContain('sk-from-the-users-entry-0042');
  });

  // Before the apikey test: once a key exists, a chat without one is refused.
  it('usage is a table of the groups and a total on a terminal', async () => {
    const client = new AgentryClient({ url: gw.url });
    await client.agents.create(agentDsl('metered'));
    gw.fake.script({ text: 'ok', usage: { prompt_tokens: 1200, completion_tokens: 34 } });
    await client.chat.complete({ model: 'metered', messages: [{ role: 'user', content: 'count' }] });
    const has = async () => (await client.usage.get({ groupBy: 'agent' })).data.some((r) => r.key === 'metered');
    await waitFor(has, 5_000, 50);
    const w = open(`${agentry} usage -g agent`);
    await waitFor(async () => screen(w).includes('[exit'), 10_000, 50);
    const lines = screen(w).split('\n');
    expect(lines[0]).toMatch(/^by agent, from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    // The suite's other chats (agent `slow`) may be rows too: the metered row, header and total are checked.
    expect(lines[1]).toMatch(/^AGENT +PROMPT +COMPLETION +TOTAL +CALLS$/);
    expect(lines).toContain('metered    1200          34   1234      1');
    expect(lines.at(-2)).toMatch(/^total +\d+ +\d+ +\d+ +\d+$/);
    expect(lines.at(-1)).toBe('[exit 0]');
  });

  it('apikey show masks the key unless --reveal', async () => {
    // Logged in as admin by the login test above.
    const made = open(`${agentry} apikey regenerate > ${home}/key.txt`);
    await waitFor(async () => screen(made).includes('[exit '), 10_000, 50);
    const key = fs.readFileSync(`${home}/key.txt`, 'utf8').trim();
    expect(key).toMatch(/^sk-/);

    const w = open(`${agentry} apikey show; ${agentry} apikey show --reveal`);
    await waitFor(async () => screen(w).includes('[exit '), 10_000, 50);
    expect(screen(w)).toBe([`sk-...${key.slice(-4)}`, '(masked: --reveal prints the whole key)', key, '[exit 0]'].join('\n'));
  });

  it('doctor on a terminal: a line per check; a failure carries its fix', async () => {
    const w = open(`${agentry} doctor`);
    const text = await waitScreen(w, (s) => s.includes('[exit '), 20_000);
    expect(text).toMatch(/^ok {4}server {6}http:\/\/127\.0\.0\.1:\d+ answers\nok {4}version {5}\d+\.\d+\.\d+\n/);
    // Open, with admin/admin: said, but no failure (it stops no chat).
    expect(text).toContain(
      '\nok    auth        open: no login required (security.requireAuth is false); admin still has the default password: change it (agentry passwd -u admin) before requiring logins\n',
    );
    expect(text).toContain('\nok    credential  chat works with the JWT of admin from the login cached in ~/.config/agentry/credentials.json\n');
    expect(text).toMatch(/\nok {4}provider {4}fake answers \(\w+, \d+ ms\)\n/);
    expect(text).toMatch(/\nok {4}ready {7}database \(\d+ ms\)/);
    expect(text).toMatch(/\n\[exit 0\]$/);

    // A key the server does not know: the failure, its fix on the line under it, exit 1.
    const bad = open(`AGENTRY_API_KEY=sk-unknown-to-this-server-0000 ${agentry} doctor`);
    const failed = await waitScreen(bad, (s) => s.includes('[exit '), 20_000);
    expect(failed).toMatch(/\nFAIL {2}credential {2}the credential from env AGENTRY_API_KEY is refused: .+\n {6}fix: set AGENTRY_API_KEY to a key the server knows \(agentry apikey regenerate\)\n/);
    expect(failed).toMatch(/\nerror: 1 check failed\n\[exit 1\]$/);
  });
});
