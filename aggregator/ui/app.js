// The fieldprof dashboard: pages over the aggregator's JSON query API.
// Every figure shown comes from the server (GET /v1/modules, /v1/report,
// /v1/api, /v1/diff, /v1/recent), which computes them with the same code as
// the command line; this file only lays them out. Raw values sit in data-v
// attributes beside their formatted text.
'use strict';

const METRICS = ['wall_time_ns', 'alloc_bytes_inclusive', 'alloc_bytes_exclusive', 'alloc_count',
                 'file_io_bytes', 'socket_io_bytes'];
const SVG = 'http://www.w3.org/2000/svg';
const main = document.getElementById('main');

// ------------------------------------------------------------ formatting

// Numbers as text, pictures and tables: the page kit (tools/page/kit.js),
// loaded before this file, the same as on the command line's pages.
const kit = fieldprofKit;
const fmtNs = kit.duration;
const fmtBytes = kit.bytes;
const fmtCount = kit.count;
function fmtPct(x) { return kit.percent(x, 1); }
function fmtMetric(metric, v, res) {
  if (metric === 'wall_time_ns') return fmtNsRes(v, res);
  if (metric === 'alloc_count') return isFinite(v) ? v.toFixed(2) : '-';
  return fmtBytes(v);
}
// A duration under the series' timing resolution cannot be told from 0
// (common/statistics/resolution.h): "< 10 ns", as the command line and hovers say.
const fmtNsRes = kit.durationAtResolution;
// A key's module version as people read it (common/wire/module_version.h):
// "3.40.1-2_5221b80bd99650e3" is package 3.40.1-2, build 5221b80b.
function fmtVersion(v) {
  const m = /^(.+)_([0-9a-f]{16})$/.exec(v);
  return m ? `${m[1]} (${m[2].slice(0, 8)})` : v;
}

// ------------------------------------------------------------ DOM helpers

const el = kit.el;
function cell(text, value) {
  return el('td', value === undefined ? {} : {'data-v': String(value)}, text);
}
function show(...nodes) {
  main.replaceChildren(...nodes);
  main.focus();
}

const sortable = kit.sortable;
function table(id, headers, rows) {
  const t = el('table', {id});
  t.append(el('thead', {}, el('tr', {}, ...headers.map(h => el('th', {scope: 'col'}, h)))));
  t.append(el('tbody', {}, ...rows));
  return sortable(t);
}

// A histogram of a metric in the field's log2 buckets (the kit's), each
// bar's range and count in its tooltip. `buckets`: [[index, count], ...],
// index -1 = zero.
function histogram(buckets, width, height, metric, labels, res) {
  const range = (i) => {
    if (i === -1) return zeroLabel(metric, res);
    if (metric === 'wall_time_ns' && res && 2 ** (i + 1) - 1 < res) return fmtNsRes(0, res);
    return fmtMetric(metric, 2 ** i) + ' .. ' + fmtMetric(metric, 2 ** (i + 1) - 1);
  };
  return kit.histogram(buckets, {width, height, labels, range, format: (v) => fmtMetric(metric, v)});
}

// The zero bucket: "0", or for wall time "< resolution".
function zeroLabel(metric, res) {
  return metric === 'wall_time_ns' && res ? fmtNsRes(0, res) : '0';
}

// ------------------------------------------------------------ data

function token() { return sessionStorage.getItem('fieldprof-token') || ''; }
async function getJson(url) {
  const headers = {};
  if (token()) headers['Authorization'] = 'Bearer ' + token();
  const r = await fetch(url, {headers});
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return {status: r.status, body};
}
function denied() {
  return el('p', {id: 'denied', class: 'error', role: 'alert'},
            "This module's pages need its vendor's token: enter it above.");
}
function failed(r) {
  return el('p', {class: 'error', role: 'alert'},
            'The aggregator answered ' + r.status + (r.body && r.body.error ? ': ' + r.body.error : ''));
}
function link(text, hash) { return el('a', {href: hash}, text); }
function enc(s) { return encodeURIComponent(s); }

// ------------------------------------------------------------ pages

async function modulesPage() {
  const r = await getJson('../v1/modules');
  if (r.status !== 200) return show(el('h1', {}, 'Modules'), failed(r));
  const search = el('input', {id: 'module-search', type: 'search', placeholder: 'filter', 'aria-label': 'filter modules'});
  const rows = r.body.modules.map(m => el('tr', {'data-module': m.module},
      el('td', {class: 'name'}, link(m.module, '#module/' + enc(m.module)),
         m.vendor && !m.open ? ' (vendor token needed)' : ''),
      cell(fmtCount(m.apis), m.apis), cell(fmtCount(m.calls), m.calls),
      el('td', {class: 'name'}, m.versions.map(fmtVersion).join(', '))));
  const t = table('modules', ['module', 'APIs', 'calls', 'versions'], rows);
  search.addEventListener('input', () => {
    const q = search.value.toLowerCase();
    rows.forEach(row => { row.hidden = !row.dataset.module.toLowerCase().includes(q); });
  });
  show(el('h1', {}, 'Modules'), el('p', {}, search), t, ...withheldNote(r.body));
}

