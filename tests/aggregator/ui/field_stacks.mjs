// A module's field stacks on the dashboard's module page: the flame graph
// of GET /v1/stacks, drawn by the page kit (kit.js fieldFlame).
//
//   node tests/aggregator/ui/field_stacks.mjs URL MODULE WANT_JSON SCREENSHOT_DIR
//
// WANT_JSON: {"root": frame every stack begins with, "root_ns": its time,
// "frames": frames that must be drawn, "absent": frames that must not,
// "zoom": a frame to click, "gzip" (optional): whether the answer must
// come gzipped}. Prints what it checked; exits 1 on the first
// failed check or on any JavaScript error. Also prints the time the page
// took to draw the graph (data-draw-ms), for the benchmarks.
import fs from 'node:fs';
import { openDashboard } from './dashboard_browser.mjs';

const [url, module, wantFile, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(wantFile, 'utf8'));
const { page, check, shot, finish } = await openDashboard(shots, 'stacks-');

const encodings = [];  // of each /v1/stacks answer
page.on('response', async (r) => {
  if (r.url().includes('/v1/stacks?')) encodings.push((await r.allHeaders())['content-encoding'] || '');
});
await page.goto(url + '#module/' + encodeURIComponent(module));
const section = await page.waitForSelector('#stacks[data-ready]', { timeout: 60000 });
await check(await section.isVisible(), 'the module page shows its field stacks');
if (want.gzip !== undefined) {
  const got = encodings.length ? encodings[encodings.length - 1] : '(none seen)';
  await check(got === (want.gzip ? 'gzip' : ''), `the answer came with Content-Encoding "${got}"`);
}
const frames = () => page.$$eval('#stacks-flame g', (gs) => gs.map((g) => ({
  name: g.dataset.name,
  total: Number(g.dataset.total),
  width: Number(g.querySelector('rect').getAttribute('width')),
  above: g.classList.contains('above'),
})));
let drawn = await frames();
const root = drawn.find((f) => f.name === want.root);
await check(root !== undefined, `the root frame ${want.root} is drawn`);
await check(root.total === want.root_ns, `it holds all the time: ${root.total} == ${want.root_ns}`);
const widest = Math.max(...drawn.map((f) => f.width));
await check(root.width === widest, `it is the widest frame (${root.width})`);
for (const name of want.frames) {
  await check(drawn.some((f) => f.name === name), `the frame ${name} is drawn`);
}
for (const name of want.absent) {
  await check(!drawn.some((f) => f.name === name), `no frame ${name} (a stack too rare to publish)`);
}
await shot('module');
// A click zooms on a frame: it fills the width, the note says so.
const target = await page.$(`#stacks-flame g[data-name="${want.zoom}"]`);
await check(target !== null, `the frame ${want.zoom} can be clicked`);
await target.click();
drawn = await frames();
const zoomed = drawn.find((f) => f.name === want.zoom && !f.above);
await check(zoomed !== undefined && zoomed.width >= widest - 1, `${want.zoom} fills the width when zoomed`);
const note = await page.textContent('#stacks-focus');
await check(note.includes('Zoomed on ' + want.zoom), `the note says so: ${note}`);
await shot('zoomed');
const ms = await page.getAttribute('#stacks', 'data-draw-ms');
const fetchMs = await page.getAttribute('#stacks', 'data-fetch-ms');
console.log(`draw: ${ms} ms (after ${fetchMs} ms fetching /v1/stacks) for ` +
            `${await page.$$eval('#stacks-flame g', (g) => g.length)} frames`);
await finish();
