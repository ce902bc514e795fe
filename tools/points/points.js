// The points page (fieldprof points show --html): per tag, the segments'
// table and, per segment, a bar chart with one bar per run, so runs
// compare at a glance, segment by segment; under a segment passed more
// than once a run, its single occurrences as a log2 histogram. Runs removed as dirty are left
// out unless asked for, then drawn hatched in red. window.fieldprofPoints
// exposes the state for tests.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('fp-data').textContent);
  const showRemoved = document.getElementById('show-removed');
  const root = document.getElementById('tags');
  const colours = ['#3b7dd8', '#e0883a', '#4aa564', '#c8504b', '#8d6cc2', '#8c6d4f', '#d46fb4', '#7f8c8d'];
  const { el, hover } = fieldprofKit;
  const fmt = fieldprofKit.duration;
  let drawn = { bars: 0, dirty: 0, segments: 0, histograms: [] };

  const runLabel = (i) => 'run ' + (i + 1) + ' (pid ' + data.runs[i].pid + ')';

  function chart(tag, seg, colour) {
    const bars = tag.runs.map((run, k) => ({ run, ns: seg.per_run_ns[k], dirty: false }));
    if (showRemoved.checked) {
      tag.removed.forEach((r, k) => bars.push({ run: r.run, ns: seg.removed_ns[k], dirty: true }));
      bars.sort((a, b) => a.run - b.run);
    }
    const w = Math.max(240, Math.min(640, bars.length * 18 + 50)), h = 150, left = 44, bottom = 18;
    const svg = el('svg:svg', { class: 'bars', width: w, height: h, role: 'img',
      'aria-label': seg.name + ': one bar per run' });
    const max = Math.max(1, ...bars.map((b) => b.ns || 0));
    const step = (w - left - 6) / Math.max(1, bars.length);
    const y = (v) => h - bottom - (v / max) * (h - bottom - 8);
    svg.append(el('svg:text', { x: 2, y: 12 }, fmt(max)), el('svg:text', { x: 2, y: h - bottom }, '0'));
    bars.forEach((b, i) => {
      if (b.ns === null || b.ns === undefined) return;
      const rect = el('svg:rect', { x: left + i * step + 1, y: y(b.ns), width: Math.max(1, step - 2),
        height: Math.max(0.5, h - bottom - y(b.ns)), fill: colour, class: b.dirty ? 'dirty' : 'run',
        'data-run': b.run });
      hover(rect, runLabel(b.run) + (b.dirty ? ', removed as dirty' : '') + ': ' + fmt(b.ns));
      svg.append(rect);
      drawn.bars += 1;
      drawn.dirty += b.dirty ? 1 : 0;
      if (bars.length <= 30) {
        svg.append(el('svg:text', { x: left + i * step + step / 2 - 4, y: h - 4 }, String(b.run + 1)));
      }
    });
    svg.append(el('svg:line', { class: 'mean', x1: left, x2: w - 4, y1: y(seg.mean_ns), y2: y(seg.mean_ns) }));
    return svg;
  }

  // A segment's single occurrences (a scope's calls) over the runs kept,
  // in the field's log2 buckets: one bar per bucket from the lowest to the
  // highest, in the heat spectrum (cheap blue to costly red), heights on a
  // log scale, a fuller bucket darker; hover for its range and count.
  function histogram(seg) {
    const each = seg.each;
    const svg = fieldprofKit.histogram(each.buckets, { width: 320, height: 76, format: fmt, log: true, labels: true,
      noun: (c) => (c === 1 ? 'occurrence' : 'occurrences'), label: seg.name + ': each occurrence, by log2 bucket' });
    const total = Number(svg.dataset.total);
    drawn.histograms.push(total);
    const box = el('div', { class: 'each' });
    box.append(el('p', { class: 'hint' }, each.count.toLocaleString('en-US') + ' occurrences: p50 ' +
      fmt(each.p50_ns) + ', p90 ' + fmt(each.p90_ns) + ', p99 ' + fmt(each.p99_ns) + ', max ' + fmt(each.max_ns) +
      ' (heights: log scale)'), svg);
    return box;
  }

  function draw() {
    root.textContent = '';
    drawn = { bars: 0, dirty: 0, segments: 0, histograms: [] };
    for (const tag of data.tags) {
      const sec = el('section', { class: 'tag' });
      sec.append(el('h2', {}, 'tag ' + tag.tag + ': ' + tag.runs.length + ' run' +
        (tag.runs.length === 1 ? '' : 's') + (tag.removed.length ? ', ' + tag.removed.length + ' removed as dirty' : '')));
      for (const r of tag.removed) {
        sec.append(el('p', { class: 'removed' }, 'removed ' + runLabel(r.run) + ': span ' + fmt(r.span_ns) +
          ', modified Z ' + r.modified_z.toFixed(1) + ' (|M| > 3.5)'));
      }
      const table = el('table');
      const head = el('tr');
      for (const c of ['segment', 'runs', 'mean', 'median', 'min', 'max', 'per call', 'p50 a call', 'p99 a call']) {
        head.append(el('th', c === 'segment' ? { class: 'name' } : {}, c));
      }
      table.append(head);
      for (const s of tag.segments) {
        const row = el('tr');
        row.append(el('td', { class: 'name' }, s.name), el('td', {}, String(s.runs)));
        for (const v of [s.mean_ns, s.median_ns, s.min_ns, s.max_ns, s.per_call_ns, s.each.p50_ns, s.each.p99_ns]) {
          row.append(el('td', {}, fmt(v)));
        }
        table.append(row);
      }
      sec.append(table);
      tag.segments.forEach((s, i) => {
        const box = el('div', { class: 'segment' });
        box.append(el('h3', {}, s.name), chart(tag, s, colours[i % colours.length]));
        // More than once a run: how the single occurrences spread.
        if (s.each.count > s.runs) box.append(histogram(s));
        sec.append(box);
        drawn.segments += 1;
      });
      root.append(sec);
    }
  }

  // The dirty bars' hatching, defined once for every chart.
  const shared = el('svg:svg', { width: 0, height: 0, 'aria-hidden': 'true', style: 'position: absolute' });
  const defs = el('svg:defs');
  const hatch = el('svg:pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse',
    patternTransform: 'rotate(45)' });
  hatch.append(el('svg:rect', { width: 6, height: 6, fill: '#f4c7c3' }),
    el('svg:line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#b00', 'stroke-width': 2 }));
  defs.append(hatch);
  shared.append(defs);
  document.body.prepend(shared);

  const programs = [...new Set(data.runs.map((r) => r.program))];
  document.getElementById('command').textContent = programs.join(', ');
  document.getElementById('facts').textContent = data.runs.length + ' run' + (data.runs.length === 1 ? '' : 's') +
    ', ' + data.tags.length + ' tag' + (data.tags.length === 1 ? '' : 's');
  showRemoved.addEventListener('change', draw);
  draw();
  window.fieldprofPoints = {
    state: () => ({ tags: data.tags.length, segments: drawn.segments, bars: drawn.bars, dirty: drawn.dirty,
      histograms: drawn.histograms, showRemoved: showRemoved.checked }),
  };
  document.body.dataset.ready = '1';
})();