// What the aggregator holds back until k machines have sent it (counts
// only), so that an empty or short table says why; empty when nothing is.
function withheldNote(body) {
  const w = body.withheld;
  const none = body.modules && body.modules.length === 0;
  if (!w || w.series <= 0) {
    return none ? [el('p', {id: 'withheld', class: 'note'}, 'No data yet: no agent has sent a batch here.')] : [];
  }
  const plural = (n, one, many) => fmtCount(n) + ' ' + (n === 1 ? one : many);
  return [el('p', {id: 'withheld', class: 'held', role: 'status'},
      el('strong', {}, 'Held back until ' + w.k + ' machines have sent them: '),
      plural(w.series, 'series', 'series') + (w.modules > 0 ? ' (' + plural(w.modules, 'module', 'modules') + ' not shown at all)' : '') +
      ', sent from ' + plural(w.machines, 'machine', 'machines') + ' so far. ' +
      'A series is published, here and in the snapshot, once ' + w.k +
      ' distinct machines have sent it; the aggregator\'s ' + w.setting +
      ' setting sets that number (1 publishes everything, for a trial on one machine).')];
}

function filtersForm(m, q, versions) {
  const f = el('form', {class: 'filters', id: 'filters'});
  const input = (name, label, type, value) => el('label', {}, label,
      el('input', {name, type, value: value || '', id: 'f-' + name}));
  const version = el('select', {name: 'version', id: 'f-version'}, el('option', {value: ''}, 'any'),
      ...versions.map(v => el('option', v === q.get('version') ? {value: v, selected: ''} : {value: v}, fmtVersion(v))));
  f.append(input('from', 'from', 'date', q.get('from')), input('to', 'to', 'date', q.get('to')),
           el('label', {}, 'version', version),
           input('platform', 'platform (arch/vendor/family)', 'text', q.get('platform')),
           input('namespace', 'namespace or class', 'text', q.get('namespace')),
           el('button', {type: 'submit', id: 'apply'}, 'Apply'));
  f.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['from', 'to', 'version', 'platform', 'namespace']) {
      const v = f.elements[k].value.trim();
      if (v) p.set(k, v);
    }
    location.hash = '#module/' + enc(m) + (p.toString() ? '?' + p : '');
  });
  return f;
}

function apiQuery(q) {
  const p = new URLSearchParams();
  for (const k of ['from', 'to', 'version', 'namespace']) if (q.get(k)) p.set(k, q.get(k));
  const plat = (q.get('platform') || '').split('/');
  if (plat[0]) p.set('arch', plat[0]);
  if (plat[1]) p.set('vendor', plat[1]);
  if (plat[2]) p.set('family', plat[2]);
  return p;
}

