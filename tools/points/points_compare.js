// The comparison page (fieldprof points compare A B --html): both groups,
// the table points compare prints (a row per segment in both, the verdict,
// the calls a run and a call's time where those differ), and per segment
// each run of A and of B as a dot on one scale, so that a reader sees the
// spread the permutation test weighed. window.fieldprofCompare exposes the
// state for tests.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('fp-data').textContent);
  const { el, hover } = fieldprofKit;
  const fmt = fieldprofKit.duration;
  const drawn = { rows: 0, dots_a: 0, dots_b: 0, verdicts: {} };

  const pct = (a, b) => {
    const x = a > 0 ? (b - a) / a : 0;
    return (x >= 0 ? '+' : '') + (100 * x).toFixed(1) + '%';
  };
  const calls = (n) => Number.isInteger(n) ? n.toLocaleString('en-US') : n.toFixed(1);
  const verdict = (a, b, significant) => significant ? (b > a ? 'B slower' : 'B faster') : '—';
  const verdictClass = (a, b, significant) => significant ? (b > a ? 'slower' : 'faster') : '';

  function group(label, g) {
    const removed = Object.entries(g.removed).map(([tag, n]) => n + ' of ' + tag);
    return el('li', { id: 'group-' + label.toLowerCase() }, label + ': ' + g.name + ', ' +
      g.runs + (g.runs === 1 ? ' run' : ' runs') + (g.programs.length ? ' of ' + g.programs.join(', ') : '') +
      (removed.length ? '; removed as dirty: ' + removed.join(', ') : ''));
  }

  function table() {
    const t = el('table', { id: 'compare-segments' });
    const head = el('tr');
    for (const c of ['tag', 'segment', 'A mean', 'B mean', 'change', 'p', 'q', 'verdict', 'calls a run',
      'a call, A → B']) {
      head.append(el('th', c === 'segment' || c === 'tag' ? { class: 'name' } : {}, c));
    }
    t.append(head);
    for (const r of data.rows) {
      const row = el('tr', { class: verdictClass(r.mean_a_ns, r.mean_b_ns, r.significant),
        'data-segment': r.tag + ': ' + r.segment });
      row.append(el('td', { class: 'name' }, r.tag), el('td', { class: 'name' }, r.segment),
        el('td', {}, fmt(r.mean_a_ns)), el('td', {}, fmt(r.mean_b_ns)), el('td', {}, pct(r.mean_a_ns, r.mean_b_ns)),
        el('td', {}, r.p.toFixed(4)), el('td', {}, r.q.toFixed(4)),
        el('td', { class: 'verdict' }, verdict(r.mean_a_ns, r.mean_b_ns, r.significant)),
        el('td', { class: 'calls' }, r.calls_differ ? calls(r.calls_a) + ' → ' + calls(r.calls_b) : calls(r.calls_a)));
      const perCall = el('td', { class: 'per-call ' + (r.calls_differ ? verdictClass(r.per_call_a_ns,
        r.per_call_b_ns, r.per_call_significant) : ''), title: 'p ' + r.per_call_p.toFixed(4) + ', q ' +
        r.per_call_q.toFixed(4) }, r.calls_differ ? fmt(r.per_call_a_ns) + ' → ' + fmt(r.per_call_b_ns) + ' (' +
        pct(r.per_call_a_ns, r.per_call_b_ns) + ')' + (r.per_call_significant ? ', ' +
        verdict(r.per_call_a_ns, r.per_call_b_ns, true) : '') : '—');
      row.append(perCall);
      t.append(row);
      drawn.rows += 1;
      drawn.verdicts[r.tag + ': ' + r.segment] = verdict(r.mean_a_ns, r.mean_b_ns, r.significant);
    }
    return t;
  }

  // Two lanes of dots, A above B, on one scale from 0 to the largest run.
  function strip(r, values) {
    const w = 520, h = 74, left = 24, right = 70;
    const all = values.a.concat(values.b);
    const max = Math.max(1, ...all);
    const x = (v) => left + (v / max) * (w - left - right);
    const svg = el('svg:svg', { class: 'strip', width: w, height: h, role: 'img',
      'aria-label': r.segment + ': each run of A and of B' });
    const colourB = r.significant ? (r.mean_b_ns > r.mean_a_ns ? '#d9534f' : '#3d9a5b') : '#8a8f98';
    const lanes = [['A', values.a, 20, '#3b6fd0', r.mean_a_ns], ['B', values.b, 48, colourB, r.mean_b_ns]];
    for (const [name, vs, y, colour, mean] of lanes) {
      svg.append(el('svg:text', { x: 4, y: y + 4 }, name),
        el('svg:line', { x1: left, x2: w - right, y1: y, y2: y, stroke: '#e2e2e2' }),
        el('svg:line', { class: 'mean', x1: x(mean), x2: x(mean), y1: y - 10, y2: y + 10, stroke: colour }));
      vs.forEach((v, i) => {
        const dot = el('svg:circle', { class: 'dot dot-' + name.toLowerCase(), cx: x(v), cy: y + ((i % 3) - 1) * 3,
          r: 3.5, fill: colour, 'fill-opacity': 0.6, 'data-v': v });
        hover(dot, name + ', run ' + (i + 1) + ': ' + fmt(v));
        svg.append(dot);
        drawn['dots_' + name.toLowerCase()] += 1;
      });
      svg.append(el('svg:text', { x: w - right + 6, y: y + 4 }, fmt(mean)));
    }
    svg.append(el('svg:text', { x: left, y: h - 2 }, '0'), el('svg:text', { x: w - right - 40, y: h - 2 }, fmt(max)));
    return svg;
  }

  const groups = document.getElementById('groups');
  groups.append(group('A', data.a), group('B', data.b));
  document.getElementById('command').textContent = data.a.name + '  vs  ' + data.b.name;
  document.getElementById('facts').textContent = data.rows.length + ' segment' +
    (data.rows.length === 1 ? '' : 's') + ' in both';
  document.getElementById('rule').textContent = 'B differs from A when q ≤ ' + data.fdr +
    ' (a permutation test over the runs, Benjamini-Hochberg across segments) and the change is at least ' +
    (100 * data.min_effect).toFixed(0) + '% of A\'s mean; dirty runs are removed in each group first. Where a run ' +
    'calls a segment more or less often in B, "a call" compares one call\'s time the same way (p and q on hover).';
  if (data.rows.length) {
    document.getElementById('table').append(table());
  } else {
    document.getElementById('table').append(el('p', { id: 'compare-none' },
      'No segment is in both groups: nothing to compare.'));
  }
  const strips = document.getElementById('strips');
  data.rows.forEach((r, k) => {
    const box = el('div', { class: 'segment' });
    box.append(el('h3', {}, r.tag + ': ' + r.segment), strip(r, data.values[k]));
    strips.append(box);
  });
  const only = document.getElementById('only');
  for (const [label, list] of [['A', data.only_a], ['B', data.only_b]]) {
    if (list.length) only.append(el('p', { class: 'only', id: 'only-' + label.toLowerCase() },
      'Only in ' + label + ': ' + list.join(', ')));
  }
  window.fieldprofCompare = { state: () => JSON.parse(JSON.stringify(drawn)) };
  document.body.dataset.ready = '1';
})();
