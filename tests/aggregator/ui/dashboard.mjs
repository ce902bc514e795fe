// The dashboard in a real browser: Debian's chromium, headless,
// driven by npm's playwright-core against a live aggregator with data.
// tests/aggregator/ui/dashboard_test.cc starts the aggregator, posts the data and
// writes the expected figures (computed from the histograms it posted):
//
//   node tests/aggregator/ui/dashboard.mjs URL EXPECT.json TOKEN SCREENSHOT_DIR
//
// Prints what it checked; exits 1 on the first failed check, or on any
// JavaScript error on the page.
import fs from 'node:fs';
import { openDashboard } from './dashboard_browser.mjs';

const [url, expectFile, token, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const { page, check, shot, finish } = await openDashboard(shots, '');
const dataV = async (selector) => parseFloat(await page.getAttribute(selector, 'data-v'));

// 1. Modules.
await page.goto(url);
await page.waitForSelector('#modules');
const modules = await page.$$eval('#modules tbody tr', (rows) => rows.map((r) => r.dataset.module));
await check(modules.includes(want.open_module) && modules.includes(want.vendor_module),
            `the modules page lists ${want.open_module} and ${want.vendor_module}`);
const lockedText = await page.textContent(`tr[data-module="${want.vendor_module}"]`);
// Versions read as people read them: "3.40.1-2 (5221b80b)", not the key's token.
const openRow = await page.textContent(`tr[data-module="${want.open_module}"]`);
await check(want.readable_versions.every((v) => openRow.includes(v)) && !openRow.includes(want.versions[0]),
            `the modules page shows versions as ${want.readable_versions.join(', ')}: ${openRow}`);
await check(lockedText.includes('vendor token needed'), 'the vendor module is marked as needing a token');
await shot('modules');

// 2. Module -> its APIs, with the keyboard.
await page.focus(`a[href="#module/${encodeURIComponent(want.open_module)}"]`);
await page.keyboard.press('Enter');
await page.waitForSelector('#apis');
for (const [symbol, e] of Object.entries(want.apis)) {
  const row = `#apis tr[data-symbol="${symbol}"]`;
  await check((await page.$(row)) !== null, `${symbol} is listed`);
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.getAttribute('data-v')));
  // Columns: share, API, calls, runs, calls/run, p50, p90, p99, mean.
  await check(parseFloat(cells[2]) === e.calls, `${symbol}: calls ${cells[2]} = ${e.calls}`);
  await check(parseFloat(cells[5]) === e.p50, `${symbol}: p50 ${cells[5]} = ${e.p50}`);
  await check(parseFloat(cells[6]) === e.p90, `${symbol}: p90 ${cells[6]} = ${e.p90}`);
  await check(parseFloat(cells[8]) === e.mean, `${symbol}: mean ${cells[8]} = ${e.mean}`);
  await check(Math.abs(parseFloat(cells[0]) - e.share) < 1e-12, `${symbol}: share ${cells[0]} = ${e.share}`);
  const bars = await page.$$(`${row} svg rect`);
  await check(bars.length > 0, `${symbol}: its histogram is drawn`);
}
await shot('module');

// Sorting from the keyboard: Enter on "calls" orders the rows by calls.
await page.focus('#apis th:nth-child(3)');
await page.keyboard.press('Enter');
const calls = await page.$$eval('#apis tbody tr td:nth-child(3)', (tds) => tds.map((td) => parseFloat(td.getAttribute('data-v'))));
await check(calls.every((c, i) => i === 0 || calls[i - 1] <= c), `Enter on a header sorts: ${calls}`);

// 3. Module -> API.
await page.click(`#apis tr[data-symbol="${want.api.symbol}"] a`);
await page.waitForSelector('section[data-metric="wall_time_ns"]');
const apiCalls = await dataV('section[data-metric="wall_time_ns"] dd[data-stat="calls"]');
await check(apiCalls === want.api.calls, `the API page shows ${apiCalls} calls = ${want.api.calls}`);
const apiP50 = await dataV('section[data-metric="wall_time_ns"] dd[data-stat="p50"]');
await check(apiP50 === want.api.p50, `the API page's p50 ${apiP50} = ${want.api.p50}`);
await check((await page.$$('section[data-metric="wall_time_ns"] svg rect')).length > 0, "the API page draws its histogram");
await shot('api');