async function modulePage(m, q) {
  const p = apiQuery(q);
  p.set('module', m);
  const r = await getJson('../v1/report?' + p);
  const title = el('h1', {}, m);
  if (r.status === 401) return show(title, denied());
  if (r.status !== 200) return show(title, failed(r));
  const rep = r.body;
  const head = el('p', {id: 'summary'}, `${rep.apis.length} APIs, ${fmtCount(rep.calls)} calls, ` +
      `${fmtNs(rep.totals.wall_time_ns)} in all; ${rep.range}` + (rep.filters ? `; ${rep.filters}` : '') + '.');
  const note = el('p', {class: 'note'}, rep.weights + '. Click or press Enter on a column to sort.');
  const compare = el('form', {class: 'filters', id: 'compare'},
      el('label', {}, 'before', el('select', {name: 'a', id: 'c-a'}, ...rep.versions.map(v => el('option', {value: v}, fmtVersion(v))))),
      el('label', {}, 'after', el('select', {name: 'b', id: 'c-b'}, ...rep.versions.map((v, i) =>
          el('option', i === rep.versions.length - 1 ? {value: v, selected: ''} : {value: v}, fmtVersion(v))))),
      el('button', {type: 'submit', id: 'compare-go'}, 'Compare versions'));
  compare.addEventListener('submit', e => {
    e.preventDefault();
    location.hash = '#compare/' + enc(m) + '?a=' + enc(compare.elements.a.value) + '&b=' + enc(compare.elements.b.value);
  });
  const ranges = el('form', {class: 'filters', id: 'compare-ranges'},
      el('label', {}, 'before: from', el('input', {type: 'date', name: 'a_from', id: 'r-a-from'})),
      el('label', {}, 'to', el('input', {type: 'date', name: 'a_to', id: 'r-a-to'})),
      el('label', {}, 'after: from', el('input', {type: 'date', name: 'b_from', id: 'r-b-from'})),
      el('label', {}, 'to', el('input', {type: 'date', name: 'b_to', id: 'r-b-to'})),
      el('button', {type: 'submit', id: 'compare-ranges-go'}, 'Compare date ranges'));
  ranges.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['a_from', 'a_to', 'b_from', 'b_to']) p.set(k, ranges.elements[k].value);
    location.hash = '#compare/' + enc(m) + '?' + p;
  });
  // The module's instrumentation points (fieldprof/points.h), as the field
  // summed them: the time from each point of a tag to the next, and of each
  // scope.
  const points = (rep.points || []).length ? [el('h2', {}, 'Instrumentation points'),
      el('p', {class: 'note'}, 'Per tag: the time from each point to the next, and of each scope, ' +
         'over the measured runs that passed them.'),
      table('points', ['tag', 'segment', 'runs', 'count', 'mean', 'p50', 'p90', 'p99'], rep.points.map(pt =>
          el('tr', {'data-symbol': pt.symbol}, el('td', {class: 'name'}, pt.tag),
             el('td', {class: 'name'}, pt.segment), cell(fmtCount(pt.runs), pt.runs),
             cell(fmtCount(pt.count), pt.count), cell(fmtNs(pt.mean_ns), pt.mean_ns),
             cell(fmtNs(pt.p50_ns), pt.p50_ns), cell(fmtNs(pt.p90_ns), pt.p90_ns),
             cell(fmtNs(pt.p99_ns), pt.p99_ns))))] : [];
  if (!rep.apis.length) {
    show(title, filtersForm(m, q, rep.versions),
         points.length ? '' : el('p', {id: 'no-data'}, 'No data for these filters.'), ...points);
    return fieldStacksSection(m, q);
  }
  const rows = rep.apis.map(a => {
    const w = a.metrics.wall_time_ns || {};
    const res = a.resolution_ns || 0;
    const alloc = a.metrics.alloc_bytes_inclusive || {};
    return el('tr', {'data-symbol': a.symbol},
        cell(fmtPct(w.share || 0), w.share || 0),
        el('td', {class: 'name'}, link(a.demangled, '#api/' + enc(m) + '/' + enc(a.symbol) + (q.toString() ? '?' + q : ''))),
        cell(fmtCount(a.calls), a.calls), cell(fmtCount(a.runs), a.runs),
        cell(a.calls_per_run.toFixed(1), a.calls_per_run),
        cell(fmtNsRes(w.p50, res), w.p50), cell(fmtNsRes(w.p90, res), w.p90), cell(fmtNsRes(w.p99, res), w.p99),
        cell(fmtNsRes(w.mean, res) + ' ± ' + fmtNs(w.sd), w.mean),
        cell(fmtBytes(alloc.mean || 0), alloc.mean || 0),
        el('td', {}, histogram(a.wall_time_buckets, 140, 22, 'wall_time_ns', false, res)));
  });
  const apis = table('apis', ['share', 'API', 'calls', 'runs', 'calls/run', 'p50', 'p90', 'p99',
                              'mean ± sd', 'alloc/call', 'wall time'], rows);
  const scopes = table('scopes', ['share', 'namespace or class', 'APIs', 'calls'], rep.scopes.map(s =>
      el('tr', {}, cell(fmtPct(s.wall_time_share), s.wall_time_share),
         el('td', {class: 'name'}, '\u00a0'.repeat(2 * (s.depth - 1)) + s.scope),
         cell(fmtCount(s.apis), s.apis), cell(fmtCount(s.calls), s.calls))));
  show(title, head, filtersForm(m, q, rep.versions), rep.versions.length > 1 ? compare : '', ranges, note,
       apis, el('h2', {}, 'By namespace and class'), scopes, ...points);
  await fieldStacksSection(m, q);
}

// The module's field stacks (GET /v1/stacks): where its CPU time goes
// inside, as a flame graph, for the version the filters name (every
// version otherwise). Added under the page once they come.
async function fieldStacksSection(m, q) {
  const p = apiQuery(q);
  p.set('module', m);
  p.set('limit', '100000');
  const asked = performance.now();
  const r = await getJson('../v1/stacks?' + p);
  if (r.status !== 200 || !r.body.stacks.length) return;
  const s = r.body;
  const started = performance.now();
  const svg = el('svg:svg', {class: 'flame', id: 'stacks-flame', role: 'img',
                             'aria-label': 'Flame graph of ' + m + "'s field stacks"});
  const focusNote = el('p', {class: 'note', id: 'stacks-focus'});
  const section = el('section', {id: 'stacks'}, el('h2', {}, 'Where its CPU time goes (field stacks)'),
      el('p', {class: 'note'}, `${fmtCount(s.stacks_total)} stacks, ${fmtNs(s.total_ns)} of sampled CPU time` +
         ` from up to ${fmtCount(s.machines)} machines` + (s.truncated ? `; the ${fmtCount(s.stacks.length)} dearest drawn` : '') +
         '. Each frame is as wide as the time under it; click one to zoom. Frames in brackets are where the ' +
         'time went on ([program]: the program\'s own code; [other]: stacks too rare to publish).'),
      focusNote, svg);
  document.getElementById('main').append(section);
  kit.fieldFlame(svg, s.stacks, m, (focus) => {
    focusNote.textContent = focus.parent ? 'Zoomed on ' + focus.name + ': ' + fmtNs(focus.total) +
        '; click it again to go out.' : '';
  });
  section.dataset.fetchMs = (started - asked).toFixed(1);
  section.dataset.drawMs = (performance.now() - started).toFixed(1);
  section.dataset.ready = '1';
}

