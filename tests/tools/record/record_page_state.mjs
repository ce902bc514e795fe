// A recording's page (record show --html) opened in Debian's chromium, as
// it first draws: prints window.fieldprofRecording.state() as JSON (the
// range, each drawn frame, the frames marked as costing more than the
// field). Exits 1 on any JavaScript error.
//
//   node tests/tools/record/record_page_state.mjs PAGE.html SCREENSHOT_DIR SHOT_NAME
import path from 'node:path';
import { openPage } from '../page/browser.mjs';

const [pagePath, shots, shot] = process.argv.slice(2);
const { page, finish } = await openPage(pagePath, shots, 'record-state');
const out = await page.evaluate(() => window.fieldprofRecording.state());
await page.screenshot({ path: path.join(shots, shot), fullPage: true });
await finish(out);
