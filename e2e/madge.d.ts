// madge ships no types; what e2e/architecture.test.ts uses of its API.
declare module 'madge' {
  interface MadgeResult {
    obj(): Record<string, string[]>;
    warnings(): { skipped: string[] };
  }
  interface MadgeOptions {
    fileExtensions?: string[];
    tsConfig?: string;
    baseDir?: string;
  }
  export default function madge(path: string | string[], options?: MadgeOptions): Promise<MadgeResult>;
}
