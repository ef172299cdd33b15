export {
  ScriptError,
  ScriptSandbox,
  type RunScriptOptions,
  type SandboxOptions,
  type SandboxStats,
  type ScriptErrorKind,
  type ScriptInput,
} from './sandbox.js';
