// The call tree's page (fieldprof tree show/sub --html): a flame graph
// whose widths are the tree's (for a difference, the new runs'), coloured
// by heat (self share) or, for a difference, by the change: red grew,
// blue shrank, full saturation where the change is significant, pale
// where it was not tested or not significant. Search marks matching
// frames; a click zooms and shows the callers and callees of the clicked
// function across the whole tree. window.fieldprofTree exposes the state
// for tests.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('fp-data').textContent);
  const n = data.parent.length;
  const kids = Array.from({ length: n }, () => []);
  for (let i = 1; i < n; ++i) kids[data.parent[i]].push(i);
  // Totals of the width metric (new) and of the base, when there is one.
  const total = Float64Array.from(data.self);
  const baseTotal = data.base_self ? Float64Array.from(data.base_self) : null;
  for (let i = n - 1; i > 0; --i) {
    total[data.parent[i]] += total[i];
    if (baseTotal) baseTotal[data.parent[i]] += baseTotal[i];
  }
  for (const k of kids) k.sort((a, b) => total[b] - total[a]);
  const nameOf = (i) => (i === 0 ? '[root]' : data.names[data.name[i]]);
  const kit = fieldprofKit;
  const fmt = data.unit === 'ns' ? kit.duration : data.unit === 'bytes' ? kit.bytes
    : (v) => kit.count(Math.round(v * 100) / 100);
  const svg = document.getElementById('flame');
  let focus = 0;
  let query = '';
  let drawn = [];
  let hottest = 1;
  for (let i = 1; i < n; ++i) hottest = Math.max(hottest, Math.abs(data.self[i]));

  function colour(i) {
    if (!baseTotal) {
      // Heat by self share of the hottest: blue cold .. red hot.
      const t = Math.min(1, Math.abs(data.self[i]) / hottest);
      return kit.heat(t, 62 - 8 * t, 75);
    }
    const change = total[i] - baseTotal[i];
    const of = Math.max(Math.abs(total[i]), Math.abs(baseTotal[i]), 1);
    const hue = change >= 0 ? 0 : 220;
    const sig = data.significant ? data.significant[i] : 0;
    const tested = data.tested ? data.tested[i] : 0;
    // Saturation by significance: full when significant, pale otherwise;
    // darker the larger the change is against the frame.
    const rel = Math.min(1, (3 * Math.abs(change)) / of);
    const sat = sig ? 85 : tested ? 35 : 12;
    const light = Math.round(sig ? 70 - 25 * rel : 91 - 10 * rel);
    return `hsl(${hue}, ${sat}%, ${light}%)`;
  }

  function draw() {
    drawn = kit.flame(svg, {
      root: 0,
      focus,
      kids: (i) => kids[i],
      parent: (i) => data.parent[i],
      total: (i) => total[i],
      name: nameOf,
      fill: colour,
      classes: (i) => (baseTotal ? [total[i] >= baseTotal[i] ? 'grew' : 'shrank'] : []),
      match: (i) => query !== '' && nameOf(i).includes(query),
      tip: describe,
      onClick: (i) => { focus = i; draw(); },
      width: svg.clientWidth || 1200,
    }).map((d) => ({ node: d.node, name: d.name, x: d.x, w: d.w, depth: d.depth, fill: d.fill, match: d.match }));
    const matched = drawn.filter((d) => d.match).length;
    let matchedTotal = 0;
    if (query !== '') {
      // The outermost matching frames' totals, over the whole tree.
      const under = (i) => {
        if (i !== 0 && nameOf(i).includes(query)) { matchedTotal += total[i]; return; }
        for (const k of kids[i]) under(k);
      };
      under(0);
    }
    document.getElementById('summary').textContent =
      `${nameOf(focus)}: ${fmt(total[focus])} ${data.metric}` +
      (baseTotal ? ` (base ${fmt(baseTotal[focus])}, change ${fmt(total[focus] - baseTotal[focus])})` : '') +
      (query !== '' ? `; "${query}" matches ${matched} frames shown, ${fmt(matchedTotal)} in all` : '');
    butterfly();
  }

  function describe(i) {
    let s = `${nameOf(i)}\n${data.metric}: total ${fmt(total[i])}, self ${fmt(data.self[i])}`;
    if (baseTotal) {
      s += `\nbase total ${fmt(baseTotal[i])}, change ${fmt(total[i] - baseTotal[i])}`;
      if (data.tested && data.tested[i]) {
        s += `\np ${data.p[i].toFixed(4)}, q ${data.q[i].toFixed(4)}` + (data.significant[i] ? ' (significant)' : '');
      }
    }
    return s;
  }

  // Callers and callees of the focused function, over every node of it.
  let lastButterfly = { callers: [], callees: [] };
  function butterfly() {
    const fill = (id, rows) => {
      const body = document.querySelector(`#${id} tbody`);
      body.textContent = '';
      for (const [name, v] of rows) {
        const tr = document.createElement('tr');
        const a = document.createElement('td');
        a.textContent = fmt(v);
        const b = document.createElement('td');
        b.className = 'name';
        b.textContent = name;
        tr.append(a, b);
        body.appendChild(tr);
      }
    };
    document.getElementById('focus-name').textContent = nameOf(focus);
    const callers = new Map(), callees = new Map();
    if (focus !== 0) {
      const fn = data.name[focus];
      for (let i = 1; i < n; ++i) {
        if (data.name[i] !== fn) continue;
        const p = data.parent[i];
        const pn = p === 0 ? '[root]' : nameOf(p);
        callers.set(pn, (callers.get(pn) || 0) + total[i]);
        for (const k of kids[i]) callees.set(nameOf(k), (callees.get(nameOf(k)) || 0) + total[k]);
      }
    } else {
      for (const k of kids[0]) callees.set(nameOf(k), (callees.get(nameOf(k)) || 0) + total[k]);
    }
    const sorted = (m) => [...m.entries()].sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
    lastButterfly = { callers: sorted(callers), callees: sorted(callees) };
    fill('callers', lastButterfly.callers);
    fill('callees', lastButterfly.callees);
  }

  document.getElementById('command').textContent = data.description;
  document.getElementById('facts').textContent =
    `${n - 1} call paths, ${data.metric}` +
    (data.runs > 1 ? (data.per_run ? `, per run of ${data.runs} runs` : `, the sum of ${data.runs} runs`) : '');
  document.getElementById('width-of').textContent = (baseTotal ? 'new runs\' ' : '') + data.metric;
  const legend = document.getElementById('legend');
  legend.innerHTML = baseTotal
    ? '<span><span class="swatch" style="background:hsl(0,85%,60%)"></span> grew</span>' +
      '<span><span class="swatch" style="background:hsl(220,85%,60%)"></span> shrank</span>' +
      '<span><span class="swatch" style="background:hsl(0,12%,75%)"></span> pale: not significant</span>'
    : '<span><span class="swatch" style="background:hsl(240,75%,62%)"></span> cold</span>' +
      '<span><span class="swatch" style="background:hsl(0,75%,54%)"></span> hot (self)</span>';
  document.getElementById('search').addEventListener('input', (e) => { query = e.target.value; draw(); });
  document.getElementById('whole').addEventListener('click', () => { focus = 0; draw(); });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') { focus = 0; draw(); } });
  window.addEventListener('resize', draw);
  window.fieldprofTree = {
    state: () => ({ focus, focus_name: nameOf(focus), query, drawn, butterfly: lastButterfly,
                    summary: document.getElementById('summary').textContent }),
    total: (i) => total[i],
    baseTotal: (i) => (baseTotal ? baseTotal[i] : null),
  };
  draw();
  document.body.dataset.ready = '1';
})();