// 4. Dates: a range without data, then today's.
await page.goto(url + '#module/' + encodeURIComponent(want.open_module));
await page.waitForSelector('#filters');
await page.fill('#f-from', '2001-01-01');
await page.fill('#f-to', '2001-01-02');
await page.click('#apply');
await page.waitForSelector('#no-data');
await check(true, 'a date range without data says so');
await page.fill('#f-from', want.today);
await page.fill('#f-to', want.today);
await page.click('#apply');
await page.waitForSelector('#apis');
const today = await dataV(`#apis tr[data-symbol="${want.api.symbol}"] td:nth-child(3)`);
await check(today === want.api.calls, `today's range shows the day's ${today} calls`);
await shot('dates');

// 5. Two versions compared, offered by their readable names.
const offered = await page.$$eval('#c-a option', (os) => os.map((o) => o.textContent));
await check(JSON.stringify(offered) === JSON.stringify(want.readable_versions),
            `the versions offered read ${offered.join(', ')}`);
await page.selectOption('#c-a', want.versions[0]);
await page.selectOption('#c-b', want.versions[1]);
await page.click('#compare-go');
await page.waitForSelector('#diff');
for (const [symbol, verdict] of Object.entries(want.verdicts)) {
  const v = await page.textContent(`#diff tr[data-symbol="${symbol}"] td.verdict`);
  await check(v === verdict, `${symbol}: ${want.versions[0]} -> ${want.versions[1]} is ${v} (want ${verdict})`);
}
const compareTitle = await page.textContent('h1');
await check(compareTitle.includes(`${want.readable_versions[0]} \u2192 ${want.readable_versions[1]}`),
            `the comparison is titled ${compareTitle}`);
await shot('compare');

// Two date ranges compared: the same day twice, so nothing changed.
await page.goto(url + '#module/' + encodeURIComponent(want.open_module));
await page.waitForSelector('#compare-ranges');
for (const id of ['#r-a-from', '#r-a-to', '#r-b-from', '#r-b-to']) await page.fill(id, want.today);
await page.click('#compare-ranges-go');
await page.waitForSelector('#diff');
const summary = await page.textContent('#summary');
await check(summary.includes('0 slower, 0 faster'), `the same day against itself: ${summary}`);

// 6. A vendor page: refused without the token, shown with it.
await page.goto(url + '#module/' + encodeURIComponent(want.vendor_module));
await page.waitForSelector('#denied');
await check((await page.$('#apis')) === null, 'without the token the vendor page shows no data');
await shot('vendor-refused');
await page.fill('#token', token);
await page.press('#token', 'Enter');
await page.waitForSelector('#apis');
await check((await page.$(`#apis tr[data-symbol="${want.vendor_symbol}"]`)) !== null,
            'with the token the vendor page shows its APIs');
await shot('vendor');

// 7. Figures under the timing resolution read "< 10 ns", in the cells and
// the histogram's tooltips, as in the command line (never "0.00 ns").
await page.goto(url + '#module/' + encodeURIComponent(want.tiny_module));
await page.waitForSelector('#apis tr[data-symbol="tiny_call"]');
const tinyCells = await page.$$eval('#apis tr[data-symbol="tiny_call"] td', (tds) => tds.map((td) => td.textContent));
await check(tinyCells[5] === '< 10 ns' && tinyCells[6] === '< 10 ns' && tinyCells[8].startsWith('< 10 ns'),
            `values under the resolution read "< 10 ns": p50 ${tinyCells[5]}, p90 ${tinyCells[6]}, mean ${tinyCells[8]}`);
const tips = await page.$$eval('#apis tr[data-symbol="tiny_call"] svg title', (ts) => ts.map((t) => t.textContent));
await check(tips.length > 0 && tips.every((t) => t.startsWith('< 10 ns:')), `its histogram's tooltips: ${tips.join(' | ')}`);
await page.click('#apis tr[data-symbol="tiny_call"] a');
await page.waitForSelector('section[data-metric="wall_time_ns"]');
const tinyP50 = await page.textContent('section[data-metric="wall_time_ns"] dd[data-stat="p50"]');
await check(tinyP50 === '< 10 ns', `the API page's p50 reads ${tinyP50}`);
await shot('resolution');

// 8. Seen recently.
await page.goto(url + '#recent');
await page.waitForSelector('#recent');
const recent = await page.textContent('#recent');
await check(recent.includes(want.open_module), 'the APIs seen recently are listed');
await shot('recent');

await finish();
