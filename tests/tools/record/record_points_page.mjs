// The points on a recording's page (record show --html) in Debian's
// chromium: the spans drawn above the threads' lanes, one clicked as a
// user clicks it. record_test.cc checks what this prints against
// `record show --during` for the same span.
//
//   node tests/tools/record/record_points_page.mjs PAGE.html SPAN_NAME SCREENSHOT_DIR
//
// Prints one JSON object: the spans the page draws, the one clicked, and
// the page's state after the click. Exits 1 on a failed check or any
// JavaScript error.
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, spanName, shots] = process.argv.slice(2);
const { page, fail, finish } = await openPage(pagePath, shots, 'record-points');
const out = { spans: await page.evaluate(() => window.fieldprofRecording.spans()) };
const span = out.spans.find((s) => s.name === spanName);
if (!span) await fail(`no span ${spanName} on the page: ${out.spans.map((s) => s.name).join(', ')}`);
out.span = span;
// Hovering names it; a click selects its range, on its thread.
await page.mouse.move(span.x, span.y);
out.tooltip = await page.$eval('#timeline', (c) => c.title);
await page.mouse.click(span.x, span.y);
await page.waitForFunction((b) => window.fieldprofRecording.state().from_ns === b, span.begin_ns);
out.state = await page.evaluate(() => window.fieldprofRecording.state());
out.thread_picked = await page.$eval('#thread', (s) => s.value);
await page.screenshot({ path: path.join(shots, 'record-points.png'), fullPage: true });
await finish(out);
