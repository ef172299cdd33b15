import fs from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { needsFullTier } from './tiers.js';

export interface SequencedFile {
  file: string;
  /** Under e2e/, or it spawns services, needs servers or a browser (the full tier). */
  full: boolean;
  bytes: number;
}

/**
 * The order for a run with no timings to go by: full-tier files first (they start servers,
 * processes, browsers or images: the long ones), then the rest, each group larger files first.
 * The long files then start while both workers are fresh and the short ones fill the end, instead
 * of one long file starting last and running alone.
 */
export function fullTierFirst<T extends SequencedFile>(files: readonly T[]): T[] {
  return [...files].sort((a, b) => Number(b.full) - Number(a.full) || b.bytes - a.bytes || a.file.localeCompare(b.file));
}

/**
 * vitest's own order (failed files first, then the longest by the last run's timings) when it has
 * timings for every file; otherwise, as on a clean clone (`.ci/run`), `fullTierFirst`: vitest's
 * fallback is file size alone, which starts a small but slow file (the image, npm start) last.
 */
export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const known = files.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${path.relative(root, f.moduleId)}`) !== undefined);
    if (known) return super.sort(files);
    const described = files.map((spec) => {
      const file = path.relative(root, spec.moduleId);
      return { spec, file, full: file.startsWith(`e2e${path.sep}`) || needsFullTier(spec.moduleId), bytes: fs.statSync(spec.moduleId).size };
    });
    return fullTierFirst(described).map((d) => d.spec);
  }
}
