// The dashboard's developer pages in a real browser: Debian's
// chromium, headless, driven by npm's playwright-core, against a live
// aggregator holding a developer's runs. tests/tools/points/points_dev_test.cc
// uploads the runs and writes what the pages must show (from `fieldprof
// points show --json` on the same runs):
//
//   node tests/aggregator/ui/dev_pages.mjs URL EXPECT.json TOKEN SCREENSHOT_DIR
//
// Prints what it checked; exits 1 on the first failed check, or on any
// JavaScript error on the page.
import fs from 'node:fs';
import { openDashboard } from './dashboard_browser.mjs';

const [url, expectFile, token, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const { page, check, shot, finish } = await openDashboard(shots, 'dev-', { width: 1200, height: 900 });
const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));

// 1. Without a token: refused, nothing shown.
await page.goto(url + '#dev');
await page.waitForSelector('#denied');
await check((await page.$('#dev-tags')) === null, 'without a token the developer pages show nothing');

// 2. With the developer's token: the tags.
await page.fill('#token', token);
await page.press('#token', 'Enter');
await page.waitForSelector('#dev-tags');
const tagRow = await page.textContent(`#dev-tags tr[data-tag="${want.tag}"][data-program="${want.program}"]`);
await check(tagRow.includes(want.program) && tagRow.includes(String(want.runs)),
            `the tags list ${want.tag} of ${want.program} with its ${want.runs} runs`);
await shot('tags');

// 3. The tag: a row per segment, and a bar per run with the run's value.
await page.click(`#dev-tags tr[data-tag="${want.tag}"][data-program="${want.program}"] a`);
await page.waitForSelector('#dev-segments');
const segments = await page.$$eval('#dev-segments tbody tr', (rows) => rows.map((r) => r.dataset.segment));
await check(JSON.stringify(segments.slice().sort()) === JSON.stringify(want.segments.map((s) => s.name).sort()),
            `the segments are ${want.segments.map((s) => s.name).join(', ')}`);
for (let k = 0; k < want.segments.length; ++k) {
  const s = want.segments[k];
  const bars = await page.$$eval(`#runs-${k} rect.bar`, (rs) => rs.map((r) => parseFloat(r.dataset.v)));
  const expected = s.per_run_ns.filter((v) => v !== null);
  await check(bars.length === expected.length && bars.every((v, i) => close(v, expected[i])),
              `${s.name}: ${bars.length} bars, one per run, each the run's value`);
}
// Each segment passed more than once a run: its occurrences' histogram,
// every one of them in its buckets.
for (let k = 0; k < want.segments.length; ++k) {
  const s = want.segments[k];
  if (s.each.count <= s.runs) continue;
  const held = await page.$$eval(`#each-${k} rect title`, (ts) => ts.map((t) => t.textContent))
      .catch(() => []);
  const sum = held.reduce((a, t) => a + parseInt(t.slice(t.lastIndexOf(': ') + 2).replace(/,/g, ''), 10), 0);
  await check(sum === s.each.count, `${s.name}: its ${s.each.count} occurrences drawn by log2 bucket`);
}
await check((await page.$('#dev-clean')) !== null, 'no run is named dirty among three alike');
await shot('tag');

