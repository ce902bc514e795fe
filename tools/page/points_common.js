// What the two points pages share (points.js, points_compare.js), put
// before each in its page: durations as text, making HTML and SVG
// elements ('svg:rect'), and the tooltip (#tip) that follows the pointer.
const fieldprofPage = (function () {
  'use strict';
  const svgNs = 'http://www.w3.org/2000/svg';
  const tip = document.getElementById('tip');
  const fmt = (ns) => {
    if (ns === null || ns === undefined) return '-';
    const a = Math.abs(ns);
    return a >= 1e9 ? (ns / 1e9).toFixed(3) + ' s' : a >= 1e6 ? (ns / 1e6).toFixed(3) + ' ms'
      : a >= 1e3 ? (ns / 1e3).toFixed(2) + ' us' : ns.toFixed(0) + ' ns';
  };
  const el = (tag, attrs, text) => {
    const e = tag.startsWith('svg:') ? document.createElementNS(svgNs, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const hover = (node, text) => {
    node.addEventListener('mousemove', (ev) => {
      tip.hidden = false;
      tip.textContent = text;
      tip.style.left = ev.clientX + 12 + 'px';
      tip.style.top = ev.clientY + 12 + 'px';
    });
    node.addEventListener('mouseleave', () => { tip.hidden = true; });
  };
  return { fmt, el, hover };
})();
