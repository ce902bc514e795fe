// Opening one of the local toolkit's pages in a real browser for its tests:
// Debian's chromium, headless, driven by npm's playwright-core (installed
// for the dashboard's tests in tests/aggregator/ui/). Collects JavaScript
// errors; fail() prints the reason, keeps a screenshot and exits 1.
//
//   const { page, fail, finish } = await openPage(pagePath, shotsDir, 'tree');
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../aggregator/ui/package.json', import.meta.url));
const { chromium } = require('playwright-core');

export async function openPage(pagePath, shots, name) {
  fs.mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: process.env.FIELDPROF_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
    headless: true,
  });
  const context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
  const page = await context.newPage();
  const jsErrors = [];
  page.on('pageerror', (e) => jsErrors.push('page error: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') jsErrors.push('console error: ' + m.text()); });
  async function fail(what) {
    console.error('FAILED: ' + what);
    await page.screenshot({ path: path.join(shots, name + '-failure.png'), fullPage: true });
    await browser.close();
    process.exit(1);
  }
  // Prints `out` as the one JSON line the test reads, unless a script
  // error happened on the way.
  async function finish(out) {
    if (jsErrors.length > 0) await fail(jsErrors.join('; '));
    await browser.close();
    console.log(JSON.stringify(out));
  }
  await page.goto('file://' + path.resolve(pagePath));
  await page.waitForSelector('body[data-ready="1"]', { timeout: 20000 })
    .catch(() => fail('the page never got ready: ' + jsErrors.join('; ')));
  return { page, fail, finish, jsErrors };
}
