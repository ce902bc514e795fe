// The page of a recording (fieldprof record show --html): a timeline of
// samples per time slice and thread, and a flame graph of the time range
// chosen on it. The range is answered from the recording's time tree, as
// `record show --from --to` answers it (tools/record/time_tree.h): whole
// inner nodes are merged from their lists, only partly covered leaves are
// scanned, and what the lists left out is the stated bound ("other").
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('fp-data').textContent);
  const $ = (id) => document.getElementById(id);
  const kit = fieldprofKit;
  const NODE = 8;  // per node: lo, hi, first child, children (0: a leaf), listed, list begin, list end, other

  function decode(s, Type) {
    const bin = atob(s);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; ++i) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }

  const views = data.views.map((v) => ({
    name: v.name,
    unit: v.unit,
    rate: v.rate || 0,  // samples a second of a thread always on the CPU (0: not a rate)
    times: decode(v.times, Float64Array),
    types: decode(v.types, Uint32Array),
    nodes: decode(v.nodes, Uint32Array),
    lists: decode(v.lists, Uint32Array),
    typeThread: Uint32Array.from(v.type_thread),
    typeStack: Uint32Array.from(v.type_stack),
    typeShown: Uint8Array.from(v.type_shown),
  }));

  // --- The range query over the time tree ---------------------------------

  function lowerBound(a, lo, hi, x) {  // the first i in [lo, hi) with a[i] >= x
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function upperBound(a, lo, hi, x) {  // the first i in [lo, hi) with a[i] > x
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (a[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // Counts per type of the samples with t1 <= time <= t2.
  function range(v, t1, t2, exact) {
    const T = v.times, Y = v.types, N = v.nodes, L = v.lists;
    const ntypes = v.typeThread.length;
    if (!v.dense) v.dense = new Float64Array(ntypes);
    if (!v.mark) v.mark = new Uint8Array(ntypes);
    const dense = v.dense, mark = v.mark, touched = [];
    const out = { samples: 0, other: 0, merged: 0, leaves: 0, scanned: 0, counts: [] };
    const add = (ty, n) => {
      if (dense[ty] === 0) touched.push(ty);
      dense[ty] += n;
    };
    const visit = (n) => {
      const b = n * NODE, lo = N[b], hi = N[b + 1], first = N[b + 2], children = N[b + 3];
      const tmin = T[lo], tmax = T[hi - 1];
      if (tmax < t1 || tmin > t2) return;
      const whole = t1 <= tmin && tmax <= t2;
      if (children === 0) {
        let a = lo, z = hi;
        if (!whole) {
          a = lowerBound(T, lo, hi, t1);
          z = upperBound(T, a, hi, t2);
        }
        for (let i = a; i < z; ++i) add(Y[i], 1);
        out.samples += z - a;
        out.scanned += z - a;
        ++out.leaves;
        return;
      }
      if (!whole || !N[b + 4]) {
        for (let c = 0; c < children; ++c) visit(first + c);
        return;
      }
      ++out.merged;
      out.samples += hi - lo;
      const lb = N[b + 5], le = N[b + 6], other = N[b + 7];
      for (let p = lb; p < le; ++p) add(L[2 * p], L[2 * p + 1]);
      if (other === 0) return;
      if (!exact) {
        out.other += other;
        return;
      }
      for (let p = lb; p < le; ++p) mark[L[2 * p]] = 1;
      for (let i = lo; i < hi; ++i) if (!mark[Y[i]]) add(Y[i], 1);
      for (let p = lb; p < le; ++p) mark[L[2 * p]] = 0;
      out.scanned += hi - lo;
    };
    if (N.length > 0 && t1 <= t2) visit(0);
    for (const t of touched) {
      out.counts.push([t, dense[t]]);
      dense[t] = 0;
    }
    return out;
  }

  // --- State ---------------------------------------------------------------

  const duration = Math.max(1, data.duration_ns);
  const state = {
    view: 0,
    tid: data.initial.tid || 0,
    from: data.initial.from_ns,
    to: Math.min(data.initial.to_ns, duration),
    exact: false,
    search: '',
    focus: null,   // the zoomed node of the flame graph
    answer: null,  // the last range answer
    drawn: [],     // the flame graph's drawn frames, for the test and the tooltip
  };

  function fmtTime(ns) {
    const s = ns / 1e9;
    if (duration >= 10e9) return s.toFixed(2) + ' s';
    if (duration >= 1e9) return s.toFixed(3) + ' s';
    return (ns / 1e6).toFixed(2) + ' ms';
  }
  const fmtCount = (n) => kit.count(Math.round(n));
  const pct = (a, b) => kit.percent(a, b, 2);
  const heat = (position, light) => kit.heat(position, light);

  // --- The header and controls ---------------------------------------------

  $('command').textContent = data.command;
  $('facts').textContent = `${fmtTime(data.duration_ns)} · ${data.source}, ${data.hz} Hz · ` +
      `${data.processes} process${data.processes === 1 ? '' : 'es'}, ${data.threads.length} threads`;
  views.forEach((v, i) => {
    let shown = 0;
    for (let k = 0; k < v.types.length; ++k) shown += v.typeShown[v.types[k]];
    $('view').append(new Option(`${v.name} (${fmtCount(shown)})`, i));
  });
  $('view').disabled = views.length < 2;

  function fillThreads() {
    const sel = $('thread');
    sel.textContent = '';
    sel.append(new Option('all threads', 0));
    const v = views[state.view];
    const per = new Float64Array(data.threads.length);
    for (let i = 0; i < v.types.length; ++i) {
      const ty = v.types[i];
      if (v.typeShown[ty]) per[v.typeThread[ty]] += 1;
    }
    const order = data.threads.map((t, i) => i).filter((i) => per[i] > 0).sort((a, b) => per[b] - per[a]);
    for (const i of order) {
      const t = data.threads[i];
      sel.append(new Option(`${t.tid} (pid ${t.pid}): ${fmtCount(per[i])}`, t.tid));
    }
    sel.value = String(state.tid);
    if (sel.value !== String(state.tid)) {
      state.tid = 0;
      sel.value = '0';
    }
    return { per, order };
  }

  // --- The timeline ---------------------------------------------------------

  const LABEL_W = 170, LANE_H = 26, AXIS_H = 20, MAX_LANES = 8;
  const SPAN_H = 16, MAX_SPAN_ROWS = 6;
  const timeline = { lanes: [], slices: 0, counts: null, drag: null, spanRows: [], bandH: 0 };

  // The program's points: each thread's spans (segments and scopes) in
  // rows above the lanes, a nested one below the one holding it, as the
  // Firefox Profiler draws markers and Tracy its zones. Clicking one
  // selects its time range, on its thread.
  // APIs that cost more than the field (record show --check): frame -> why.
  const marked = new Map(data.marked || []);
  // What the field says each API frame costs (from the snapshot cache).
  const fieldCost = new Map(data.field || []);
  const spans = (data.spans || []).map(([name, beginThread, thread, begin, end], i) =>
    ({ i, name, beginThread, thread, begin, end }));
  function layoutSpans() {
    const byThread = new Map();
    for (const sp of spans) {
      if (!byThread.has(sp.thread)) byThread.set(sp.thread, []);
      byThread.get(sp.thread).push(sp);
    }
    const rows = [];
    for (const [thread, list] of byThread) {
      const ends = [];  // per row: where its last span ends
      const first = rows.length;
      for (const sp of list) {  // in order of begin
        let r = ends.findIndex((e) => e <= sp.begin);
        if (r < 0) r = ends.length < MAX_SPAN_ROWS ? ends.length : MAX_SPAN_ROWS - 1;
        ends[r] = Math.max(ends[r] || 0, sp.end);
        sp.row = first + r;
        if (!rows[first + r]) rows[first + r] = { thread, label: r === 0, spans: [] };
        rows[first + r].spans.push(sp);
      }
    }
    timeline.spanRows = rows;
    timeline.bandH = rows.length * SPAN_H;
  }
  function spanName(sp) {
    const [tag, segment] = data.span_names[sp.name];
    return `${tag}:${segment}`;
  }
  function spanAt(x, y) {
    const row = timeline.spanRows[Math.floor(y / SPAN_H)];
    if (!row || y >= timeline.bandH) return null;
    const t = (x - LABEL_W) / plotWidth() * duration;
    const slack = 2 / plotWidth() * duration;  // two pixels: a short span can still be hit
    let best = null;
    for (const sp of row.spans) {
      if (t >= sp.begin - slack && t <= sp.end + slack && (!best || sp.end - sp.begin < best.end - best.begin)) best = sp;
    }
    return best;
  }
  function selectSpan(sp) {
    // On its thread, as record show --during counts it; a span that began
    // on another thread covers its process's threads.
    state.tid = sp.beginThread === sp.thread ? data.threads[sp.thread].tid : 0;
    $('thread').value = String(state.tid);
    if ($('thread').value !== String(state.tid)) {  // a thread without samples
      $('thread').append(new Option(`${state.tid}`, state.tid));
      $('thread').value = String(state.tid);
    }
    selectRange(sp.begin, sp.end);
  }

  // Samples per slice and lane: the busiest threads get a lane each, the
  // rest share one. One pass over the samples when the view changes.
  function buildTimeline() {
    const v = views[state.view];
    const { per, order } = fillThreads();
    const box = $('timeline-box').clientWidth || 1000;
    // Slices of at least 3 pixels, holding some 6 samples on average: fewer
    // would draw sampling noise, not the program.
    const slices = Math.max(20, Math.min(1000, Math.floor((box - LABEL_W) / 3), Math.ceil(v.times.length / 6)));
    const laneOf = new Int32Array(data.threads.length).fill(-1);
    const lanes = [];
    order.slice(0, MAX_LANES).forEach((th, i) => {
      laneOf[th] = i;
      const t = data.threads[th];
      lanes.push({ label: `${t.tid}${t.tid === t.pid ? ' (main)' : ''}`, samples: per[th] });
    });
    if (order.length > MAX_LANES) {
      lanes.push({ label: `${order.length - MAX_LANES} more threads`, samples: 0 });
      for (const th of order.slice(MAX_LANES)) {
        laneOf[th] = MAX_LANES;
        lanes[MAX_LANES].samples += per[th];
      }
    }
    if (lanes.length === 0) lanes.push({ label: 'no samples', samples: 0 });
    const counts = lanes.map(() => new Float64Array(slices));
    for (let i = 0; i < v.times.length; ++i) {
      const ty = v.types[i];
      if (!v.typeShown[ty]) continue;
      const lane = laneOf[v.typeThread[ty]];
      if (lane < 0) continue;
      const s = Math.min(slices - 1, Math.floor(v.times[i] / duration * slices));
      counts[lane][s] += 1;
    }
    Object.assign(timeline, { lanes, slices, counts });
    layoutSpans();
    drawTimeline();
  }

  function plotWidth() { return Math.max(1, $('timeline').clientWidth - LABEL_W); }
  function xToTime(x) { return Math.round(Math.min(1, Math.max(0, (x - LABEL_W) / plotWidth())) * duration); }
  function timeToX(t) { return LABEL_W + t / duration * plotWidth(); }

  function drawTimeline() {
    const c = $('timeline');
    const dpr = window.devicePixelRatio || 1;
    const band = timeline.bandH;
    const w = c.clientWidth || 1000, h = band + timeline.lanes.length * LANE_H + AXIS_H;
    c.style.height = h + 'px';
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '12px system-ui, sans-serif';
    const pw = plotWidth(), sw = pw / timeline.slices;
    timeline.spanRows.forEach((row, ri) => {
      const y0 = ri * SPAN_H;
      g.fillStyle = '#fbf8ef';
      g.fillRect(0, y0, w, SPAN_H);
      if (row.label) {
        g.fillStyle = '#665';
        g.fillText(`${data.threads[row.thread].tid} points`, 6, y0 + 12, LABEL_W - 10);
      }
      for (const sp of row.spans) {
        const x0 = timeToX(sp.begin), x1 = Math.max(x0 + 2, timeToX(sp.end));
        g.fillStyle = `hsl(${(sp.name * 67) % 360}, 55%, 72%)`;
        g.fillRect(x0, y0 + 1, x1 - x0, SPAN_H - 2);
        const label = spanName(sp);
        if (x1 - x0 > 30) {
          g.fillStyle = '#222';
          g.fillText(label, x0 + 3, y0 + 12, x1 - x0 - 6);
        }
      }
    });
    timeline.lanes.forEach((lane, li) => {
      const y0 = band + li * LANE_H;
      g.fillStyle = li % 2 ? '#f6f6f8' : '#fff';
      g.fillRect(0, y0, w, LANE_H);
      g.fillStyle = '#333';
      g.fillText(lane.label, 6, y0 + 17, LABEL_W - 10);
      // A thread's samples: its share of one CPU in the slice (a full lane
      // is a thread always on the CPU); else the count against the busiest.
      const counts = timeline.counts[li], v = views[state.view];
      let top = 1;
      if (v.rate && li < MAX_LANES) {
        top = v.rate * duration / 1e9 / timeline.slices;
      } else {
        for (const n of counts) top = Math.max(top, n);
      }
      for (let s = 0; s < timeline.slices; ++s) {
        if (!counts[s]) continue;
        const f = Math.min(1, counts[s] / top), bh = Math.max(1, f * (LANE_H - 4));
        g.fillStyle = heat(f, 55);
        g.fillRect(LABEL_W + s * sw, y0 + LANE_H - 2 - bh, Math.max(1, sw), bh);
      }
    });
    // The axis.
    const y = band + timeline.lanes.length * LANE_H;
    g.fillStyle = '#555';
    const ticks = 8;
    for (let i = 0; i <= ticks; ++i) {
      const t = duration * i / ticks, x = timeToX(t);
      g.fillRect(x, y, 1, 4);
      const label = fmtTime(t);
      const lw = g.measureText(label).width;
      g.fillText(label, Math.min(w - lw - 2, Math.max(LABEL_W, x - lw / 2)), y + 16);
    }
    // The selection.
    let a = state.from, b = state.to;
    if (timeline.drag) [a, b] = [Math.min(timeline.drag.a, timeline.drag.b), Math.max(timeline.drag.a, timeline.drag.b)];
    if (a > 0 || b < duration) {
      g.fillStyle = 'rgba(20, 20, 30, 0.35)';
      g.fillRect(LABEL_W, 0, timeToX(a) - LABEL_W, y);
      g.fillRect(timeToX(b), 0, LABEL_W + pw - timeToX(b), y);
      g.fillStyle = '#2d6ee0';
      g.fillRect(timeToX(a) - 1, 0, 2, y);
      g.fillRect(timeToX(b) - 1, 0, 2, y);
    }
  }

  function pointerX(e) { return e.clientX - $('timeline').getBoundingClientRect().left; }
  function pointerY(e) { return e.clientY - $('timeline').getBoundingClientRect().top; }
  $('timeline').addEventListener('mousedown', (e) => {
    const sp = spanAt(pointerX(e), pointerY(e));
    if (sp) {
      selectSpan(sp);
      return;
    }
    const t = xToTime(pointerX(e));
    timeline.drag = { a: t, b: t };
    drawTimeline();
  });
  $('timeline').addEventListener('mousemove', (e) => {
    const sp = timeline.drag ? null : spanAt(pointerX(e), pointerY(e));
    $('timeline').title = sp ? `${spanName(sp)} — ${kit.duration(sp.end - sp.begin)}, ` +
        `[${fmtTime(sp.begin)}, ${fmtTime(sp.end)}] on thread ${data.threads[sp.thread].tid}: ` +
        'click to see the samples inside it' : '';
  });
  window.addEventListener('mousemove', (e) => {
    if (!timeline.drag) return;
    timeline.drag.b = xToTime(pointerX(e));
    drawTimeline();
  });
  window.addEventListener('mouseup', () => {
    if (!timeline.drag) return;
    const a = Math.min(timeline.drag.a, timeline.drag.b), b = Math.max(timeline.drag.a, timeline.drag.b);
    timeline.drag = null;
    if (b - a < duration / 2000) {  // a click, not a drag: the whole recording
      selectRange(0, duration);
    } else {
      selectRange(a, b);
    }
  });

  // --- The answer and the flame graph ----------------------------------------

  function selectRange(from, to) {
    state.from = from;
    state.to = to;
    state.focus = null;
    answer();
  }

  function answer() {
    const v = views[state.view];
    const start = performance.now();
    // One thread's range is counted exactly, as record show --thread does:
    // the tree's "other" has no thread, so no bound could be stated over
    // the thread's samples.
    const q = range(v, state.from, state.to, state.exact || state.tid !== 0);
    const ms = performance.now() - start;
    // The call tree of the range: samples per stack of the threads shown.
    const root = { frame: -1, total: 0, self: 0, children: new Map(), parent: null, depth: 0 };
    const fns = new Map();  // frame -> [self, total]
    for (const [ty, n] of q.counts) {
      if (!v.typeShown[ty]) continue;
      if (state.tid && data.threads[v.typeThread[ty]].tid !== state.tid) continue;
      const stack = data.stacks[v.typeStack[ty]];
      let node = root;
      node.total += n;
      for (const f of stack) {
        let c = node.children.get(f);
        if (!c) {
          c = { frame: f, total: 0, self: 0, children: new Map(), parent: node, depth: node.depth + 1 };
          node.children.set(f, c);
        }
        c.total += n;
        node = c;
      }
      node.self += n;
      if (stack.length) {
        const leaf = stack[stack.length - 1];
        if (!fns.has(leaf)) fns.set(leaf, [0, 0]);
        fns.get(leaf)[0] += n;
        for (const f of new Set(stack)) {
          if (!fns.has(f)) fns.set(f, [0, 0]);
          fns.get(f)[1] += n;
        }
      }
    }
    // The bound: samples merged as "other" cannot be placed in a stack.
    if (q.other > 0 && !state.tid) {
      root.children.set(-2, { frame: -2, total: q.other, self: q.other, children: new Map(), parent: root, depth: 1 });
      root.total += q.other;
    }
    state.answer = { ...q, ms, root, fns, shown: root.total };
    state.focus = null;
    summarise();
    drawFlame();
    drawFunctions();
    drawTimeline();
  }

  function summarise() {
    const q = state.answer, v = views[state.view];
    const el = $('summary');
    el.textContent = '';
    const span = document.createElement('span');
    span.id = 'range';
    span.dataset.fromNs = String(state.from);
    span.dataset.toNs = String(state.to);
    span.textContent = `[${fmtTime(state.from)}, ${fmtTime(state.to)}]`;
    el.append(span, `: ${fmtCount(q.shown)} ${v.unit}` +
        (state.tid ? ` of thread ${state.tid}` : '') +
        ` · answered in ${q.ms.toFixed(2)} ms from ${q.merged} tree nodes and ${q.leaves} leaves ` +
        `(${fmtCount(q.scanned)} samples scanned)`);
    if (q.other > 0) {
      const b = document.createElement('span');
      b.className = 'bound';
      b.textContent = ` · bound: ${fmtCount(q.other)} of these ${v.unit} (${pct(q.other, q.samples)}) are ` +
          `in the time tree's "other" (stacks too rare to be listed where the range merged whole nodes): ` +
          `each frame's share is exact or short by at most that much (tick "exact" to count them)`;
      el.append(b);
    }
    Object.assign(el.dataset, {
      samples: q.samples, other: q.other, merged: q.merged, leaves: q.leaves, scanned: q.scanned,
    });
  }

  function frameName(f) {
    if (f === -1) return 'all';
    if (f === -2) return '[other: in the time tree\'s lists of no frame]';
    return data.frames[f];
  }

  function matches(f) {
    return state.search !== '' && f >= 0 && data.frames[f].toLowerCase().includes(state.search);
  }

  function drawFlame() {
    const svg = $('flame');
    const q = state.answer;
    if (q.root.total === 0) {
      svg.textContent = '';
      state.drawn = [];
      svg.setAttribute('height', 30);
      svg.removeAttribute('viewBox');
      svg.append(kit.el('svg:text', { x: 8, y: 20 }, `no ${views[state.view].unit} in this range`));
      return;
    }
    const focus = state.focus || q.root;
    let maxSelf = 1;
    const walk = (n) => {
      if (n.frame >= 0) maxSelf = Math.max(maxSelf, n.self);
      for (const c of n.children.values()) walk(c);
    };
    walk(focus);
    const unit = views[state.view].unit, all = q.root.total;
    state.drawn = kit.flame(svg, {
      root: q.root,
      focus,
      showRoot: true,
      kids: (n) => [...n.children.values()],
      parent: (n) => n.parent,
      total: (n) => n.total,
      name: (n) => frameName(n.frame),
      fill: (n) => (n.frame < 0 ? '#bbb' : heat(n.self / maxSelf, 68)),
      classes: (n) => (n.frame === -2 ? ['other'] : marked.has(n.frame) ? ['over-field'] : []),
      match: (n) => matches(n.frame),
      tip: (n) => `${frameName(n.frame)} — ${fmtCount(n.total)} ${unit} (${pct(n.total, all)}), ` +
          `self ${fmtCount(n.self)} (${pct(n.self, all)})` +
          (fieldCost.has(n.frame) ? ` · ${fieldCost.get(n.frame)}` : '') +
          (marked.has(n.frame) ? ` · ${marked.get(n.frame)}` : ''),
      onClick: (n) => {
        state.focus = n.frame === -1 ? null : n;
        drawFlame();
      },
      width: $('flame-box').clientWidth || 1000,
      row: 18,
    }).map((d) => d.node);
    if (state.search) {
      const m = document.createElement('span');
      m.id = 'matched';
      m.textContent = ` · "${state.search}": ${pct(searchTotal(focus), focus.total)} of the frame shown`;
      $('summary').append(m);
    }
  }

  // The samples under frames matching the search, each counted once.
  function searchTotal(n) {
    if (matches(n.frame)) return n.total;
    let s = 0;
    for (const c of n.children.values()) s += searchTotal(c);
    return s;
  }

  function drawFunctions() {
    const body = $('functions').tBodies[0];
    body.textContent = '';
    const q = state.answer, all = q.root.total;
    $('unit-name').textContent = views[state.view].unit;
    const rows = [...q.fns.entries()].sort((a, b) => b[1][0] - a[1][0] || b[1][1] - a[1][1]).slice(0, 40);
    for (const [f, [self, total]] of rows) {
      const tr = body.insertRow();
      tr.insertCell().textContent = pct(self, all);
      tr.insertCell().textContent = pct(total, all);
      const name = tr.insertCell();
      name.className = 'name';
      name.textContent = data.frames[f];
      if (fieldCost.has(f)) name.title = fieldCost.get(f);
      if (marked.has(f)) {
        tr.className = 'over-field';
        name.title = (name.title ? name.title + ' · ' : '') + marked.get(f);
      }
      tr.cells[0].style.background = heat(self / Math.max(1, rows[0][1][0]), 85);
    }
  }

  // --- Interaction -------------------------------------------------------------

  window.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    if (state.focus) {
      state.focus = state.focus.parent && state.focus.parent.frame !== -1 ? state.focus.parent : null;
      drawFlame();
    } else if (document.activeElement === $('timeline')) {
      selectRange(0, duration);
    }
  });
  $('view').addEventListener('change', () => {
    state.view = Number($('view').value);
    buildTimeline();
    answer();
  });
  $('thread').addEventListener('change', () => {
    state.tid = Number($('thread').value);
    answer();
  });
  $('exact').addEventListener('change', () => {
    state.exact = $('exact').checked;
    answer();
  });
  $('search').addEventListener('input', () => {
    state.search = $('search').value.trim().toLowerCase();
    summarise();
    drawFlame();
  });
  $('whole').addEventListener('click', () => selectRange(0, duration));
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      buildTimeline();
      drawFlame();
    }, 100);
  });

  // What a test (or a curious user in the console) can read back: the
  // range, the answer's figures, and each drawn frame's path and counts.
  window.fieldprofRecording = {
    state: () => ({
      from_ns: state.from,
      to_ns: state.to,
      tid: state.tid,
      view: views[state.view].name,
      samples: state.answer.samples,
      other: state.answer.other,
      merged: state.answer.merged,
      leaves: state.answer.leaves,
      scanned: state.answer.scanned,
      frames: state.drawn.filter((n) => n.frame >= 0).map((n) => {
        const path = [];
        for (let a = n; a && a.frame >= 0; a = a.parent) path.unshift(data.frames[a.frame]);
        return { path: path.join(';'), total: n.total, self: n.self };
      }),
      // The frames drawn marked as costing more than the field, by name.
      over_field: [...document.querySelectorAll('#flame g.over-field')].map((g) => g.textContent),
      over_field_rows: [...document.querySelectorAll('#functions tr.over-field td.name')].map((td) => td.textContent),
      // Each drawn frame's tooltip that carries the field's cost.
      field_tips: state.drawn.filter((n) => fieldCost.has(n.frame)).map((n) => fieldCost.get(n.frame)),
      field_rows: [...document.querySelectorAll('#functions td.name')].filter((td) => td.title.startsWith('field:')).map((td) => `${td.textContent}: ${td.title}`),
    }),
    duration_ns: duration,
    // The tree's answer for any range, and the samples it answers from.
    query: (view, t1, t2, exact) => range(views[view], t1, t2, exact),
    samples: (view) => ({ times: views[view].times, types: views[view].types }),
    // Where time `ns` is on the screen (client coordinates) in the timeline.
    xOf: (ns) => $('timeline').getBoundingClientRect().left + timeToX(ns),
    yOfLane: (lane) => $('timeline').getBoundingClientRect().top + timeline.bandH + lane * LANE_H + LANE_H / 2,
    // The points' spans, and where each is drawn (client coordinates).
    spans: () => spans.map((sp) => ({
      name: spanName(sp), tid: data.threads[sp.thread].tid, begin_ns: sp.begin, end_ns: sp.end,
      x: $('timeline').getBoundingClientRect().left + (timeToX(sp.begin) + Math.max(timeToX(sp.begin) + 2, timeToX(sp.end))) / 2,
      y: $('timeline').getBoundingClientRect().top + sp.row * SPAN_H + SPAN_H / 2,
    })),
  };

  buildTimeline();
  answer();
  document.body.dataset.ready = '1';
})();
