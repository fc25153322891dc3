// Opens the pre-connect page in Chromium with a fake microphone that
// plays a WAV file (the Go test's question), and prints the agent's
// answer as the page heard it.
import { run } from './browser.mjs';

run(async ({ input, newPage }) => {
  const page = await newPage();
  const { page: url, ...opts } = input;
  delete opts.chromiumArgs;
  await page.goto(url + '#' + encodeURIComponent(JSON.stringify(opts)));
  await page.waitForFunction(() => window.aliciaResult || window.aliciaError, null, { timeout: 30000 });
  const error = await page.evaluate(() => window.aliciaError);
  if (error) throw new Error(error);
  return page.evaluate(() => window.aliciaResult);
});
