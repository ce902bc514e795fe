// The page of a recording (record show --html) in a real browser: Debian's
// chromium, headless, driven by npm's playwright-core (installed for the
// dashboard's tests in tests/aggregator/ui/). record_test.cc writes the page
// and checks what this prints against the CLI's answers for the same ranges.
//
//   node tests/tools/record/record_page.mjs PAGE.html FROM_NS TO_NS SCREENSHOT_DIR
//
// Opens the page; drags across the timeline from FROM_NS to TO_NS; picks
// the busiest thread; ticks "exact"; clicks the widest frame under the
// root to zoom into it. Prints one JSON object with the page's state after
// each step. Exits 1 on a failed check or any JavaScript error.
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, fromNs, toNs, shots] = process.argv.slice(2);
const { page, fail, finish } = await openPage(pagePath, shots, 'record');
const state = () => page.evaluate(() => window.fieldprofRecording.state());
const out = { whole: await state() };

// 0. The page's range answers against a scan of its own samples, for
// random ranges whose ends fall on, just before and just after samples.
out.property = await page.evaluate(() => {
  const fp = window.fieldprofRecording;
  const { times, types } = fp.samples(0);
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const end = () => times[rand(times.length)] + (rand(3) - 1);
  let ranges = 0;
  for (let k = 0; k < 300; ++k) {
    let t1 = end(), t2 = end();
    if (t1 > t2) [t1, t2] = [t2, t1];
    const truth = new Map();
    let n = 0;
    for (let i = 0; i < times.length; ++i) {
      if (times[i] < t1 || times[i] > t2) continue;
      truth.set(types[i], (truth.get(types[i]) || 0) + 1);
      ++n;
    }
    for (const exact of [false, true]) {
      const q = fp.query(0, t1, t2, exact);
      if (q.samples !== n) return `[${t1}, ${t2}] exact=${exact}: ${q.samples} samples, a scan finds ${n}`;
      if (exact && q.other !== 0) return `[${t1}, ${t2}]: exact but other=${q.other}`;
      const got = new Map(q.counts);
      for (const [ty, c] of truth) {
        const g = got.get(ty) || 0;
        if (g > c || c > g + q.other) return `[${t1}, ${t2}] exact=${exact} type ${ty}: ${g} (other ${q.other}), a scan finds ${c}`;
      }
      for (const [ty, g] of got) if (!truth.has(ty)) return `[${t1}, ${t2}]: type ${ty} counted ${g}, not in the range`;
    }
    ++ranges;
  }
  return ranges;
});
if (out.property !== 300) await fail('range answers: ' + out.property);
if (out.whole.frames.length === 0) await fail('the whole recording draws no frame');

// 1. A range dragged on the timeline, as a user drags it.
const x1 = await page.evaluate((t) => window.fieldprofRecording.xOf(t), Number(fromNs));
const x2 = await page.evaluate((t) => window.fieldprofRecording.xOf(t), Number(toNs));
const y = await page.evaluate(() => window.fieldprofRecording.yOfLane(0));
await page.mouse.move(x1, y);
await page.mouse.down();
await page.mouse.move((x1 + x2) / 2, y, { steps: 4 });
await page.mouse.move(x2, y, { steps: 4 });
await page.mouse.up();
out.range = await state();
const shown = await page.textContent('#range');
if (out.range.from_ns === out.whole.from_ns && out.range.to_ns === out.whole.to_ns) await fail('the drag selected nothing');
await page.screenshot({ path: path.join(shots, 'record-range.png'), fullPage: true });

// 2. One thread: the busiest (the first after "all threads").
const tid = await page.$eval('#thread', (s) => s.options[1].value);
await page.selectOption('#thread', tid);
out.thread = await state();
if (String(out.thread.tid) !== tid) await fail('the thread was not selected');

// 3. Exact: "other" counted too.
await page.check('#exact');
out.exact = await state();

// 4. A click on the widest frame below the root zooms into it: it then
// spans the flame graph's width.
const target = await page.evaluate(() => {
  const gs = [...document.querySelectorAll('#flame g:not(.above)')];
  const widest = gs.map((g) => [g, Number(g.querySelector('rect').getAttribute('width'))])
      .filter(([g]) => g.querySelector('rect').getAttribute('y') !== '0')
      .sort((a, b) => b[1] - a[1])[0][0];
  const r = widest.querySelector('rect').getBoundingClientRect();
  return { x: r.left + Math.min(r.width / 2, 40), y: r.top + r.height / 2, i: Number(widest.dataset.i) };
});
await page.mouse.click(target.x, target.y);
const zoom = await page.evaluate(() => {
  const width = document.getElementById('flame-box').clientWidth;
  const focus = [...document.querySelectorAll('#flame g:not(.above)')][0];
  return { width, focus_width: Number(focus.querySelector('rect').getAttribute('width')), above: document.querySelectorAll('#flame g.above').length };
});
out.zoom = zoom;
await page.screenshot({ path: path.join(shots, 'record-zoom.png'), fullPage: true });
// Escape zooms back out.
await page.keyboard.press('Escape');
out.unzoomed_above = await page.evaluate(() => document.querySelectorAll('#flame g.above').length);

// 5. Search marks the frames that match.
await page.fill('#search', 'spin');
out.search_marked = await page.evaluate(() => document.querySelectorAll('#flame g.match').length);
out.range_text = shown;

await finish(out);
