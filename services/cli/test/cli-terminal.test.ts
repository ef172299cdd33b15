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

function screen(window: string): string {
  return tmux('capture-pane', '-p', '-t', `cli:${window}`)
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
    await waitFor(async () => /\(interrupted\)\nyou>$/.test(screen(c)), 10_000, 50);
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

  it('lists are aligned tables on a terminal', async () => {
    await new AgentryClient({ url: gw.url }).agents.create(agentDsl('a-much-longer-agent-id', 'Longer'));
    const w = open(`${agentry} agents list; ${agentry} cron list`);
    await waitFor(async () => screen(w).includes('[exit'), 10_000, 50);
    expect(screen(w)).toBe(['ID                      NAME    ENABLED', 'a-much-longer-agent-id  Longer  true', 'slow                    slow    true', 'no cron jobs', '[exit 0]'].join('\n'));
  });

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
    expect(lines[0]).toMatch(/^agent, \d{4}-\d\d-\d\dT[\d:.]+Z \.\. \d{4}-\d\d-\d\dT[\d:.]+Z$/);
    // The suite's other chats (agent `slow`) may be rows too: the metered row, header and total are checked.
    expect(lines[1]).toMatch(/^AGENT +PROMPT +COMPLETION +TOTAL +CALLS$/);
    expect(lines).toContain('metered    1200          34   1234      1');
    expect(lines.at(-2)).toMatch(/^total +\d+ +\d+ +\d+ +\d+$/);
    expect(lines.at(-1)).toBe('[exit 0]');
  });
});
