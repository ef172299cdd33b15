// `npm start`: the standalone through scripts/start.mjs, which builds what is stale (a fresh
// clone, edited sources) and runs the compiled JavaScript, as the image does; the sources under
// tsx only when no build can be made (it says why). Kept as the standalone's own entry.
process.argv.splice(2, 0, 'services/standalone/src/main.ts');
await import('../../../scripts/start.mjs');
