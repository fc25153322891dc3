// Builds the page into dist/ (or the folder given as the first argument):
// app.js (the bundle), app.css and index.html. The output depends only on
// src/ and the pinned packages, so a rebuild of unchanged sources gives the
// same bytes; the Go test of the web package relies on that.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2] || 'dist';
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: 'src/main.jsx' },
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  jsx: 'automatic',
  legalComments: 'none',
  define: { 'process.env.NODE_ENV': '"production"' },
  outdir: out,
  logLevel: 'warning',
});
copyFileSync('src/index.html', join(out, 'index.html'));
copyFileSync('src/style.css', join(out, 'app.css'));
