import { describe, expect, it } from 'vitest';
import { slowestFiles } from '../src/summary-reporter.js';

describe('summary reporter: the slowest files', () => {
  it('names the slowest first, at most the number asked, with the total of every file', () => {
    const times = [
      { file: 'e2e/a.test.ts', ms: 1_500 },
      { file: 'e2e/b.test.ts', ms: 120_250 },
      { file: 'libs/c.test.ts', ms: 40 },
      { file: 'e2e/d.test.ts', ms: 9_000 },
    ];
    expect(slowestFiles(times, 3)).toEqual([
      'slowest files (of 4; 130.8 s of worker time in all):',
      '  120.3 s  e2e/b.test.ts',
      '    9.0 s  e2e/d.test.ts',
      '    1.5 s  e2e/a.test.ts',
    ]);
  });

  it('prints nothing when no file ran', () => {
    expect(slowestFiles([])).toEqual([]);
  });
});
