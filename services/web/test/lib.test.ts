import { describe, expect, it } from 'vitest';
import { describeSchedule } from '../app/lib/cron.js';
import { applyText, applyToolResult, applyToolStart, turnsFromHistory, type Part } from '../app/lib/turns.js';

/** The UI's pure pieces: the turn model of the chat and the cron describer (SSE framing is the client's, tested there). */

describe('turns', () => {
  it('keeps text and tool cards in the order they happened, with result, error and duration', () => {
    let parts: Part[] = [];
    parts = applyText(parts, 'Let me ');
    parts = applyText(parts, 'look.');
    parts = applyToolStart(parts, { toolCallId: 'c1', toolCallName: 'read', arguments: '{"path":"a"}', toolType: 'builtin' }, 100);
    parts = applyToolStart(parts, { toolCallId: 'c2', toolCallName: 'grep', arguments: '{}' }, 100);
    parts = applyToolResult(parts, { toolCallId: 'c2', toolCallName: 'grep', content: 'Error: bad pattern' }, 130);
    parts = applyToolResult(parts, { toolCallId: 'c1', toolCallName: 'read', content: 'hello' }, 250);
    parts = applyText(parts, 'Done.');
    expect(parts).toEqual([
      { kind: 'text', text: 'Let me look.' },
      { kind: 'tool', id: 'c1', name: 'read', toolType: 'builtin', arguments: '{"path":"a"}', result: 'hello', error: false, startedAt: 100, durationMs: 150 },
      { kind: 'tool', id: 'c2', name: 'grep', arguments: '{}', result: 'Error: bad pattern', error: true, startedAt: 100, durationMs: 30 },
      { kind: 'text', text: 'Done.' },
    ]);
  });

  it('rebuilds turns from a stored session', () => {
    const turns = turnsFromHistory([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', function: { name: 'read', arguments: '{}' } }] },
      { role: 'tool', content: 'file text', toolCallId: 'c1' },
      { role: 'assistant', content: 'It says hi.' },
      { role: 'user', content: 'thanks' },
    ]);
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'user']);
    const assistant = turns[1]!;
    expect(assistant.role === 'assistant' && assistant.parts).toEqual([
      { kind: 'tool', id: 'c1', name: 'read', arguments: '{}', result: 'file text', error: false },
      { kind: 'text', text: 'It says hi.' },
    ]);
  });
});

describe('describeSchedule', () => {
  it.each([
    ['0 0 9 * * *', 'at 09:00, every day'],
    ['0 30 8 * * MON-FRI', 'at 08:30, on weekdays (Monday to Friday)'],
    ['*/10 * * * * *', 'every 10 seconds'],
    ['0 */15 * * * *', 'every 15 minutes'],
    ['0 0 * * * *', 'every hour, on the hour'],
    ['0 0 6 1 * *', 'at 06:00, on day 1 of the month'],
    ['0 0 12 * * 5#2', 'at 12:00, on the second Friday of the month'],
    ['0 0 0 L * *', 'at 00:00, on the last day of the month'],
    ['0 15 10 * JAN,JUL *', 'at 10:15, in January and July'],
  ])('%s -> %s', (schedule, text) => {
    expect(describeSchedule(schedule)).toEqual({ ok: true, text });
  });

  it('explains a five-field schedule', () => {
    expect(describeSchedule('0 9 * * *')).toEqual({ ok: false, error: expect.stringMatching(/six fields.*"0 0 9 \* \* \*"/) });
  });
});
