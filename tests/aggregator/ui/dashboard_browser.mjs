// The dashboard in a real browser, for its tests (dashboard.mjs,
// dev_pages.mjs): Debian's chromium, headless, driven by npm's
// playwright-core. Collects JavaScript errors (a resource the server
// refuses, 401 or 404, is logged by the browser itself and is not one);
// check() prints what it checked, or the reason it failed, keeps a
// screenshot and exits 1.
//
//   const { page, check, shot, finish, jsErrors } = await openDashboard(shotsDir, 'dev');
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

export async function openDashboard(shots, prefix, viewport = { width: 1400, height: 900 }) {
  fs.mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: process.env.FIELDPROF_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
    headless: true,
  });
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport });
  const page = await context.newPage();
  const jsErrors = [];
  page.on('pageerror', (e) => jsErrors.push('page error: ' + e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) {
      jsErrors.push('console error: ' + m.text());
    }
  });
  let checks = 0;
  async function fail(what) {
    console.error('FAILED: ' + what);
    await page.screenshot({ path: path.join(shots, prefix + 'failure.png'), fullPage: true });
    await browser.close();
    process.exit(1);
  }
  async function check(cond, what) {
    ++checks;
    if (!cond) await fail(what);
    console.log('ok: ' + what);
  }
  async function shot(name) {
    await page.screenshot({ path: path.join(shots, prefix + name + '.png'), fullPage: true });
  }
  // The last check (no JavaScript error on the way), then the count.
  async function finish() {
    await check(jsErrors.length === 0, 'no JavaScript errors: ' + jsErrors.join('; '));
    await browser.close();
    console.log(`${checks} checks passed; screenshots in ${shots}`);
  }
  return { page, context, check, shot, finish, jsErrors };
}
