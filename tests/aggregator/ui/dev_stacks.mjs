// The developer's tag page shows where each segment's points were passed
// (runs recorded with --stacks), in a real browser: Debian's chromium,
// headless, driven by npm's playwright-core. points_dev_test.cc uploads
// the runs and writes what the page must show, from `fieldprof points show
// --stacks --json` on the same runs:
//
//   node tests/aggregator/ui/dev_stacks.mjs URL EXPECT.json TOKEN SCREENSHOT_DIR
//
// EXPECT: {program, segment, site, stacks (how many the site has),
// events (of its most frequent stack), frames (that stack's, innermost
// first)}. Exits 1 on the first failed check or any JavaScript error.
import fs from 'node:fs';
import { openDashboard } from './dashboard_browser.mjs';

const [url, expectFile, token, shots] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const { page, check, shot, finish } = await openDashboard(shots, 'dev-stacks-', { width: 1200, height: 900 });

await page.goto(url + '#dev');
await page.fill('#token', token);
await page.press('#token', 'Enter');
await page.waitForSelector('#dev-tags');
await page.click(`#dev-tags tr[data-tag="stacks"][data-program="${want.program}"] a`);
await page.waitForSelector('#dev-segments');

// The segment's section, and in it the site's stacks.
const section = await page.evaluateHandle((name) =>
  [...document.querySelectorAll('section.segment')].find((s) => s.querySelector('h2').textContent === name),
  want.segment);
await check(await section.evaluate((s) => s !== undefined), `the page has a section for ${want.segment}`);
const site = await section.evaluate((s, name) => {
  const d = s.querySelector('details.segment-stacks');
  const div = d && d.querySelector(`div.site[data-site="${name}"]`);
  if (!div) return null;
  const stacks = [...div.querySelectorAll('li.stack')];
  return {
    open: d.open,
    shown: stacks.length,
    events: stacks.length ? Number(stacks[0].dataset.events) : 0,
    frames: stacks.length ? [...stacks[0].querySelectorAll('li.frame')].map((f) => f.textContent) : [],
    note: div.querySelector('p.note').textContent,
  };
}, want.site);
await check(site !== null && site.open, `${want.segment} shows where ${want.site} was begun`);
await check(site.shown === Math.min(5, want.stacks), `its ${Math.min(5, want.stacks)} most frequent stacks`);
await check(site.events === want.events, `the first is the most frequent: ${want.events} events`);
const frames = want.frames.slice(0, 16);
await check(JSON.stringify(site.frames) === JSON.stringify(frames),
            `its frames, innermost first, are the command's: ${frames.slice(0, 4).join(' < ')} ...`);
await check(site.frames.length >= 3 && !site.frames.slice(0, 3).some((f) => /\+0x/.test(f)),
            'the program\'s frames are named, though the aggregator never had the program');
await shot('tag');
await finish();
