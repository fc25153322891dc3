// Opens one page in Chromium and reports on it: the generic browser test
// for pages that need no scripted clicking. Input (JSON on stdin):
//   url           the page
//   localStorage  keys to set before the page's own code runs (optional)
//   waitFor       a JavaScript expression; the page is watched until it is
//                 truthy (optional)
//   evaluate      a JavaScript expression whose value is returned (optional)
//   viewport      {width, height} (optional)
//   screenshot    a file name for a PNG in the artifacts folder (optional)
//   chromiumArgs  extra Chromium flags (optional)
// Output: {value, packets, logs, screenshot}. The page's scripts may call
// window.__answerOf(turn) (web-page.mjs).
import { run, captured, screenshot } from './browser.mjs';
import { installAnswerOf } from './web-page.mjs';

run(async ({ input, newPage }) => {
  const page = await newPage(input.viewport ? { viewport: input.viewport } : {});
  const logs = [];
  page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
  await page.addInitScript(installAnswerOf);
  if (input.localStorage) {
    await page.addInitScript((items) => {
      for (const [k, v] of Object.entries(items)) localStorage.setItem(k, v);
    }, input.localStorage);
  }
  await page.goto(input.url);
  if (input.waitFor) await page.waitForFunction(input.waitFor, null, { timeout: input.timeoutMs || 45_000 });
  const value = input.evaluate ? await page.evaluate(input.evaluate) : null;
  const shot = input.screenshot ? await screenshot(page, input.screenshot) : '';
  return { value, packets: await captured(page), logs, screenshot: shot };
});
