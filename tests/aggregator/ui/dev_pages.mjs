// The dashboard's developer pages (issue #34) in a real browser: Debian's
// chromium, headless, driven by npm's playwright-core, against a live
// aggregator holding a developer's runs. tests/tools/local/points_dev_test.cc
// uploads the runs and writes what the pages must show (from `fieldprof
// points show --json` on the same runs):
//
//   node tests/aggregator/ui/dev_pages.mjs URL EXPECT.json TOKEN SCREENSHOT_DIR
//
// Prints what it checked; exits 1 on the first failed check, or on any
// JavaScript error on the page.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [url, expectFile, token, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
fs.mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.FIELDPROF_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
  headless: true,
});
const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 900 } });
const page = await context.newPage();
const jsErrors = [];
page.on('pageerror', (e) => jsErrors.push('page error: ' + e.message));
page.on('console', (m) => {
  // A refused resource (401 without the token) is logged by the browser.
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) {
    jsErrors.push('console error: ' + m.text());
  }
});

let checks = 0;
async function fail(what) {
  console.error('FAILED: ' + what);
  await page.screenshot({ path: path.join(shots, 'dev-failure.png'), fullPage: true });
  await browser.close();
  process.exit(1);
}
async function check(cond, what) {
  ++checks;
  if (!cond) await fail(what);
  console.log('ok: ' + what);
}
const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));

// 1. Without a token: refused, nothing shown.
await page.goto(url + '#dev');
await page.waitForSelector('#denied');
await check((await page.$('#dev-tags')) === null, 'without a token the developer pages show nothing');

// 2. With the developer's token: the tags.
await page.fill('#token', token);
await page.press('#token', 'Enter');
await page.waitForSelector('#dev-tags');
const tagRow = await page.textContent(`#dev-tags tr[data-tag="${want.tag}"]`);
await check(tagRow.includes(want.program) && tagRow.includes(String(want.runs)),
            `the tags list ${want.tag} of ${want.program} with its ${want.runs} runs`);
await page.screenshot({ path: path.join(shots, 'dev-tags.png'), fullPage: true });

// 3. The tag: a row per segment, and a bar per run with the run's value.
await page.click(`#dev-tags tr[data-tag="${want.tag}"] a`);
await page.waitForSelector('#dev-segments');
const segments = await page.$$eval('#dev-segments tbody tr', (rows) => rows.map((r) => r.dataset.segment));
await check(JSON.stringify(segments.slice().sort()) === JSON.stringify(want.segments.map((s) => s.name).sort()),
            `the segments are ${want.segments.map((s) => s.name).join(', ')}`);
for (let k = 0; k < want.segments.length; ++k) {
  const s = want.segments[k];
  const bars = await page.$$eval(`#runs-${k} rect.bar`, (rs) => rs.map((r) => parseFloat(r.dataset.v)));
  const expected = s.per_run_ns.filter((v) => v !== null);
  await check(bars.length === expected.length && bars.every((v, i) => close(v, expected[i])),
              `${s.name}: ${bars.length} bars, one per run, each the run's value`);
}
await check((await page.$('#dev-clean')) !== null, 'no run is named dirty among three alike');
await page.screenshot({ path: path.join(shots, 'dev-tag.png'), fullPage: true });

// 4. A day range before the runs: none.
await page.fill('#f-to', '2001-01-01');
await page.click('#dev-filters button[type="submit"]');
await page.waitForSelector('#dev-none');
await check(true, 'a day range before the runs shows none');

// 5. Forgotten token: refused again.
await page.click('#token-clear');
await page.waitForSelector('#denied');
await check((await page.$('#dev-segments')) === null, 'after forgetting the token nothing is shown');

await check(jsErrors.length === 0, 'no JavaScript errors: ' + jsErrors.join('; '));
await browser.close();
console.log(`${checks} checks passed; screenshots in ${shots}`);
