// The dashboard of an aggregator that holds everything back (fewer than k
// machines have sent anything): the modules page must say so, with the
// counts the aggregator gives, instead of an empty table and no word.
//
//   node tests/aggregator/ui/below_k.mjs URL SERIES MODULES MACHINES K SCREENSHOT_DIR
//
// Prints what it checked; exits 1 on the first failed check or on any
// JavaScript error on the page.
import { openDashboard } from './dashboard_browser.mjs';

const [url, series, modules, machines, k, shots] = process.argv.slice(2);
const { page, check, shot, finish } = await openDashboard(shots, 'below-k-');

await page.goto(url);
await page.waitForSelector('#modules');
const rows = await page.$$eval('#modules tbody tr', (r) => r.length);
await check(rows === 0, `the modules table is empty (${rows} rows)`);
const note = await page.waitForSelector('#withheld');
await check(await note.isVisible(), 'the held-back note is shown');
const text = await note.textContent();
for (const part of [`Held back until ${k} machines`, `${series} series`,
                    `${modules} modules not shown at all`,
                    `sent from ${machines} machine${machines === '1' ? '' : 's'}`,
                    'k_anonymity']) {
  await check(text.includes(part), `the note says "${part}": ${text}`);
}
await shot('modules');
await finish();