async function apiPage(m, sym, q) {
  const title = el('h1', {class: 'name'}, sym);
  const back = el('p', {}, link('\u2190 ' + m, '#module/' + enc(m) + (q.toString() ? '?' + q : '')));
  const parts = [];
  for (const metric of METRICS) {
    const p = apiQuery(q);
    p.delete('namespace');
    p.set('module', m);
    p.set('symbol', sym);
    p.set('metric', metric);
    const r = await getJson('../v1/api?' + p);
    if (r.status === 404) continue;
    if (r.status !== 200) { parts.push(failed(r)); break; }
    const a = r.body, st = a.stats;
    const buckets = a.histogram.buckets.map(b => [b.index, b.count]);
    if (a.histogram.zero_count > 0) buckets.unshift([-1, a.histogram.zero_count]);
    const stat = (name, v, fmt) => [el('dt', {}, name), el('dd', {'data-v': String(v), 'data-stat': name}, fmt(v))];
    const f = v => fmtMetric(metric, v, a.resolution_ns);
    parts.push(el('section', {class: 'metric', 'data-metric': metric},
        el('h2', {}, metric),
        a.suspect ? el('p', {class: 'suspect', role: 'alert'},
                       'Suspect: ' + a.suspect_reason + '. Its figures may be poisoned.') : '',
        el('dl', {class: 'stats'}, ...stat('calls', st.count, fmtCount), ...stat('runs', a.runs, fmtCount),
           ...stat('machines', a.machines, fmtCount),
           ...stat('mean', st.mean, f), ...stat('stddev', st.stddev, v => fmtMetric(metric, v)), ...stat('p50', st.p50, f),
           ...stat('p90', st.p90, f), ...stat('p99', st.p99, f), ...stat('min', st.min, f), ...stat('max', st.max, f)),
        histogram(buckets, 520, 120, metric, true, a.resolution_ns)));
  }
  if (!parts.length) parts.push(el('p', {id: 'no-data'}, 'No data for this API and these filters.'));
  show(back, title, ...parts);
}

async function comparePage(m, q) {
  const p = new URLSearchParams({module: m});
  for (const [k, v] of [['a', 'a_version'], ['b', 'b_version'], ['a_from', 'a_from'], ['a_to', 'a_to'],
                        ['b_from', 'b_from'], ['b_to', 'b_to']]) {
    if (q.get(k)) p.set(v, q.get(k));
  }
  const r = await getJson('../v1/diff?' + p);
  const title = el('h1', {}, m + ': ' + (q.get('a') ? fmtVersion(q.get('a')) : (q.get('a_from') + '..' + q.get('a_to'))) +
                   ' \u2192 ' + (q.get('b') ? fmtVersion(q.get('b')) : (q.get('b_from') + '..' + q.get('b_to'))));
  const back = el('p', {}, link('\u2190 ' + m, '#module/' + enc(m)));
  if (r.status === 401) return show(back, title, denied());
  if (r.status !== 200) return show(back, title, failed(r));
  const d = r.body;
  const rows = d.apis.map(a => el('tr', {class: a.verdict, 'data-symbol': a.symbol},
      el('td', {class: 'name'}, a.demangled), el('td', {class: 'verdict'}, a.verdict),
      cell(fmtMetric(d.metric, a.before, a.resolution_ns), a.before),
      cell(fmtMetric(d.metric, a.after, a.resolution_ns), a.after),
      cell((a.change >= 0 ? '+' : '') + fmtPct(a.change), a.change),
      cell(a.adjusted_p.toPrecision(3), a.adjusted_p),
      cell(fmtCount(a.calls_before) + ' / ' + fmtCount(a.calls_after), a.calls_after)));
  show(back, title,
       el('p', {id: 'summary'}, `${d.apis_compared} APIs compared on ${d.metric} (${d.statistic}, ${d.correction}): ` +
          `${d.slower} slower, ${d.faster} faster.`),
       table('diff', ['API', 'verdict', 'before', 'after', 'change', 'adj. p', 'calls before / after'], rows));
}

