// The call tree's page (fieldprof tree ... --html) in a real browser:
// Debian's chromium, headless, driven by npm's playwright-core (installed
// for the dashboard's tests in tests/aggregator/ui/). tree_test.cc writes
// the page and checks what this prints.
//
//   node tests/tools/local/tree_page.mjs PAGE.html FUNCTION SCREENSHOT_DIR
//
// Opens the page; types FUNCTION into the search box; clicks the widest
// frame named FUNCTION; presses Escape. Prints one JSON object with the
// page's state after each step. Exits 1 on a failed step or any
// JavaScript error.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../aggregator/ui/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const [pagePath, fn, shots] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.FIELDPROF_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
  headless: true,
});
const page = await (await browser.newContext({ viewport: { width: 1300, height: 900 } })).newPage();
const jsErrors = [];
page.on('pageerror', (e) => jsErrors.push('page error: ' + e.message));
page.on('console', (m) => { if (m.type() === 'error') jsErrors.push('console error: ' + m.text()); });

async function fail(what) {
  console.error('FAILED: ' + what);
  await page.screenshot({ path: path.join(shots, 'tree-failure.png'), fullPage: true });
  await browser.close();
  process.exit(1);
}
const state = () => page.evaluate(() => window.fieldprofTree.state());

await page.goto('file://' + path.resolve(pagePath));
await page.waitForSelector('body[data-ready="1"]', { timeout: 20000 }).catch(() => fail('the page never got ready: ' + jsErrors.join('; ')));
const out = { whole: await state(), title: await page.title() };

await page.fill('#search', fn);
out.search = await state();

// The widest frame named `fn`, clicked where it is drawn.
const target = out.search.drawn.filter((d) => d.name === fn).sort((a, b) => b.w - a.w)[0];
if (!target) await fail('no frame named ' + fn + ' is drawn');
const box = await page.locator('#flame').boundingBox();
await page.mouse.click(box.x + target.x + Math.min(target.w / 2, 20), box.y + target.depth * 17 + 8);
out.zoomed = await state();
await page.screenshot({ path: path.join(shots, 'tree-zoomed.png'), fullPage: true });

await page.keyboard.press('Escape');
out.escaped = await state();

if (jsErrors.length > 0) await fail(jsErrors.join('; '));
await browser.close();
console.log(JSON.stringify(out));
