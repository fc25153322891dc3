// Drives the handshake page in Debian's Chromium through playwright-core
// (no browser download). Argument: the client options as JSON, with
// "page": the page's URL. Prints "connected" when the page says so, then
// the page's result as one JSON line.
import { chromium } from "playwright-core";
import { chromiumFlags } from "./browser.mjs";

const opts = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: process.env.ALICIA_CHROMIUM || "/usr/bin/chromium",
  args: [...chromiumFlags, "--autoplay-policy=no-user-gesture-required"],
});
let code = 0;
try {
  const page = await browser.newPage();
  page.on("console", (m) => {
    if (m.text() === "connected") console.log("connected");
  });
  page.on("pageerror", (e) => console.error("page error:", String(e)));
  const { page: url, ...rest } = opts;
  await page.goto(url + "#" + encodeURIComponent(JSON.stringify(rest)));
  await page.waitForFunction(() => window.aliciaResult || window.aliciaError, null, { timeout: 90000 });
  const error = await page.evaluate(() => window.aliciaError);
  if (error) throw new Error(error);
  console.log(JSON.stringify(await page.evaluate(() => window.aliciaResult)));
} catch (e) {
  console.error(String(e));
  code = 1;
}
await browser.close();
process.exit(code);
