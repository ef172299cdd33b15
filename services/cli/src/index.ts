/** The CLI as a library (tests, embedding): run it on an argv with a given environment and streams. */
export { run, buildProgram } from './program.js';
export type { CliSetup, CliIo } from './setup.js';
export { Prompter, LineReader } from './prompt.js';
export { formatTable, formatObject, cell, shortTime, type Column } from './output.js';
export { substituteEnv, apiKeyFromConfig, findConfigFile } from './config-file.js';
export { CredentialStore, credentialsPath, type StoredLogin } from './store.js';
export { maskSecret } from './credentials.js';
