import fs from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import madge from 'madge';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '@agentry/testing';

/** The layering rules of DESIGN.md section 3, as the linter enforces them. */
const eslint = new ESLint({ cwd: repoRoot });

async function errors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${repoRoot}/${filePath}` });
  return (result?.messages ?? []).map((m) => `${m.ruleId}: ${m.message}`);
}

describe('architecture rules', () => {
  it('stops a service importing another service', async () => {
    expect(await errors('services/gateway/src/x.ts', "import { startScheduler } from '@agentry/scheduler';\nexport const x = startScheduler;\n")).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*services never import each other/),
    ]);
  });

  it('stops a lib importing a service', async () => {
    expect(await errors('libs/db/src/x.ts', "import { buildGateway } from '@agentry/gateway';\nexport const x = buildGateway;\n")).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*libs must never import a service/),
    ]);
  });

  it('lets standalone compose services and services use libs', async () => {
    expect(await errors('services/standalone/src/x.ts', "import { startScheduler } from '@agentry/scheduler';\nexport const x = startScheduler;\n")).toEqual([]);
    expect(await errors('services/gateway/src/x.ts', "import { Errors } from '@agentry/errors';\nexport const x = Errors;\n")).toEqual([]);
  });

  it('lets only the gateway entry point (and standalone) import the @agentry/web asset package', async () => {
    const code = "import { webBuildDir } from '@agentry/web';\nexport const x = webBuildDir;\n";
    expect(await errors('services/gateway/src/main.ts', code)).toEqual([]);
    expect(await errors('services/standalone/src/main.ts', code)).toEqual([]);
    expect(await errors('services/gateway/src/app.ts', code)).toEqual([expect.stringMatching(/^no-restricted-imports: .*services never import each other/)]);
    expect(await errors('services/scheduler/src/main.ts', code)).toEqual([expect.stringMatching(/^no-restricted-imports: .*services never import each other/)]);
    expect(await errors('libs/db/src/x.ts', code)).toEqual([expect.stringMatching(/^no-restricted-imports: .*libs must never import a service/)]);
  });

  it('keeps the scheduler, the whole gateway, the run protocol and the definitions off the executor', async () => {
    const code = "import { runAgent } from '@agentry/engine';\nexport const x = runAgent;\n";
    // routes/sessions.ts was the last exception (forced compaction); it is a worker job now.
    for (const file of ['services/scheduler/src/x.ts', 'services/gateway/src/chat/x.ts', 'services/gateway/src/routes/runs.ts', 'services/gateway/src/routes/agents.ts', 'services/gateway/src/routes/sessions.ts', 'services/gateway/src/x.ts', 'services/gateway/src/main.ts']) {
      expect(await errors(file, code), file).toEqual([expect.stringMatching(/^no-restricted-imports: .*never the executor/)]);
    }
    expect(await errors('libs/runs/src/x.ts', code)).toEqual([expect.stringMatching(/^no-restricted-imports: .*below the executor/)]);
    expect(await errors('libs/definitions/src/x.ts', code)).toEqual([expect.stringMatching(/^no-restricted-imports: .*below the executor/)]);
    expect(await errors('services/gateway/src/routes/rules.ts', "import { validateRuleChain } from '@agentry/definitions';\nexport const x = validateRuleChain;\n")).toEqual([]);
    // The rule keeps the older ones: a service import from those files is still refused.
    expect(await errors('services/scheduler/src/x.ts', "import { buildGateway } from '@agentry/gateway';\nexport const x = buildGateway;\n")).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*services never import each other/),
    ]);
    expect(await errors('services/scheduler/src/x.ts', "import { submitRun } from '@agentry/runs';\nexport const x = submitRun;\n")).toEqual([]);
    expect(await errors('services/agent-worker/src/x.ts', code)).toEqual([]);
  });

  it('shows in the import graph (madge) that no gateway or scheduler file reaches the executor', async () => {
    // madge does not follow workspace packages (they are leaves it skips), so each file of the
    // graph is read for the packages it names: a file a service reaches only through another
    // counts too, and a file the graph misses fails the count.
    const ENGINE = /from '@agentry\/engine'|import\('@agentry\/engine'\)/;
    const engineImporters = async (dir: string) => {
      const graph = await madge(path.join(repoRoot, dir), { baseDir: repoRoot, fileExtensions: ['ts'], tsConfig: path.join(repoRoot, 'tsconfig.base.json') });
      const files = Object.keys(graph.obj());
      const onDisk = fs.readdirSync(path.join(repoRoot, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
      expect(files.length).toBe(onDisk.length);
      return files.filter((f) => ENGINE.test(fs.readFileSync(path.join(repoRoot, f), 'utf8'))).map((f) => path.relative(dir, f));
    };
    expect(await engineImporters('services/scheduler/src')).toEqual([]);
    expect(await engineImporters('services/gateway/src')).toEqual([]);
  });

  it('ships the gateway without the executor: @agentry/engine is at most a devDependency (for its tests), its build never references it', () => {
    const read = (file: string) => JSON.parse(fs.readFileSync(path.join(repoRoot, file), 'utf8')) as Record<string, unknown>;
    for (const service of ['gateway', 'scheduler']) {
      expect(Object.keys((read(`services/${service}/package.json`).dependencies ?? {}) as object), service).not.toContain('@agentry/engine');
      const references = (read(`services/${service}/tsconfig.json`).references ?? []) as Array<{ path: string }>;
      expect(references.map((r) => r.path), service).not.toContain('../../libs/engine');
    }
  });

  it('keeps process.env in main files', async () => {
    const code = 'export const port = process.env.PORT;\n';
    expect(await errors('services/gateway/src/app2.ts', code)).toEqual([expect.stringMatching(/^no-restricted-syntax: Only a main.ts/)]);
    expect(await errors('services/gateway/src/main.ts', code)).toEqual([]);
  });

  it('stops a function past 80 lines in services and libs, tests aside', async () => {
    const body = (lines: number) => `export function f(): number {\n${'  void 0;\n'.repeat(lines - 3)}  return 1;\n}\n`;
    expect(await errors('services/gateway/src/x.ts', body(81))).toEqual([expect.stringMatching(/^max-lines-per-function: Function 'f' has too many lines \(81\)/)]);
    expect(await errors('services/gateway/src/x.ts', body(80))).toEqual([]);
    expect(await errors('libs/engine/src/x.ts', body(81))).toHaveLength(1);
    expect(await errors('services/web/app/pages/X.tsx', body(81))).toHaveLength(1);
    expect(await errors('services/gateway/test/x.test.ts', body(81))).toEqual([]);
  });

  it('lets at most five functions run long, each named in docs/conventions.md with its reason', () => {
    const allowed = longFunctionsSection();
    const exceptions = sourceFiles().flatMap((file) => {
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      return lines.flatMap((line, i) => {
        if (!line.includes('eslint-disable-next-line max-lines-per-function')) return [];
        const name = /(?:function\*?|const|class)\s+([A-Za-z0-9_$#]+)|^\s*(?:async\s+)?\*?([A-Za-z0-9_$#]+)\s*\(/.exec(lines[i + 1] ?? '');
        return [`${path.relative(repoRoot, file)} ${name?.[1] ?? name?.[2] ?? '?'}`];
      });
    });
    expect(exceptions.length).toBeLessThanOrEqual(5);
    for (const exception of exceptions) {
      const [file, name] = exception.split(' ');
      expect(allowed, `${exception} is not listed under "Long functions" in docs/conventions.md`).toContainEqual(expect.stringContaining(`\`${name}\``));
      expect(allowed.find((l) => l.includes(`\`${name}\``))).toContain(file);
    }
    // The list names no function that is no longer long.
    expect(allowed.length).toBe(exceptions.length);
  });
});

/** The bullets of the "Long functions" section of docs/conventions.md. */
function longFunctionsSection(): string[] {
  const doc = fs.readFileSync(path.join(repoRoot, 'docs/conventions.md'), 'utf8');
  const start = doc.indexOf('## Long functions');
  expect(start, 'docs/conventions.md has a "## Long functions" section').toBeGreaterThanOrEqual(0);
  const section = doc.slice(start).split(/\n## /)[0]!;
  return section.split('\n').filter((l) => l.startsWith('- '));
}

/** Every TypeScript source of services and libs that the length rule covers. */
function sourceFiles(): string[] {
  const roots = [
    ...['libs', 'services'].flatMap((top) => fs.readdirSync(path.join(repoRoot, top)).map((pkg) => path.join(repoRoot, top, pkg, 'src'))),
    path.join(repoRoot, 'services/web/app'),
  ];
  const out: string[] = [];
  const walk = (dir: string) => {
    if (!fs.existsSync(dir)) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.tsx?$/.test(e.name)) out.push(p);
    }
  };
  roots.forEach(walk);
  return out;
}
