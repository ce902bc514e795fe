// A module's field point sums on the dashboard's module page,
// in Debian's chromium driven by playwright-core, against a live
// aggregator holding measured runs' point series.
// tests/tools/points/points_dev_test.cc writes what the page must show
// (from `fieldprof points field --json` on the same aggregator):
//
//   node tests/aggregator/ui/points_module.mjs URL EXPECT.json SCREENSHOT_DIR
//
// Prints what it checked; exits 1 on the first failed check, or on any
// JavaScript error on the page.
import fs from 'node:fs';
import { openDashboard } from './dashboard_browser.mjs';

const [url, expectFile, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const { page, check, shot, finish } = await openDashboard(shots, 'points-', { width: 1200, height: 900 });

await page.goto(url + '#module/' + encodeURIComponent(want.module));
await page.waitForSelector('#points');
const rows = await page.$$eval('#points tbody tr', (rs) => rs.map((r) => ({
  symbol: r.dataset.symbol,
  cells: [...r.querySelectorAll('td')].map((td) => td.textContent),
})));
await check(rows.length === want.points.length,
            `a row per point series: ${rows.length} of ${want.points.length}`);
for (const p of want.points) {
  const row = rows.find((r) => r.cells[0] === p.tag && r.cells[1] === p.segment);
  await check(row !== undefined && row.cells[3].replace(/,/g, '') === String(p.count) &&
              row.cells[2].replace(/,/g, '') === String(p.runs),
              `${p.tag}: ${p.segment}, ${p.count} times over ${p.runs} runs`);
}
await check((await page.$('#no-data')) === null, 'a module with points only is not "no data"');
await shot('module');
await finish();