async function recentPage() {
  const r = await getJson('../v1/recent?limit=100');
  if (r.status !== 200) return show(el('h1', {}, 'Seen recently'), failed(r));
  const rows = r.body.apis.map(a => el('tr', {},
      el('td', {class: 'name'}, link(a.module + ':' + a.symbol, '#api/' + enc(a.module) + '/' + enc(a.symbol))),
      cell(new Date(a.unix_ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC', a.unix_ms)));
  show(el('h1', {}, 'Seen recently'), el('p', {class: 'note'}, 'The APIs in the latest batches, newest first.'),
       table('recent', ['API', 'last batch'], rows));
}

// ------------------------------------------------------------ developer pages
// A developer's own runs of instrumentation points (GET /v1/dev/tags,
// /v1/dev/report): tags, then per tag each segment's value run by run.

function devDenied() {
  return el('p', {id: 'denied', class: 'error', role: 'alert'},
            'Your runs need your developer token: enter it above.');
}
function utc(ns) { return new Date(ns / 1e6).toISOString().replace('T', ' ').slice(0, 19) + ' UTC'; }

async function devTagsPage() {
  const r = await getJson('../v1/dev/tags');
  if (r.status === 401) return show(el('h1', {}, 'Your runs'), devDenied());
  if (r.status !== 200) return show(el('h1', {}, 'Your runs'), failed(r));
  const rows = r.body.tags.map(t => el('tr', {'data-tag': t.tag, 'data-program': t.program},
      el('td', {class: 'name'}, link(t.tag, '#dev/' + enc(t.tag) + '?program=' + enc(t.program))),
      el('td', {class: 'name'}, t.program), cell(fmtCount(t.runs), t.runs),
      cell(utc(t.last_started_unix_ns), t.last_started_unix_ns)));
  show(el('h1', {}, 'Your runs'),
       el('p', {class: 'note'}, 'Developer ' + r.body.developer + ': the tags of your programs\' points, the most recently run first.'),
       rows.length ? table('dev-tags', ['tag', 'program', 'runs', 'last run'], rows)
                   : el('p', {}, 'No runs yet: fieldprof points upload, or the agent\'s --dev_spool.'));
}

// One bar per run: the segment's time in that run (a run without the
// segment has no bar), on a scale from 0 to the longest.
function runBars(values, ids, id) {
  const width = 640, height = 120, n = values.length;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'runs');
  svg.setAttribute('id', id);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'time per run');
  const top = Math.max(...values.filter(v => v !== null), 1);
  const w = width / Math.max(n, 1);
  values.forEach((v, i) => {
    if (v === null) return;
    const bh = Math.max(1, (v / top) * (height - 2));
    const r = document.createElementNS(SVG, 'rect');
    r.setAttribute('class', 'bar');
    r.setAttribute('data-v', v);
    r.setAttribute('x', (i * w).toFixed(2));
    r.setAttribute('y', (height - bh).toFixed(2));
    r.setAttribute('width', Math.max(0.5, w - 1).toFixed(2));
    r.setAttribute('height', bh.toFixed(2));
    r.setAttribute('fill', `hsl(${Math.round(240 * (1 - v / top))},75%,55%)`);
    const title = document.createElementNS(SVG, 'title');
    title.textContent = 'run ' + ids[i].slice(0, 8) + ': ' + fmtNs(v);
    r.append(title);
    svg.append(r);
  });
  return svg;
}

async function devTagPage(tag, q) {
  const f = el('form', {class: 'filters', id: 'dev-filters'});
  const input = (name, label) => el('label', {}, label,
      el('input', {name, type: 'date', value: q.get(name) || '', id: 'f-' + name}));
  f.append(input('from', 'from'), input('to', 'to'), el('button', {type: 'submit'}, 'Show'));
  f.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (q.get('program')) p.set('program', q.get('program'));
    for (const k of ['from', 'to']) if (f.elements[k].value) p.set(k, f.elements[k].value);
    location.hash = '#dev/' + enc(tag) + (p.toString() ? '?' + p : '');
  });
  const p = new URLSearchParams({tag, stacks: '1'});
  for (const k of ['program', 'from', 'to']) if (q.get(k)) p.set(k, q.get(k));
  const r = await getJson('../v1/dev/report?' + p);
  const h = el('h1', {}, 'Tag ' + tag + (q.get('program') ? ' of ' + q.get('program') : ''));
  if (r.status === 401) return show(h, devDenied());
  if (r.status !== 200) return show(h, f, failed(r));
  const t = r.body.tags.find(x => x.tag === tag);
  if (!t) return show(h, f, el('p', {id: 'dev-none'}, 'No runs with this tag in those days.'));
  const ids = t.runs.map(i => r.body.runs[i].file);
  const rows = t.segments.map(s => el('tr', {'data-segment': s.name},
      el('td', {class: 'name'}, s.name), cell(fmtCount(s.runs), s.runs),
      cell(fmtNs(s.mean_ns), s.mean_ns), cell(fmtNs(s.median_ns), s.median_ns),
      cell(fmtNs(s.min_ns), s.min_ns), cell(fmtNs(s.max_ns), s.max_ns),
      cell(fmtNs(s.per_call_ns), s.per_call_ns),
      cell(fmtNs(s.each.p50_ns), s.each.p50_ns), cell(fmtNs(s.each.p99_ns), s.each.p99_ns)));
  const dirty = t.removed.map(d => el('li', {class: 'dirty'},
      'run ' + r.body.runs[d.run].file.slice(0, 8) + ': span ' + fmtNs(d.span_ns) +
      ', modified Z ' + d.modified_z.toFixed(1)));
  // A segment passed more than once a run: its single occurrences too, in
  // the field's log2 buckets (the histogram the module pages draw).
  const each = (s, k) => s.each.count > s.runs
      ? el('div', {id: 'each-' + k, class: 'each', 'data-count': String(s.each.count)},
           el('p', {class: 'note'}, fmtCount(s.each.count) + ' occurrences: p50 ' + fmtNs(s.each.p50_ns) +
              ', p90 ' + fmtNs(s.each.p90_ns) + ', p99 ' + fmtNs(s.each.p99_ns) + ', max ' + fmtNs(s.each.max_ns)),
           histogram(s.each.buckets, 420, 70, 'wall_time_ns', true, 0))
      : '';
  const charts = t.segments.map((s, k) => el('section', {class: 'segment'},
      el('h2', {}, s.name), runBars(s.per_run_ns, ids, 'runs-' + k), each(s, k),
      segmentStacks(s.name, r.body.stacks, tag, k)));
  show(h, f, compareForm(tag, q),
       el('p', {class: 'note'}, fmtCount(t.runs.length) + ' runs, oldest first; a bar per run.'),
       table('dev-segments', ['segment', 'runs', 'mean', 'median', 'min', 'max', 'per call', 'p50 a call',
                              'p99 a call'], rows),
       dirty.length ? el('div', {id: 'dev-dirty'}, el('p', {}, 'Removed as dirty (|modified Z| > 3.5):'),
                         el('ul', {}, ...dirty))
                    : el('p', {id: 'dev-clean'}, 'No run removed as dirty.'),
       ...charts, pickRuns(tag, q, r.body.runs, t));
}

