// Browser plumbing for the Go tests: launch the machine's Chromium through
// playwright-core (never a downloaded browser), capture every data-channel
// packet a page sends and receives, and hand a JSON result back to Go.
//
// A script does:
//
//   import { run } from './browser.mjs';
//   run(async ({ browser, input, newPage, result }) => { … return {…}; });
//
// Go side: testenv.Browser(t, "script.mjs", input, &out).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

// Flags that work headless in a container without a GPU or a sandbox, and
// keep Chromium from calling home.
export const chromiumFlags = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
];

export async function readInput() {
  let raw = '';
  for await (const chunk of process.stdin) raw += chunk;
  return raw.trim() ? JSON.parse(raw) : {};
}

export async function launch(extraArgs = []) {
  const executablePath = process.env.ALICIA_CHROMIUM;
  if (!executablePath) throw new Error('ALICIA_CHROMIUM is not set (testenv.Browser sets it)');
  return chromium.launch({ executablePath, headless: true, args: [...chromiumFlags, ...extraArgs] });
}

// captureScript records every message on every RTCDataChannel of the page,
// both ways, before the page's own code runs: a packet capture that does
// not trust the page under test. Messages are LiveKit DataPacket protobufs;
// the Go side decodes them.
const captureScript = () => {
  const packets = [];
  window.__capture = packets;
  const toB64 = (buf) => {
    const bytes = new Uint8Array(buf);
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(s);
  };
  const record = (dir, channel, data) => {
    const at = performance.now();
    if (data instanceof ArrayBuffer) packets.push({ dir, channel, at, data: toB64(data) });
    else if (ArrayBuffer.isView(data)) packets.push({ dir, channel, at, data: toB64(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)) });
    else if (data instanceof Blob) {
      const slot = { dir, channel, at, data: '' };
      packets.push(slot);
      data.arrayBuffer().then((b) => { slot.data = toB64(b); });
    } else if (typeof data === 'string') packets.push({ dir, channel, at, text: data });
  };
  const watch = (dc) => {
    if (dc.__captured) return;
    dc.__captured = true;
    dc.addEventListener('message', (e) => record('in', dc.label, e.data));
  };
  const send = RTCDataChannel.prototype.send;
  RTCDataChannel.prototype.send = function (data) {
    watch(this);
    record('out', this.label, data);
    return send.call(this, data);
  };
  const Native = window.RTCPeerConnection;
  class Capturing extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('datachannel', (e) => watch(e.channel));
    }
    createDataChannel(...args) {
      const dc = super.createDataChannel(...args);
      watch(dc);
      return dc;
    }
  }
  window.RTCPeerConnection = Capturing;
};

// newContext opens a browser context whose pages are captured. Console
// lines and page errors are kept for the failure report.
export async function newContext(browser, opts = {}) {
  const context = await browser.newContext(opts);
  await context.addInitScript(captureScript);
  context.__logs = [];
  context.on('page', (p) => watchPage(context, p));
  return context;
}

function watchPage(context, page) {
  page.on('console', (m) => context.__logs.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => context.__logs.push(`[pageerror] ${e.message}`));
}

// captured returns what the page's data channels carried so far.
export async function captured(page) {
  return page.evaluate(() => window.__capture || []);
}

// screenshot writes a PNG into the artifacts folder Go names.
export async function screenshot(page, name) {
  const dir = process.env.ALICIA_ARTIFACTS;
  if (!dir) return '';
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name + '.png');
  await page.screenshot({ path, fullPage: false });
  return path;
}

// run reads the input, launches Chromium, runs the scenario and prints its
// result as JSON on stdout. A failure exits non-zero with the page logs.
export async function run(scenario) {
  const input = await readInput();
  const browser = await launch(input.chromiumArgs || []);
  const contexts = [];
  const newPage = async (opts) => {
    const ctx = await newContext(browser, opts);
    contexts.push(ctx);
    return ctx.newPage();
  };
  try {
    const result = await scenario({ browser, input, newPage });
    process.stdout.write(JSON.stringify(result ?? {}) + '\n');
  } catch (e) {
    process.stderr.write(`${e.stack || e}\n`);
    for (const c of contexts) process.stderr.write(c.__logs.slice(-80).join('\n') + '\n');
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
