import { describe, expect, it } from 'vitest';
import { splitText } from '../src/split.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What splitting may change: whitespace at a cut is dropped, a hard cut adds a boundary. */
function normalised(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** A deterministic generator, so a failure names a case that can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const PIECES = ['word', 'another', 'x', 'longerwordwithoutbreaks', ' ', ' ', ' ', '\n', '\n\n', '😀', '𝄞', 'é', '  ', '\t'];

function randomText(next: () => number, length: number): string {
  let text = '';
  while (text.length < length) text += PIECES[Math.floor(next() * PIECES.length)];
  return text;
}

function checkInvariants(text: string, limit: number): string[] {
  const parts = splitText(text, limit);
  expect(parts.length).toBeGreaterThan(0);
  for (const part of parts) {
    expect(part.length).toBeLessThanOrEqual(limit);
    expect(part).not.toMatch(LONE_SURROGATE);
    if (parts.length > 1) expect(part.trim()).not.toBe('');
  }
  // Nothing lost, added or reordered but whitespace.
  expect(parts.join('').replace(/\s+/g, '')).toBe(text.replace(/\s+/g, ''));
  return parts;
}

describe('splitText', () => {
  it('keeps text within the limit as one part', () => {
    expect(splitText('hello world', 11)).toEqual(['hello world']);
    expect(splitText('', 10)).toEqual(['']);
  });

  it('rejects a limit that cannot hold a surrogate pair', () => {
    expect(() => splitText('abc', 1)).toThrow(RangeError);
  });

  it('prefers a paragraph break over a line break or a space', () => {
    const first = 'alpha beta\ngamma delta';
    const second = 'epsilon zeta eta theta';
    expect(splitText(`${first}\n\n${second}`, 30)).toEqual([first, second]);
  });

  it('prefers a line break over a space', () => {
    expect(splitText('one two three\nfour five six seven', 20)).toEqual(['one two three', 'four five six seven']);
  });

  it('breaks at the last space that fits', () => {
    expect(splitText('aaa bbb ccc ddd eee', 11)).toEqual(['aaa bbb ccc', 'ddd eee']);
  });

  it('cuts a word longer than the limit hard', () => {
    expect(splitText('abcdefghijklmnopqrstuvwxyz', 10)).toEqual(['abcdefghij', 'klmnopqrst', 'uvwxyz']);
  });

  it('never cuts a surrogate pair', () => {
    const text = '😀'.repeat(10);
    for (const limit of [2, 3, 5, 7]) {
      const parts = checkInvariants(text, limit);
      expect(parts.join('')).toBe(text);
    }
    expect(splitText(`a${'😀'.repeat(3)}`, 4)).toEqual(['a😀', '😀😀']);
  });

  it('loses nothing but whitespace at the cuts', () => {
    const text = 'The quick brown fox jumps over the lazy dog.\n\nPack my box with five dozen liquor jugs.\nHow vexingly quick daft zebras jump!';
    for (let limit = 12; limit <= text.length; limit += 7) {
      const parts = checkInvariants(text, limit);
      expect(normalised(parts.join(' '))).toBe(normalised(text));
    }
  });

  it('keeps its promises on generated text', () => {
    const next = random(20240601);
    for (let round = 0; round < 400; round++) {
      const limit = 2 + Math.floor(next() * 60);
      const text = randomText(next, Math.floor(next() * 400));
      checkInvariants(text, limit);
    }
  });

  it('splits a long answer at paragraph ends, as many paragraphs to a part as fit', () => {
    // 1,139 characters: three paragraphs fit in 4,096, four do not.
    const paragraph = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(20).trim();
    const text = Array.from({ length: 12 }, () => paragraph).join('\n\n');
    const parts = checkInvariants(text, 4096);
    const three = [paragraph, paragraph, paragraph].join('\n\n');
    expect(parts).toEqual([three, three, three, three]);
  });
});