// Where a segment's points were passed (runs recorded with --stacks): for
// a scope its begins, for "a -> b" each end's point; per site its most
// frequent stacks, innermost frame first, as `points show --stacks`.
function segmentStacks(name, stacks, tag, k) {
  if (!stacks || !stacks.runs_with_stacks) return '';
  const scope = name.endsWith(' (scope)');
  const wanted = scope ? [[name.slice(0, -' (scope)'.length), true]]
                       : [...new Set(name.split(' -> '))].map(n => [n, false]);
  const shownStacks = 5, shownFrames = 16;
  const parts = [];
  for (const [site, isScope] of wanted) {
    const found = stacks.sites.find(x => x.tag === tag && x.name === site && x.scope === isScope);
    if (!found || !found.stacks.length) continue;
    const list = found.stacks.slice(0, shownStacks).map((st, i) => {
      const frames = st.frames.slice().reverse();
      const more = frames.length > shownFrames ? [el('li', {class: 'more'}, '... ' + (frames.length - shownFrames) + ' more')] : [];
      return el('li', {class: 'stack', 'data-events': String(st.events)},
          el('span', {class: 'share'}, (100 * st.events / found.events).toFixed(1) + '% ' + fmtCount(st.events) +
             ' events in ' + st.runs + (st.runs === 1 ? ' run' : ' runs') + (st.ended ? ', mean ' + fmtNs(st.mean_ns) : '')),
          el('ol', {class: 'frames'}, ...frames.slice(0, shownFrames).map(f => el('li', {class: 'frame'}, f)), ...more));
    });
    parts.push(el('div', {class: 'site', 'data-site': site},
        el('p', {class: 'note'}, (scope ? 'Begun at' : 'Passed ' + site + ' at') + ': ' + fmtCount(found.events) + ' events' +
           (found.without_stack ? ', ' + fmtCount(found.without_stack) + ' without a stack' : '') +
           (found.stacks.length > shownStacks ? '; the ' + shownStacks + ' most frequent of ' + found.stacks.length + ' stacks' : '')),
        el('ol', {class: 'stacks'}, ...list)));
  }
  if (!parts.length) return '';
  const named = stacks.runs_named < stacks.runs_with_stacks
      ? el('p', {class: 'note'}, (stacks.runs_with_stacks - stacks.runs_named) + ' of ' + stacks.runs_with_stacks +
           ' runs with stacks went up unnamed: their frames read module+offset')
      : '';
  return el('details', {class: 'segment-stacks', id: 'stacks-' + k, open: ''},
      el('summary', {}, 'Where it was passed'), named, ...parts);
}

