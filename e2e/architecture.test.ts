import { ESLint } from 'eslint';
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

  it('keeps process.env in main files', async () => {
    const code = 'export const port = process.env.PORT;\n';
    expect(await errors('services/gateway/src/app2.ts', code)).toEqual([expect.stringMatching(/^no-restricted-syntax: Only a main.ts/)]);
    expect(await errors('services/gateway/src/main.ts', code)).toEqual([]);
  });
});
