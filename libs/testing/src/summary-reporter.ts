import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest files the summary names: enough to see where a CI run's time went. */
export const SLOWEST_FILES = 15;

export interface FileTime {
  file: string;
  ms: number;
}

/**
 * A file's own time in its worker: importing it (collect), its set-up files, and its tests and
 * hooks. The files a worker runs one after another add up to that worker's share of the run, so
 * these are the numbers to cut, not vitest's wall-clock total (which overlaps workers).
 */
export function fileTime(mod: TestModule): number {
  const d = mod.diagnostic();
  return d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
}

/** The `most` slowest files, slowest first, and the lines that print them. */
export function slowestFiles(times: ReadonlyArray<FileTime>, most = SLOWEST_FILES): string[] {
  const sorted = [...times].sort((a, b) => b.ms - a.ms).slice(0, most);
  if (sorted.length === 0) return [];
  const total = times.reduce((sum, t) => sum + t.ms, 0);
  const width = Math.max(...sorted.map((t) => (t.ms / 1000).toFixed(1).length));
  return [
    `slowest files (of ${times.length}; ${(total / 1000).toFixed(1)} s of worker time in all):`,
    ...sorted.map((t) => `  ${(t.ms / 1000).toFixed(1).padStart(width)} s  ${t.file}`),
  ];
}

/**
 * Prints one closing line `tests: N passed, N failed, N skipped` after vitest's own summary,
 * so that CI logs carry a plain, machine-readable count. Before it, it names every file that
 * never finished (its worker died: vitest then reports only "Worker exited unexpectedly", with
 * no file), every test that did not run, so neither hides in a count, and the slowest files, so
 * that every CI log says where the suite's time went.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const unfinished: string[] = [];
    const notRun: string[] = [];
    const times: FileTime[] = [];
    for (const mod of testModules) {
      let failedHere = 0;
      const file = path.relative(process.cwd(), mod.moduleId);
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else if (state === 'pending' && mod.state() === 'pending') {
          // Its file never finished: a worker that died takes its tests with it, which is a failure.
          failedHere++;
          notRun.push(`${file} > ${test.fullName} (never finished)`);
        } else {
          skipped++;
          notRun.push(`${file} > ${test.fullName} (${state})`);
        }
      }
      const modState = mod.state();
      if (modState !== 'passed' && modState !== 'failed' && modState !== 'skipped') unfinished.push(`${file} (${modState})`);
      // A file that failed outside its tests (import error, failing beforeAll) counts once.
      if (modState === 'failed' && failedHere === 0) failedHere = 1;
      failed += failedHere;
      times.push({ file, ms: fileTime(mod) });
    }
    const out: string[] = [];
    const slowest = slowestFiles(times);
    if (slowest.length > 0) out.push(`\n${slowest.join('\n')}`);
    if (unfinished.length > 0) out.push(`\nfiles that never finished (a worker that died?):\n${unfinished.map((f) => `  ${f}`).join('\n')}`);
    if (notRun.length > 0) out.push(`\ntests that did not run:\n${notRun.map((t) => `  ${t}`).join('\n')}`);
    out.push(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    process.stdout.write(out.join('\n'));
  }
}
