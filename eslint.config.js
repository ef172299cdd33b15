import tseslint from 'typescript-eslint';

/**
 * Relative imports across packages need no rule: tsc -b rejects a file outside a project's
 * include (TS6307). Service packages: none may import another (the standalone composer excepted), no lib may import one. */
const SERVICES = ['gateway', 'agent-worker', 'scheduler', 'channel-connector', 'standalone', 'cli', 'web'];
const serviceImports = (except) =>
  SERVICES.filter((s) => s !== except).map((s) => ({
    name: `@agentry/${s}`,
    message: except === undefined ? 'libs must never import a service' : 'services never import each other (only standalone composes them)',
  }));

/**
 * The run protocol (@agentry/runs) and what a definition is (@agentry/definitions) sit below the
 * executor (@agentry/engine): the scheduler and the gateway use those only, and neither reaches
 * up into the executor (a forced compaction is a worker's job too). e2e/architecture.test.ts
 * proves the rule and the import graph.
 */
const engineImport = (message) => ({ name: '@agentry/engine', message });
const PROTOCOL_ONLY = 'use the run protocol (@agentry/runs) or @agentry/definitions here, never the executor (@agentry/engine)';

const processEnvRule = {
  selector: "MemberExpression[object.name='process'][property.name='env']",
  message: 'Only a main.ts (or a CLI entry) reads process.env; pass values in from there.',
};

export default tseslint.config(
  // services/web/build: the web UI as Vite bundles it (generated, minified).
  { ignores: ['**/dist/**', '**/node_modules/**', 'data/**', 'coverage/**', 'services/web/build/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': ['error', processEnvRule],
    },
  },
  { files: ['libs/**/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: serviceImports(undefined) }] } },
  ...SERVICES.filter((s) => s !== 'standalone').map((s) => ({
    files: [`services/${s}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { paths: serviceImports(s) }] },
  })),
  { files: ['libs/runs/**/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: [...serviceImports(undefined), engineImport('@agentry/runs sits below the executor: it never imports @agentry/engine')] }] } },
  { files: ['services/scheduler/**/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: [...serviceImports('scheduler'), engineImport(PROTOCOL_ONLY)] }] } },
  { files: ['libs/definitions/**/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: [...serviceImports(undefined), engineImport('@agentry/definitions sits below the executor: it never imports @agentry/engine')] }] } },
  {
    files: ['services/gateway/src/**/*.ts'],
    ignores: ['services/gateway/src/main.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [...serviceImports('gateway'), engineImport(PROTOCOL_ONLY)] }] },
  },
  {
    // The one named exception: @agentry/web is an asset package (it exports only the path of the
    // built UI), so the gateway's entry point may import it to pass that directory to buildGateway.
    files: ['services/gateway/src/main.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [...serviceImports('gateway').filter((p) => p.name !== '@agentry/web'), engineImport(PROTOCOL_ONLY)] }] },
  },
  {
    // Functions do one thing: past 80 lines a function is split into named parts. The few that
    // read better long say so with an eslint-disable-next-line comment and a line in
    // docs/conventions.md ("Long functions"); e2e/architecture.test.ts keeps the two in step.
    files: ['libs/*/src/**/*.{ts,tsx}', 'services/*/src/**/*.{ts,tsx}', 'services/web/app/**/*.{ts,tsx}'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false, IIFEs: true }] },
  },
  {
    // Entry points and test code may read the environment.
    files: ['**/src/main.ts', '**/src/cli.ts', '**/test/**', 'e2e/**', 'bench/**', 'libs/testing/**', '*.config.ts', '*.config.js'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
