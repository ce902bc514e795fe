// The vendor's report page (fieldprof report --format html) in a real
// browser: Debian's chromium, headless, driven by npm's playwright-core.
// report_test.cc writes the page and checks what this prints.
//
//   node tests/tools/vendor/report_page.mjs PAGE.html SCREENSHOT_DIR
//
// Prints one JSON object: per row of the APIs' table, its symbol, the
// histogram the page kit drew (bars, their counts' sum, the first bar's
// tooltip); then the symbols in their order after a click on "calls".
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, shots] = process.argv.slice(2);
const { page, finish } = await openPage(pagePath, shots, 'report');
const rows = () => page.$$eval('#apis tbody tr', (trs) => trs.map((tr) => {
  const bars = [...tr.querySelectorAll('svg.hist rect.bucket')];
  return {
    symbol: tr.querySelector('td.name').getAttribute('title'),
    calls: Number(tr.cells[2].getAttribute('data-v')),
    bars: bars.length,
    counted: bars.reduce((s, b) => s + Number(b.getAttribute('data-count')), 0),
    tip: bars.length ? bars[0].querySelector('title').textContent : null,
    marks_left: tr.querySelectorAll('svg[data-buckets]').length,
  };
}));
const out = { rows: await rows() };
await page.screenshot({ path: path.join(shots, 'report.png'), fullPage: true });
await page.click('#apis th:nth-child(3)');
out.sorted = (await rows()).map((r) => r.calls);
await finish(out);
