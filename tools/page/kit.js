// The page kit: what every fieldprof page draws, written once. The local
// toolkit's pages (record, tree, points), the vendor's report and the
// aggregator's dashboard each put this file before their own script and
// use `fieldprofKit`:
//   numbers as text   duration, durationAtResolution, bytes, count, percent
//   colour            heat (the heat spectrum: blue cheap .. red costly)
//   elements          el (HTML, or SVG with an 'svg:' prefix), hover (the
//                     page's #tip follows the pointer; without one, the
//                     element's own title), sortable (tables by column)
//   pictures          histogram (one bar per log2 bucket, as the field
//                     keeps values) and flame (a flame graph with a focus);
//                     stackTree (the tree of field stacks flame draws)
//   drawMarked        draws what a page without a script marked
// Nothing here fetches anything: the pages are self-contained.
const fieldprofKit = (function () {
  'use strict';
  const svgNs = 'http://www.w3.org/2000/svg';

  // ---------------------------------------------------------- numbers as text

  const missing = (v) => v === null || v === undefined || !isFinite(v);

  // 812 ns, 0.25 ns, 12.5 ns, 3.20 us, 41.07 ms, 2.50 s: the unit chosen by
  // magnitude, as the command line writes them; a fraction of a
  // nanosecond (a mean) keeps three significant figures; negative values
  // keep their sign (a difference).
  function duration(ns) {
    if (missing(ns)) return '-';
    const a = Math.abs(ns);
    if (a < 1000) return ns.toFixed(Number.isInteger(ns) || a >= 100 ? 0 : a < 10 ? 2 : 1) + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
    if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }

  // A duration under a series' timing resolution cannot be told from 0
  // (common/statistics/resolution.h): "< 10 ns", as the command line says.
  function durationAtResolution(ns, resolution) {
    if (resolution && !missing(ns) && ns < resolution) return '< ' + duration(resolution);
    return duration(ns);
  }

  function bytes(v) {
    if (missing(v)) return '-';
    const a = Math.abs(v);
    if (a < 1024) return v.toFixed(a < 10 && a !== 0 && !Number.isInteger(v) ? 1 : 0) + ' B';
    if (a < 1048576) return (v / 1024).toFixed(2) + ' KiB';
    if (a < 1073741824) return (v / 1048576).toFixed(2) + ' MiB';
    return (v / 1073741824).toFixed(2) + ' GiB';
  }

  function count(n) { return missing(n) ? '-' : Number(n).toLocaleString('en-US'); }

  // `part` of `whole` as a percentage ("0%" of nothing).
  function percent(part, whole, digits) {
    return whole > 0 ? (100 * part / whole).toFixed(digits === undefined ? 1 : digits) + '%' : '0%';
  }

  // ------------------------------------------------------------------ colour

  // The heat spectrum the field and the toolkit share: position 0 is blue
  // (cheap, cold), 1 red (costly, hot); `light` is the lightness in percent.
  function heat(position, light, saturation) {
    const p = Math.min(1, Math.max(0, missing(position) ? 0 : position));
    return `hsl(${Math.round(240 * (1 - p))},${saturation || 80}%,${Math.round(light === undefined ? 62 : light)}%)`;
  }

  // ---------------------------------------------------------------- elements

  // el('td', {class: 'name'}, 'text', child, ...); el('svg:rect', {...}).
  function el(tag, attrs, ...kids) {
    const e = tag.startsWith('svg:') ? document.createElementNS(svgNs, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const k of kids) {
      if (k !== undefined && k !== null) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  // The text shown while the pointer is on `node`: `text`, or text(), asked
  // when shown. A page with a #tip element shows it there, beside the
  // pointer; otherwise the element carries it as its own title.
  function hover(node, text) {
    const say = () => (typeof text === 'function' ? text() : text);
    const tip = document.getElementById('tip');
    if (!tip) {
      if (node instanceof SVGElement) node.append(el('svg:title', {}, say()));
      else node.title = say();
      return node;
    }
    node.addEventListener('mousemove', (ev) => {
      tip.textContent = say();
      tip.hidden = false;
      tip.style.left = Math.max(0, Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 8)) + 'px';
      tip.style.top = ev.clientY + 14 + 'px';
    });
    node.addEventListener('mouseleave', () => { tip.hidden = true; });
    return node;
  }

  // Click, Enter or Space on a column's header sorts the rows by it: by
  // the cells' data-v numbers where both have one, else by their text.
  function sortable(table) {
    table.querySelectorAll('th').forEach((th, col) => {
      th.tabIndex = 0;
      let dir = -1;
      const sort = () => {
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        dir = -dir;
        rows.sort((a, b) => {
          const x = a.cells[col], y = b.cells[col];
          const p = x.getAttribute('data-v'), q = y.getAttribute('data-v');
          if (p !== null && q !== null) return dir * (parseFloat(p) - parseFloat(q));
          return dir * x.textContent.localeCompare(y.textContent);
        });
        rows.forEach((r) => body.appendChild(r));
        table.querySelectorAll('th').forEach((h) => h.removeAttribute('aria-sort'));
        th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
      };
      th.addEventListener('click', sort);
      th.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sort(); }
      });
    });
    return table;
  }

  // ---------------------------------------------------------------- pictures

  // A histogram in the field's log2 buckets: `buckets` is [[index, count],
  // ...], bucket i holding [2^i, 2^(i+1)) and index -1 the zero bucket.
  // One bar per bucket from the zero bucket (when it has any) and the
  // lowest to the highest, in the heat spectrum by position, a fuller
  // bucket darker. Options:
  //   width, height     of the bars' area (labels add 14 px below)
  //   format(v)         a bucket edge as text (default: count)
  //   range(i)          a bucket's text (default: "low .. high", "0")
  //   noun(c)           after each bar's count ("occurrences")
  //   log               heights on a log scale (so a thin tail shows)
  //   labels            edges under the axis
  //   label             the picture's accessible name
  function histogram(buckets, o) {
    o = o || {};
    const width = o.width || 320, height = o.height || 60;
    const fmt = o.format || count;
    const svg = el('svg:svg', { class: 'hist', width, height: height + (o.labels ? 14 : 0), role: 'img',
      'aria-label': o.label || 'histogram' });
    const held = buckets.filter((b) => b[1] > 0);
    svg.dataset.total = String(held.reduce((s, b) => s + b[1], 0));
    if (!held.length) return svg;
    const range = o.range || ((i) => (i < 0 ? '0' : fmt(2 ** i) + ' .. ' + fmt(2 ** (i + 1) - 1)));
    const lo = Math.min(...held.map((b) => b[0]).filter((i) => i >= 0), 99);
    const hi = Math.max(...held.map((b) => b[0]), -1);
    const zero = held.some((b) => b[0] < 0);
    const indices = (zero ? [-1] : []).concat(hi >= lo ? Array.from({ length: hi - lo + 1 }, (_, k) => lo + k) : []);
    const counts = new Map(held.map((b) => [b[0] < 0 ? -1 : b[0], b[1]]));
    const top = Math.max(...held.map((b) => b[1]));
    const w = width / indices.length;
    indices.forEach((i, k) => {
      const c = counts.get(i) || 0;
      const frac = o.log ? Math.log1p(c) / Math.log1p(top) : c / top;
      const position = i < 0 ? 0 : hi === lo ? 1 : (i - lo) / (hi - lo);
      const bh = c ? Math.max(o.log ? 2 : 1, frac * (height - 1)) : 0;
      const bar = el('svg:rect', { class: 'bucket', x: (k * w).toFixed(2), y: (height - bh).toFixed(2),
        width: Math.max(0.5, w - 1).toFixed(2), height: bh.toFixed(2), fill: heat(position, 80 - 35 * frac, 85),
        'data-bucket': i, 'data-count': c });
      const noun = typeof o.noun === 'function' ? o.noun(c) : o.noun;
      hover(bar, range(i) + ': ' + count(c) + (noun ? ' ' + noun : ''));
      svg.append(bar);
      if (o.labels && (k === 0 || k === indices.length - 1 || k % 4 === 0)) {
        svg.append(el('svg:text', { x: (k * w).toFixed(1), y: height + 11 }, i < 0 ? range(-1) : fmt(2 ** i)));
      }
    });
    return svg;
  }

  // A flame graph of a tree into `svg`: each node as wide as its total,
  // its children above it side by side, widest first. The focus fills the
  // width; its ancestors stand below it full width and faded (class
  // 'above'). Nodes are whatever the page uses; the options read them:
  //   root, focus       nodes (focus defaults to root)
  //   showRoot          draw the root as a frame of its own
  //   kids(n), parent(n), total(n), name(n)
  //   fill(n)           its colour (default: grey)
  //   classes(n)        more class names for its <g>
  //   match(n)          marked as found by a search (class 'match')
  //   tip(n)            the text shown on hover
  //   onClick(n)        after a click on its frame
  //   width, row        the picture's width and a row's height (17)
  // Returns what was drawn: {node, name, x, w, depth, above, fill, match}
  // per frame, in drawing order (data-i of each <g>).
  function flame(svg, o) {
    const row = o.row || 17, width = o.width || svg.clientWidth || 1000;
    const focus = o.focus === undefined || o.focus === null ? o.root : o.focus;
    svg.textContent = '';
    const drawn = [];
    let deepest = 0;
    const place = (n, x, w, depth, above) => {
      const name = o.name(n), match = o.match ? Boolean(o.match(n)) : false;
      const fill = o.fill ? o.fill(n) : '#bbb';
      const g = el('svg:g', { 'data-i': drawn.length, 'data-total': o.total(n), 'data-name': name });
      if (above) g.classList.add('above');
      if (match) g.classList.add('match');
      for (const c of (o.classes ? o.classes(n) : [])) g.classList.add(c);
      g.append(el('svg:rect', { x: x.toFixed(2), y: depth * row, width: Math.max(0.5, w - 0.5).toFixed(2),
        height: row - 1, fill }));
      if (w > 28) {
        const fit = Math.floor((w - 6) / 6.6);
        g.append(el('svg:text', { x: (x + 3).toFixed(2), y: depth * row + row - 5 },
          name.length <= fit ? name : name.slice(0, Math.max(0, fit - 1)) + '…'));
      }
      if (o.tip) hover(g, () => o.tip(n));
      if (o.onClick) g.addEventListener('click', () => o.onClick(n));
      svg.append(g);
      drawn.push({ node: n, name, x, w, depth, above, fill, match });
      deepest = Math.max(deepest, depth);
    };
    const byTotal = (n) => o.kids(n).filter((k) => o.total(k) > 0).sort((a, b) => o.total(b) - o.total(a));
    const below = (n, x, w, depth) => {
      if (w < 0.5 && n !== focus) return;
      place(n, x, w, depth, false);
      spread(n, x, w, depth + 1);
    };
    const spread = (n, x, w, depth) => {
      const all = o.total(n);
      if (!(all > 0)) return;
      let cx = x;
      for (const k of byTotal(n)) {
        const kw = (w * o.total(k)) / all;
        below(k, cx, kw, depth);
        cx += kw;
      }
    };
    const chain = [];
    for (let a = focus; a !== o.root; a = o.parent(a)) chain.unshift(a);
    let depth = 0;
    if (o.showRoot && focus !== o.root) place(o.root, 0, width, depth++, true);
    for (const a of chain.slice(0, -1)) place(a, 0, width, depth++, true);
    if (focus === o.root && !o.showRoot) spread(o.root, 0, width, 0);
    else below(focus, 0, width, depth);
    const h = (deepest + 1) * row + 2;
    svg.setAttribute('height', h);
    svg.setAttribute('viewBox', `0 0 ${width} ${h}`);
    return drawn;
  }

  // The tree of a module's field stacks (GET /v1/stacks: [{frames, ns}],
  // outermost frame first) as flame reads it: {name, total, self, kids,
  // parent}; a frame in brackets ("[libc.so.6]", "[program]", "[other]")
  // is where the time went on, or what was folded, and is marked `mark`.
  function stackTree(stacks, rootName) {
    const node = (name, parent) => ({ name, total: 0, self: 0, kids: [], parent, index: new Map(),
      mark: name.length > 2 && name[0] === '[' && name[name.length - 1] === ']' });
    const root = node(rootName || 'all', null);
    for (const s of stacks) {
      let n = root;
      n.total += s.ns;
      for (const f of s.frames) {
        let k = n.index.get(f);
        if (!k) {
          k = node(f, n);
          n.index.set(f, k);
          n.kids.push(k);
        }
        k.total += s.ns;
        n = k;
      }
      n.self += s.ns;
    }
    return root;
  }

  // A field stacks' flame graph into `svg`, zoomed by a click on a frame
  // (a click on the faded frames below goes back out); `onFocus(node)`
  // after each drawing. Returns {root, draw(focus)}.
  function fieldFlame(svg, stacks, rootName, onFocus) {
    const root = stackTree(stacks, rootName);
    const draw = (focus) => {
      const drawn = flame(svg, { root, focus, showRoot: true, kids: (n) => n.kids, parent: (n) => n.parent,
        total: (n) => n.total, name: (n) => n.name,
        fill: (n) => (n.mark ? '#ccc' : heat(root.total ? n.self / n.total : 0, 66)),
        classes: (n) => (n.mark ? ['other'] : []),
        tip: (n) => `${n.name}\n${duration(n.total)} (${percent(n.total, root.total)} of the module's sampled CPU time)` +
          (n.self ? `, ${duration(n.self)} in the frame itself` : ''),
        onClick: (n) => draw(n === focus ? n.parent || root : n) });
      if (onFocus) onFocus(focus, drawn);
      return drawn;
    };
    draw(root);
    return { root, draw };
  }

  // A page written without a script of its own (the vendor's report, the
  // version diff) marks its pictures and leaves the drawing to the kit:
  // every svg element of class "hist" with data-buckets ("[[index, count],
  // ...]"), data-unit ("ns", "bytes" or "count") and data-resolution (ns)
  // becomes its histogram, and every table sorts by its columns.
  function drawMarked(root) {
    root = root || document;
    const formats = { ns: duration, bytes, count: (v) => count(Math.round(v * 100) / 100) };
    root.querySelectorAll('svg.hist[data-buckets]').forEach((mark) => {
      const format = formats[mark.dataset.unit] || count;
      const resolution = Number(mark.dataset.resolution) || 0;
      const range = (i) => {
        if (i < 0) return resolution && mark.dataset.unit === 'ns' ? durationAtResolution(0, resolution) : '0';
        if (resolution && mark.dataset.unit === 'ns' && 2 ** (i + 1) - 1 < resolution) return durationAtResolution(0, resolution);
        return format(2 ** i) + ' .. ' + format(2 ** (i + 1) - 1);
      };
      mark.replaceWith(histogram(JSON.parse(mark.dataset.buckets), { width: Number(mark.getAttribute('width')),
        height: Number(mark.getAttribute('height')), format, range, label: mark.getAttribute('aria-label') }));
    });
    root.querySelectorAll('svg.field-flame[data-stacks]').forEach((svg) => {
      fieldFlame(svg, JSON.parse(svg.dataset.stacks), svg.dataset.root);
    });
    root.querySelectorAll('table').forEach(sortable);
  }

  return { duration, durationAtResolution, bytes, count, percent, heat, el, hover, sortable, histogram, flame,
    stackTree, fieldFlame, drawMarked };
})();
