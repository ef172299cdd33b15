import { describe, expect, it } from 'vitest';
import { fullTierFirst } from '../src/sequencer.js';

describe('test file order without timings', () => {
  it('starts every full-tier file before any other, each group larger first', () => {
    const files = [
      { file: 'libs/a/test/big-unit.test.ts', full: false, bytes: 90_000 },
      { file: 'e2e/image.test.ts', full: true, bytes: 20_000 },
      { file: 'libs/a/test/small-unit.test.ts', full: false, bytes: 1_000 },
      { file: 'e2e/fuzz.test.ts', full: true, bytes: 50_000 },
      { file: 'e2e/npm-start.test.ts', full: true, bytes: 2_000 },
    ];
    expect(fullTierFirst(files).map((f) => f.file)).toEqual([
      'e2e/fuzz.test.ts',
      'e2e/image.test.ts',
      'e2e/npm-start.test.ts',
      'libs/a/test/big-unit.test.ts',
      'libs/a/test/small-unit.test.ts',
    ]);
  });
});