// 3b. Compared with another build: a row per segment in both, its verdict,
// and a pair of bars (A's mean, B's) per segment.
if (want.compare) {
  await page.fill('#c-b_program', want.compare.b_program);
  await page.click('#dev-compare-form button[type="submit"]');
  await page.waitForSelector('#compare-segments');
  const rows = await page.$$eval('#compare-segments tbody tr',
      (rs) => rs.map((r) => ({ segment: r.dataset.segment, verdict: r.querySelector('.verdict').textContent })));
  const expected = want.compare.segments;
  await check(rows.length === expected.length &&
              expected.every((s) => rows.some((r) => r.segment === s.segment &&
                  (r.verdict === '—') === !s.significant)),
              `the comparison lists ${expected.length} segments, ${expected.filter((s) => s.significant).length} of them changed`);
  const a = await page.$$eval('#compare-bars rect.bar-a', (rs) => rs.map((r) => parseFloat(r.dataset.v)));
  const b = await page.$$eval('#compare-bars rect.bar-b', (rs) => rs.map((r) => parseFloat(r.dataset.v)));
  await check(a.length === expected.length && expected.every((s, i) => close(a[i], s.mean_a_ns) && close(b[i], s.mean_b_ns)),
              'a pair of bars per segment: A\'s mean and B\'s');
  // Where B's runs call a segment more often (ten times the rounds), what
  // a call costs, apart; elsewhere nothing there.
  const perCall = await page.$$eval('#compare-segments tbody tr', (rs) => rs.map((r) => ({
    segment: r.dataset.segment, calls: r.querySelector('.calls').textContent,
    text: r.querySelector('.per-call').textContent })));
  const differ = expected.filter((s) => s.calls_differ);
  await check(differ.length > 0 && expected.every((s) => perCall.some((r) => r.segment === s.segment &&
                  (s.calls_differ
                      ? r.text.includes('→') && r.calls.includes('→') &&
                        r.text.includes('B slower') === (s.per_call_significant && s.per_call_b_ns > s.per_call_a_ns) &&
                        r.text.includes('B faster') === (s.per_call_significant && s.per_call_b_ns < s.per_call_a_ns)
                      : r.text === '—' && !r.calls.includes('→')))),
              `${differ.map((s) => s.segment).join(', ')}: called more often in B, and a call compared apart`);
  const groups = await page.textContent('#group-b');
  // B's six runs, less any the page says were removed as dirty (a run
  // slowed by a busy machine may be: the count is the machine's, not ours).
  const counted = groups.match(/([0-9,]+) runs(?: \(([0-9]+) removed as dirty\))?/);
  await check(groups.includes(want.compare.b_program) && counted !== null &&
              parseInt(counted[1].replace(/,/g, ''), 10) + parseInt(counted[2] || '0', 10) === 6,
              'group B names its build and its runs');
  await shot('compare');
  // Stricter: q at most 0.1 and a least change of 1000%, set on the page.
  if (want.compare.strict) {
    await page.fill('#c-fdr', '0.1');
    await page.fill('#c-min_effect', '1000');
    await page.click('#dev-compare-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('.note') &&
        document.body.textContent.includes('q ≤ 0.1 '));
    const strictRows = await page.$$eval('#compare-segments tbody tr',
        (rs) => rs.map((r) => ({ segment: r.dataset.segment, verdict: r.querySelector('.verdict').textContent })));
    const strict = want.compare.strict;
    await check(strictRows.length === strict.length &&
                strict.every((s) => strictRows.some((r) => r.segment === s.segment &&
                    (r.verdict === '—') === !s.significant)),
                `with q ≤ 0.1 and a 1000% least change, ${strict.filter((s) => s.significant).length} segments changed, as points compare says`);
    await check((await page.textContent('body')).includes('at least 1000% of A'), 'the page states the least change it used');
  }
  await page.click('text=Back to the tag');
  await page.waitForSelector('#dev-segments');
}

// 3c. Chosen runs: on the tag's page across programs, tick A's and B's
// runs and compare; the verdicts are points compare's on those files.
if (want.pick) {
  // From the page of one program's runs to the page of all: wait for the
  // new table, which lists B's runs as well.
  const ids = want.pick.a.concat(want.pick.b);
  await page.goto(url + '#dev/' + encodeURIComponent(want.tag));
  await page.waitForFunction((ids) => {
    const rows = [...document.querySelectorAll('#dev-runs tbody tr')].map((r) => r.dataset.run);
    return ids.every((id) => rows.includes(id));
  }, ids);
  const listed = await page.$$eval('#dev-runs tbody tr', (rs) => rs.map((r) => r.dataset.run));
  await check(ids.every((id) => listed.includes(id)),
              `the runs table lists every run of the tag (${listed.length})`);
  await page.click('#pick-go');
  await check((await page.textContent('#pick-say')).includes('at least one run'), 'comparing nothing says what is missing');
  const box = (g, id) => `#pick-${g}-${id.slice(0, 8)}`;
  await page.check(box('a', want.pick.b[0]));
  await page.check(box('b', want.pick.b[0]));
  await check(!(await page.isChecked(box('a', want.pick.b[0]))), 'a run ticked for B leaves A');
  for (const id of want.pick.a) await page.check(box('a', id));
  for (const id of want.pick.b) await page.check(box('b', id));
  await shot('pick');
  await page.click('#pick-go');
  await page.waitForSelector('#compare-segments');
  const rows = await page.$$eval('#compare-segments tbody tr',
      (rs) => rs.map((r) => ({ segment: r.dataset.segment, verdict: r.querySelector('.verdict').textContent })));
  const expected = want.pick.segments;
  await check(rows.length === expected.length &&
              expected.every((s) => rows.some((r) => r.segment === s.segment &&
                  (r.verdict === '—') === !s.significant)),
              `chosen runs: ${expected.length} segments, ${expected.filter((s) => s.significant).length} changed, as points compare says on those files`);
  const a = await page.textContent('#group-a'), b = await page.textContent('#group-b');
  await check(a.includes(`${want.pick.a.length} chosen runs`) && b.includes(`${want.pick.b.length} chosen runs`),
              'each group says how many runs were chosen');
  await shot('pick-compare');
  await page.click('text=Back to the tag');
  await page.waitForSelector('#dev-segments');
}

// 4. A day range before the runs: none.
await page.fill('#f-to', '2001-01-01');
await page.click('#dev-filters button[type="submit"]');
await page.waitForSelector('#dev-none');
await check(true, 'a day range before the runs shows none');

// 5. Forgotten token: refused again.
await page.click('#token-clear');
await page.waitForSelector('#denied');
await check((await page.$('#dev-segments')) === null, 'after forgetting the token nothing is shown');

await finish();
