// Bundles the starter page (page.jsx) into the folder given as the first
// argument: index.html and app.js. esbuild comes from web/, which pins it;
// the page's packages from this folder's package.json.
import { createRequire } from 'node:module';
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '..', '..', '..', '..', 'web', 'package.json'));
const { build } = require('esbuild');

const out = process.argv[2];
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(here, 'page.jsx') },
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' },
  outdir: out,
  logLevel: 'warning',
});
writeFileSync(join(out, 'index.html'),
  '<!doctype html><html><head><meta charset="utf-8"><title>Starter</title></head>' +
  '<body><div id="root"></div><script type="module" src="app.js"></script></body></html>\n');