// Groups of chosen runs (cold starts against warm ones, say): a row per
// run with a box for A and one for B, then the comparison of the two.
function pickRuns(tag, q, runs, t) {
  const removed = new Set(t.removed.map(d => d.run));
  const kept = new Set(t.runs);
  const rows = runs.map((run, i) => {
    if (!kept.has(i) && !removed.has(i)) return null;
    const box = g => el('input', {type: 'checkbox', name: g, value: run.file, id: 'pick-' + g + '-' + run.file.slice(0, 8),
                                  'aria-label': 'run ' + run.file.slice(0, 8) + ' in group ' + g.toUpperCase()});
    const a = box('a'), b = box('b');
    a.addEventListener('change', () => { if (a.checked) b.checked = false; });
    b.addEventListener('change', () => { if (b.checked) a.checked = false; });
    return el('tr', {'data-run': run.file}, el('td', {}, a), el('td', {}, b),
        el('td', {class: 'name'}, run.file.slice(0, 8)), cell(utc(run.start_unix_ns), run.start_unix_ns),
        cell(fmtCount(run.events), run.events), el('td', {}, removed.has(i) ? 'dirty' : ''));
  }).filter(x => x);
  const f = el('form', {id: 'dev-pick'});
  const say = el('p', {id: 'pick-say', role: 'status'});
  f.append(el('h2', {}, 'Compare chosen runs'),
           el('p', {class: 'note'}, 'Tick runs for A and for B (a run is in one group at most), then compare B against A.'),
           table('dev-runs', ['A', 'B', 'run', 'started', 'events', ''], rows),
           el('button', {type: 'submit', id: 'pick-go'}, 'Compare B against A'), say);
  f.addEventListener('submit', e => {
    e.preventDefault();
    const chosen = g => [...f.querySelectorAll('input[name=' + g + ']:checked')].map(x => x.value);
    const a = chosen('a'), b = chosen('b');
    if (!a.length || !b.length) {
      say.textContent = 'Tick at least one run for A and one for B.';
      return;
    }
    const p = new URLSearchParams();
    if (q.get('program')) p.set('program', q.get('program'));
    p.set('runs', a.join(','));
    p.set('b_runs', b.join(','));
    location.hash = '#dev/' + enc(tag) + '/compare?' + p;
  });
  return f;
}

// Two groups of a tag's runs, B against A: A is what the tag page shows
// (its program and days), B other days or another program (a build).
function compareForm(tag, q) {
  const f = el('form', {class: 'filters', id: 'dev-compare-form'});
  const input = (name, label, type) => el('label', {}, label,
      el('input', {name, type, value: q.get(name) || '', id: 'c-' + name}));
  // How sure, and how large a change must be to count: as `points compare
  // --fdr --min_effect` (the change in % here, a fraction in the URL).
  const pct = q.get('min_effect') ? String(100 * parseFloat(q.get('min_effect'))) : '';
  const fdr = el('input', {name: 'fdr', type: 'number', step: 'any', min: '0.0001', max: '0.5',
                           placeholder: '0.05', value: q.get('fdr') || '', id: 'c-fdr'});
  const change = el('input', {name: 'min_effect', type: 'number', step: 'any', min: '0', max: '1000',
                              placeholder: '5', value: pct, id: 'c-min_effect'});
  f.append(el('span', {}, 'Compare with B:'), input('b_from', 'from', 'date'), input('b_to', 'to', 'date'),
           input('b_program', 'program', 'text'), el('label', {}, 'q at most', fdr),
           el('label', {}, 'least change %', change), el('button', {type: 'submit'}, 'Compare'));
  f.addEventListener('submit', e => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of ['program', 'from', 'to', 'runs', 'b_runs']) if (q.get(k)) p.set(k, q.get(k));
    for (const k of ['b_from', 'b_to', 'b_program', 'fdr']) if (f.elements[k].value) p.set(k, f.elements[k].value);
    if (change.value) p.set('min_effect', String(parseFloat(change.value) / 100));
    location.hash = '#dev/' + enc(tag) + '/compare?' + p;
  });
  return f;
}

// A pair of bars per segment, A's mean over B's, on one scale.
function compareBars(segments) {
  const width = 640, row = 34, left = 220, height = row * segments.length + 4;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'runs');
  svg.setAttribute('id', 'compare-bars');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'mean per segment, A over B');
  const top = Math.max(...segments.map(s => Math.max(s.mean_a_ns, s.mean_b_ns)), 1);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  segments.forEach((s, i) => {
    const y = 2 + i * row;
    add('text', {x: 4, y: y + 20, 'font-size': 12}, s.segment.length > 30 ? s.segment.slice(0, 29) + '…' : s.segment);
    [['a', s.mean_a_ns, '#7a8fb8'], ['b', s.mean_b_ns, s.significant ? '#d9534f' : '#9bb07a']].forEach(([g, v, fill], k) => {
      const w = Math.max(1, (v / top) * (width - left - 8));
      const r = add('rect', {class: 'bar bar-' + g, 'data-v': v, x: left, y: y + 2 + k * 14, width: w.toFixed(2), height: 12, fill});
      const title = document.createElementNS(SVG, 'title');
      title.textContent = g.toUpperCase() + ': ' + fmtNs(v);
      r.append(title);
    });
  });
  return svg;
}

