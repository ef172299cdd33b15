import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultClientConditions, defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const root = path.dirname(fileURLToPath(import.meta.url));

/** The web UI: `app/` (entry `app/main.tsx` via index.html) built into `build/` (not `dist/`, which tsc owns). */
export default defineConfig({
  root,
  base: '/',
  plugins: [react()],
  // @agentry/client is bundled from its TypeScript sources (the workspace's `@agentry/source`
  // export), so the UI builds without a prior tsc run and always has the client as it is now.
  resolve: { conditions: ['@agentry/source', ...defaultClientConditions] },
  publicDir: path.join(root, 'public'),
  build: {
    outDir: path.join(root, 'build'),
    emptyOutDir: true,
    assetsDir: 'assets',
    // Everything as files: the Content-Security-Policy allows no inline scripts.
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
  },
  // `npm run dev -w @agentry/web`: Vite's dev server with the API of a gateway on the default port.
  server: { proxy: { '/api': 'http://127.0.0.1:9527' } },
});
