// The points page (fieldprof points show --html) in a real browser:
// Debian's chromium, headless, driven by npm's playwright-core.
// points_record_test.cc writes the page and checks what this prints.
//
//   node tests/tools/points/points_page.mjs PAGE.html SCREENSHOT_DIR [--histograms|--compare]
//
// Opens the page, then ticks "show the runs removed as dirty". Prints one
// JSON object with the page's state before and after, and the tooltip of
// a dirty bar. Exits 1 on a failed step or any JavaScript error. With
// --histograms (runs with no dirty one), the tooltip is a histogram
// bucket's instead, the slowest one drawn. With --compare (a page of
// points compare --html), the comparison page's state and a dot's tooltip.
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, shots, mode] = process.argv.slice(2);
const { page, fail, finish } = await openPage(pagePath, shots, 'points');
// The comparison page (points compare --html): its state, and the
// tooltip of B's last dot.
if (mode === '--compare') {
  const out = { state: await page.evaluate(() => window.fieldprofCompare.state()), title: await page.title() };
  const dot = page.locator('circle.dot-b').last();  // drawn last: on top of the others
  if ((await dot.count()) === 0) await fail('no dot of B is drawn');
  await dot.hover();
  out.tip = await page.locator('#tip').textContent();
  await page.screenshot({ path: path.join(shots, 'points-compare.png'), fullPage: true });
  await finish(out);
  process.exit(0);
}
const state = () => page.evaluate(() => window.fieldprofPoints.state());
const out = { first: await state(), title: await page.title() };
await page.check('#show-removed');
out.removed = await state();
const hovered = mode === '--histograms' ? page.locator('rect.bucket').last() : page.locator('rect.dirty').first();
if ((await hovered.count()) === 0) await fail(mode === '--histograms' ? 'no histogram is drawn' : 'no dirty bar is drawn');
await hovered.hover();
out.tip = await page.locator('#tip').textContent();
await page.screenshot({ path: path.join(shots, mode === '--histograms' ? 'points-calls.png' : 'points.png'), fullPage: true });
await finish(out);
