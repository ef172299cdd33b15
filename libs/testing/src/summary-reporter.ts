import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints one closing line `tests: N passed, N failed, N skipped` after vitest's own summary,
 * so that CI logs carry a plain, machine-readable count. Before it, it names every file that
 * never finished (its worker died: vitest then reports only "Worker exited unexpectedly", with
 * no file) and every test that did not run, so neither hides in a count.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const unfinished: string[] = [];
    const notRun: string[] = [];
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
    }
    const out: string[] = [];
    if (unfinished.length > 0) out.push(`\nfiles that never finished (a worker that died?):\n${unfinished.map((f) => `  ${f}`).join('\n')}`);
    if (notRun.length > 0) out.push(`\ntests that did not run:\n${notRun.map((t) => `  ${t}`).join('\n')}`);
    out.push(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    process.stdout.write(out.join('\n'));
  }
}