async function devComparePage(tag, q) {
  const h = el('h1', {}, 'Tag ' + tag + ': B against A');
  const p = new URLSearchParams({tag});
  for (const k of ['program', 'from', 'to', 'runs', 'b_program', 'b_from', 'b_to', 'b_runs', 'fdr', 'min_effect']) {
    if (q.get(k)) p.set(k, q.get(k));
  }
  const r = await getJson('../v1/dev/compare?' + p);
  if (r.status === 401) return show(h, devDenied());
  const back = link('Back to the tag', '#dev/' + enc(tag) + (q.get('program') ? '?program=' + enc(q.get('program')) : ''));
  if (r.status !== 200) return show(h, el('p', {}, back), failed(r));
  const d = r.body;
  const group = (name, g) => el('li', {id: 'group-' + name.toLowerCase()}, name + ': ' +
      (g.program || 'any program') + ', ' +
      (g.chosen ? fmtCount(g.chosen) + ' chosen runs' : (g.from || 'the first day') + ' to ' + (g.to || 'today') +
                  ', ' + fmtCount(g.runs) + ' runs') + (g.removed ? ' (' + g.removed + ' removed as dirty)' : ''));
  const segments = d.segments.filter(s => s.tag === tag);
  if (!segments.length) {
    return show(h, el('p', {}, back), el('ul', {}, group('A', d.a), group('B', d.b)),
                el('p', {id: 'compare-none'}, 'No segment is in both groups: nothing to compare.'));
  }
  const pct = x => (x >= 0 ? '+' : '') + (100 * x).toFixed(1) + '%';
  const calls = n => Number.isInteger(n) ? fmtCount(n) : n.toFixed(1);
  const rows = segments.map(s => {
    const change = s.mean_a_ns > 0 ? (s.mean_b_ns - s.mean_a_ns) / s.mean_a_ns : 0;
    const cls = s.significant ? (change > 0 ? 'slower' : 'faster') : '';
    // Where a run calls it more or less often in B, what a call costs, apart.
    const perCall = s.per_call_a_ns > 0 ? (s.per_call_b_ns - s.per_call_a_ns) / s.per_call_a_ns : 0;
    const perCallCell = s.calls_differ
        ? el('td', {class: 'per-call' + (s.per_call_significant ? (perCall > 0 ? ' slower' : ' faster') : ''),
                    'data-v': String(perCall), title: 'p ' + s.per_call_p.toFixed(4) + ', q ' + s.per_call_q.toFixed(4)},
             fmtNs(s.per_call_a_ns) + ' → ' + fmtNs(s.per_call_b_ns) + ' (' + pct(perCall) + ')' +
             (s.per_call_significant ? (perCall > 0 ? ', B slower' : ', B faster') : ''))
        : el('td', {class: 'per-call', 'data-v': String(perCall)}, '—');
    return el('tr', {class: cls, 'data-segment': s.segment},
        el('td', {class: 'name'}, s.segment), cell(fmtNs(s.mean_a_ns), s.mean_a_ns),
        cell(fmtNs(s.mean_b_ns), s.mean_b_ns),
        cell(pct(change), change),
        cell(s.p.toFixed(4), s.p), cell(s.q.toFixed(4), s.q),
        el('td', {class: 'verdict'}, s.significant ? (change > 0 ? 'B slower' : 'B faster') : '—'),
        el('td', {class: 'calls', 'data-v': String(s.calls_b)},
           s.calls_differ ? calls(s.calls_a) + ' → ' + calls(s.calls_b) : calls(s.calls_a)),
        perCallCell);
  });
  show(h, el('p', {}, back), el('ul', {}, group('A', d.a), group('B', d.b)), compareForm(tag, q),
       table('compare-segments', ['segment', 'A mean', 'B mean', 'change', 'p', 'q', 'verdict', 'calls a run',
                                  'a call, A → B'], rows),
       el('p', {class: 'note'}, 'B differs from A when q ≤ ' + d.fdr + ' (a permutation test over the runs\' ' +
          'values, Benjamini-Hochberg across segments) and the change is at least ' + (100 * d.min_effect) +
          '% of A\'s mean. Dirty runs are removed in each group first. Where a run calls a segment more or ' +
          'less often in B, "a call" compares the time of one call (the same test over the runs\' own means ' +
          'a call; its p and q on hover). The bars: A\'s mean (blue) over ' +
          'B\'s (red where B differs, green where it does not).'),
       compareBars(segments));
}

// ------------------------------------------------------------ routing

async function route() {
  const hash = location.hash.replace(/^#/, '');
  const [path, query] = hash.split('?');
  const q = new URLSearchParams(query || '');
  const parts = path.split('/').map(decodeURIComponent);
  try {
    if (parts[0] === 'module' && parts[1]) return await modulePage(parts[1], q);
    if (parts[0] === 'api' && parts[1] && parts.length >= 3) return await apiPage(parts[1], parts.slice(2).join('/'), q);
    if (parts[0] === 'compare' && parts[1]) return await comparePage(parts[1], q);
    if (parts[0] === 'recent') return await recentPage();
    if (parts[0] === 'dev' && parts[1] && parts[2] === 'compare') return await devComparePage(parts[1], q);
    if (parts[0] === 'dev' && parts[1]) return await devTagPage(parts[1], q);
    if (parts[0] === 'dev') return await devTagsPage();
    return await modulesPage();
  } catch (e) {
    show(el('p', {class: 'error', role: 'alert'}, 'Could not reach the aggregator: ' + e.message));
  }
}

document.getElementById('token-form').addEventListener('submit', e => {
  e.preventDefault();
  sessionStorage.setItem('fieldprof-token', document.getElementById('token').value.trim());
  document.getElementById('token').value = '';
  route();
});
document.getElementById('token-clear').addEventListener('click', () => {
  sessionStorage.removeItem('fieldprof-token');
  route();
});
window.addEventListener('hashchange', route);
route();
