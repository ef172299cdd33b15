/**
 * The code of a sandbox worker thread, as text (the Worker runs it with `eval: true`).
 *
 * Why text and not a `worker.ts` file: Node 20 does not apply tsx's loader to a worker's entry
 * file (`ERR_UNKNOWN_FILE_EXTENSION` even under the tsx CLI), registering tsx inside each worker
 * costs about 500 ms per start, and tsc copies no `.js`/`.mjs` file to dist. Text runs the same
 * under tsx, vitest and compiled JS, and a worker starts in about 80 ms. The sandbox tests cover
 * every path of this code.
 *
 * Protocol (structured clone): the worker posts `{type: 'ready'}` once QuickJS is loaded, then
 * answers each `SandboxJob` with one `SandboxReply`. It posts `{type: 'fatal'}` and exits when
 * QuickJS cannot be loaded or a runtime could not be disposed (the WASM heap is then suspect);
 * the pool replaces it.
 *
 * Each job gets a fresh QuickJS runtime and context with: a memory limit (QuickJS counts it per
 * allocation, and this build does not count strings, so the worker's whole WASM memory is also
 * capped: `wasmPages`), a stack limit, and an interrupt handler at the deadline. The user code
 * is a function body; `(function (msg, metadata, msgType, dataType) {` is put on its first line so that
 * line numbers in errors are the user's. Input and output cross the boundary as JSON text only.
 */

export interface SandboxWorkerData {
  /** Absolute path of quickjs-emscripten's CommonJS entry. */
  quickjsPath: string;
  /** Maximum size of the worker's WebAssembly memory, in 64 KiB pages. */
  wasmPages: number;
}

export interface SandboxJob {
  id: number;
  code: string;
  /** JSON text of `{msg, metadata, msgType, dataType}`. */
  input: string;
  timeoutMs: number;
  memoryBytes: number;
  stackBytes: number;
}

/** `result`: the script returned a value JSON cannot carry (a circular one). */
export type SandboxErrorKind = 'syntax' | 'runtime' | 'timeout' | 'memory' | 'result';

export type SandboxReply =
  | { type: 'result'; id: number; ok: true; /** JSON text; undefined when the script returned undefined. */ json: string | undefined }
  | {
      type: 'result';
      id: number;
      ok: false;
      kind: SandboxErrorKind;
      name: string;
      message: string;
      line?: number;
      /** The worker's WebAssembly memory has grown to its cap: replace the worker to give it back. */
      recycle?: boolean;
    };

export type SandboxWorkerMessage = SandboxReply | { type: 'ready' } | { type: 'fatal'; message: string };

export const WORKER_SOURCE = String.raw`'use strict';
const { parentPort, workerData } = require('node:worker_threads');

const CALL =
  '(function (fn, input) { var i = JSON.parse(input); var r = fn(i.msg, i.metadata, i.msgType, i.dataType);' +
  ' if (r === undefined) return undefined;' +
  ' try { return JSON.stringify(r); } catch (e) { var re = new Error("the script returned a value that is not JSON (" + e.message + ")"); re.name = "ResultError"; throw re; } })';

function lineOf(err) {
  if (typeof err.lineNumber === 'number' && err.fileName === 'script.js') return err.lineNumber;
  const m = /script\.js:(\d+)/.exec(typeof err.stack === 'string' ? err.stack : '');
  return m ? Number(m[1]) : undefined;
}

// Within this much of its cap the WebAssembly memory counts as exhausted.
const NEAR_CAP = 4 * 1024 * 1024;

function failure(vm, memory, id, handle, compiling) {
  let err;
  try {
    err = vm.dump(handle);
  } catch (e) {
    err = { name: 'Error', message: 'the script failed and its error could not be read: ' + String(e) };
  }
  const exhausted = memory.buffer.byteLength + NEAR_CAP >= workerData.wasmPages * 65536;
  let kind = 'runtime';
  if (err === null || typeof err !== 'object') {
    // Out of WebAssembly memory QuickJS cannot even build its error object and throws null or ''.
    if (exhausted && (err === null || err === '')) kind = 'memory';
    err = { name: 'Error', message: 'uncaught ' + JSON.stringify(err) };
  }
  const name = typeof err.name === 'string' ? err.name : 'Error';
  const message = typeof err.message === 'string' ? err.message : String(err.message);
  if (name === 'InternalError' && message === 'interrupted') kind = 'timeout';
  else if (name === 'InternalError' && message === 'out of memory') kind = 'memory';
  else if (compiling && name === 'SyntaxError') kind = 'syntax';
  else if (name === 'ResultError') kind = 'result';
  const reply = { type: 'result', id, ok: false, kind, name, message };
  const line = lineOf(err);
  if (line !== undefined) reply.line = line;
  if (exhausted) reply.recycle = true;
  return reply;
}

function evaluate(qjs, quickjs, memory, job) {
  const rt = qjs.newRuntime();
  const handles = [];
  let vm;
  let reply;
  try {
    rt.setMemoryLimit(job.memoryBytes);
    rt.setMaxStackSize(job.stackBytes);
    rt.setInterruptHandler(quickjs.shouldInterruptAfterDeadline(Date.now() + job.timeoutMs));
    vm = rt.newContext();
    const fn = vm.evalCode('(function (msg, metadata, msgType, dataType) {' + job.code + '\n})', 'script.js');
    if (fn.error) {
      handles.push(fn.error);
      reply = failure(vm, memory, job.id, fn.error, true);
      return reply;
    }
    handles.push(fn.value);
    const call = vm.evalCode(CALL, 'sandbox.js');
    if (call.error) {
      handles.push(call.error);
      reply = failure(vm, memory, job.id, call.error, false);
      return reply;
    }
    handles.push(call.value);
    const input = vm.newString(job.input);
    handles.push(input);
    const r = vm.callFunction(call.value, vm.undefined, fn.value, input);
    if (r.error) {
      handles.push(r.error);
      reply = failure(vm, memory, job.id, r.error, false);
      return reply;
    }
    handles.push(r.value);
    reply = { type: 'result', id: job.id, ok: true, json: vm.typeof(r.value) === 'string' ? vm.getString(r.value) : undefined };
    return reply;
  } finally {
    try {
      for (const h of handles) if (h.alive) h.dispose();
      if (vm) vm.dispose();
      rt.dispose();
    } catch (e) {
      // The WASM heap can no longer be trusted: answer, then let the pool replace this worker.
      parentPort.postMessage(reply || { type: 'result', id: job.id, ok: false, kind: 'runtime', name: 'Error', message: 'sandbox failure: ' + String(e) });
      parentPort.postMessage({ type: 'fatal', message: 'runtime dispose failed: ' + String(e) });
      process.exit(1);
    }
  }
}

(async () => {
  const quickjs = require(workerData.quickjsPath);
  const memory = new WebAssembly.Memory({ initial: 256, maximum: workerData.wasmPages });
  const qjs = await quickjs.newQuickJSWASMModule(quickjs.newVariant(quickjs.RELEASE_SYNC, { wasmMemory: memory }));
  parentPort.on('message', (job) => {
    parentPort.postMessage(evaluate(qjs, quickjs, memory, job));
  });
  parentPort.postMessage({ type: 'ready' });
})().catch((e) => {
  parentPort.postMessage({ type: 'fatal', message: 'cannot load QuickJS: ' + String(e && e.stack || e) });
  process.exit(1);
});
`;
