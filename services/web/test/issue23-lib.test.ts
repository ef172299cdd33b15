import { describe, expect, it } from 'vitest';
import { humanError } from '../app/lib/errors.js';
import { distinctTitles, filterItems, plainTitle } from '../app/lib/lists.js';
import { chatStillOpen, notOwnerReason, adminOnlyReason } from '../app/lib/permissions.js';
import { turnsFromHistory } from '../app/lib/turns.js';

/** The pure pieces behind issue 23's web items: error wording, lists, titles, permissions, kept failed turns. */

describe('humanError', () => {
  it("says which model provider failed and keeps the chain's wording as the detail", () => {
    const raw = 'chain "support", node "node_agent" (ai/agent): Upstream failure: provider "fake" (model fake-model): HTTP 500: fake upstream exploded (3 attempts)';
    expect(humanError(raw)).toEqual({ summary: "The model provider 'fake' failed: HTTP 500 fake upstream exploded (3 attempts)", detail: raw });
  });

  it('drops the registry prefix, names an unreachable gateway, and leaves plain text alone', () => {
    expect(humanError('Invalid input: title: must not be blank')).toEqual({ summary: 'title: must not be blank', detail: 'Invalid input: title: must not be blank' });
    expect(humanError('Not allowed: agent "x" belongs to another user')).toEqual({ summary: 'Not allowed: agent "x" belongs to another user', detail: null });
    expect(humanError('Failed to fetch').summary).toMatch(/gateway could not be reached/);
    expect(humanError('the name is taken')).toEqual({ summary: 'the name is taken', detail: null });
  });
});

describe('lists', () => {
  it('filters by every word, any case, over the given fields', () => {
    const items = [{ n: 'Support bot', o: 'alice' }, { n: 'Sales', o: 'bob' }];
    expect(filterItems(items, 'SUP ali', (i) => [i.n, i.o])).toEqual([items[0]]);
    expect(filterItems(items, '  ', (i) => [i.n])).toEqual(items);
  });

  it('tells repeated titles apart by time and shortens long ones to their first words', () => {
    const s = (id: string, title: string) => ({ id, title, sessionKey: `k-${id}`, updatedAt: `2026-11-26T0${id}:00:00Z` });
    const titles = distinctTitles([s('1', 'hello'), s('2', 'hello'), s('3', 'one two three four five six seven eight nine'), s('4', '')], (iso) => iso.slice(11, 16));
    expect([...titles.values()]).toEqual(['hello · 01:00', 'hello · 02:00', 'one two three four five six seven eight…', 'k-4']);
  });

  it('shows a title written in Markdown as its text', () => {
    expect(plainTitle('**Fix** the `build` _now_')).toBe('Fix the build now');
    expect(plainTitle('# Plan for [the docs](https://example.com/x) and ![logo](a.png)')).toBe('Plan for the docs and logo');
    expect(plainTitle('- first item\n> quoted ~~old~~')).toBe('first item quoted old');
    // Not markup: a lone asterisk, snake_case, a multiplication.
    expect(plainTitle('2 * 3 in my_var_name')).toBe('2 * 3 in my_var_name');
    const s = (id: string, title: string) => ({ id, title, sessionKey: `k-${id}`, updatedAt: `2026-11-26T0${id}:00:00Z` });
    expect([...distinctTitles([s('1', '**Deploy** it')], (iso) => iso).values()]).toEqual(['Deploy it']);
  });
});

describe('permissions', () => {
  const user = { requireAuth: true, user: { username: 'carol', role: 'user' as const } };
  it('gives a reason where a user may not act, none for owners, admins and open mode', () => {
    expect(notOwnerReason(user, 'admin', 'agent')).toBe('Only admin (its owner) or an admin may change this agent.');
    expect(notOwnerReason(user, 'carol', 'agent')).toBeNull();
    expect(notOwnerReason({ requireAuth: true, user: { username: 'root', role: 'admin' } }, 'carol', 'agent')).toBeNull();
    expect(notOwnerReason({ requireAuth: false, user: null }, 'carol', 'agent')).toBeNull();
    expect(adminOnlyReason(user, 'model providers')).toBe('Only an admin may change model providers.');
  });
});

describe("the Channels page's warning before the first API key (issue 42)", () => {
  // The states services/gateway/test/chat-key-only.test.ts shows the gateway in, and what chat is then.
  const open = { requireAuth: false, chatNeedsKey: false };
  const on = { enabled: true };
  it('warns exactly while chat is open and a new enabled api account would lock it', () => {
    expect(chatStillOpen(open, on, [])).toBe(true);
    // A disabled account locks nothing: the next one would still be the first.
    expect(chatStillOpen(open, on, [{ enabled: false }])).toBe(true);
  });
  it("does not warn when chat is key-only already: a user's own key, an enabled account, a closed server", () => {
    expect(chatStillOpen({ requireAuth: false, chatNeedsKey: true }, on, [])).toBe(false);
    // The page's list is fresher than the server's index: an account just made counts.
    expect(chatStillOpen(open, on, [{ enabled: true }])).toBe(false);
    expect(chatStillOpen({ requireAuth: true }, on, [])).toBe(false);
    // Not told (a user who is not an admin): no guess.
    expect(chatStillOpen({ requireAuth: false }, on, [])).toBe(false);
  });
  it('does not warn on a platform disabled in the configuration file (its accounts hold no key the gateway reads)', () => {
    expect(chatStillOpen(open, { enabled: false }, [])).toBe(false);
  });
});

describe('kept failed turns', () => {
  it('rebuilds a failed turn with its error and a stopped one as stopped', () => {
    const turns = turnsFromHistory([
      { role: 'user', content: 'ok?' },
      { role: 'assistant', content: 'yes' },
      { role: 'user', content: 'break', status: 'failed', error: 'Upstream failure: HTTP 500' },
      { role: 'assistant', content: 'par', status: 'failed', error: 'Upstream failure: HTTP 500' },
      { role: 'user', content: 'long one', status: 'stopped', error: 'stopped before the answer was complete' },
      { role: 'assistant', content: 'half', status: 'stopped', error: 'stopped before the answer was complete' },
    ]);
    expect(turns.filter((t) => t.role === 'assistant').map((t) => t.role === 'assistant' && [t.status, t.error])).toEqual([
      ['done', undefined],
      ['error', 'Upstream failure: HTTP 500'],
      ['stopped', undefined],
    ]);
  });
});
