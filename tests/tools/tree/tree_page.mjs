// The call tree's page (fieldprof tree ... --html) in a real browser:
// Debian's chromium, headless, driven by npm's playwright-core (installed
// for the dashboard's tests in tests/aggregator/ui/). tree_test.cc writes
// the page and checks what this prints.
//
//   node tests/tools/tree/tree_page.mjs PAGE.html FUNCTION SCREENSHOT_DIR
//
// Opens the page; types FUNCTION into the search box; clicks the widest
// frame named FUNCTION; presses Escape. Prints one JSON object with the
// page's state after each step. Exits 1 on a failed step or any
// JavaScript error.
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, fn, shots] = process.argv.slice(2);
const { page, fail, finish } = await openPage(pagePath, shots, 'tree');
const state = () => page.evaluate(() => window.fieldprofTree.state());
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

await finish(out);
