"""The static parts of the tree page (comlrl/viz/tree_html.py): its style sheet, its script and the page
template the SVG and the node records are filled into."""

from __future__ import annotations

CSS = """
:root{--bg:#fafafa;--fg:#202124;--mut:#5f6368;--line:#dadce0;--accent:#1a73e8;--bad:#c5221f}
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:10px 16px;border-bottom:1px solid var(--line);background:#fff;position:sticky;top:0;z-index:2}
header h1{font-size:17px;margin:0 0 2px}
header .sub,.sub{color:var(--mut);font-weight:normal;font-size:13px}
header .legend{font-size:12px;color:var(--mut);margin-top:4px}
header .legend span.k{display:inline-block;width:22px;height:12px;border:1.5px solid #5f6368;border-radius:3px;vertical-align:middle;margin:0 3px 0 10px;background:#fff}
header .legend span.k.n{background:#f1f3f4}
header .legend span.k.p{border:2px dashed var(--bad);background:#fce8e6}
header button{font:inherit;font-size:12px;padding:1px 8px;margin-left:4px}
main{display:flex;gap:0;align-items:flex-start}
#trees{flex:1 1 60%;min-width:0;padding:8px 16px}
#detail{flex:0 0 40%;max-width:40%;height:calc(100vh - 96px);overflow:auto;position:sticky;top:92px;
 border-left:1px solid var(--line);background:#fff;padding:10px 14px}
section.tree h2{font-size:15px;margin:10px 0 4px}
.scroll{overflow:auto;max-height:calc(100vh - 150px);border:1px solid var(--line);background:#fff;border-radius:6px}
svg{display:block;font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
svg .col-head{fill:var(--mut);font-weight:bold;font:bold 12px system-ui,sans-serif}
svg .edge path,svg .leaf-stub path{fill:none;stroke-width:1.6}
svg .edge text{fill:#3c4043;font-size:11px}
svg .leaf-stub text{fill:var(--mut);font-size:10.5px}
svg .node{cursor:pointer}
svg .node rect{fill:#fff;stroke:#5f6368;stroke-width:1.5}
svg .node.nosignal rect{fill:#f1f3f4}
svg .node.pruned rect{fill:#fce8e6;stroke:var(--bad);stroke-width:2;stroke-dasharray:5 3}
svg .node .badge{fill:var(--bad);font-weight:bold;font-size:10px}
svg .node .nid{font-weight:bold}
svg .node:hover rect,svg .node:focus rect{stroke:var(--accent);stroke-width:2.5}
svg .node.sel rect{stroke:var(--accent);stroke-width:3;fill:#e8f0fe}
svg .edge.sel path{stroke:var(--accent)!important;stroke-width:3}
svg .node:focus{outline:none}
#detail h2{font-size:15px;margin:4px 0}
#detail h3{font-size:14px;margin:14px 0 4px;border-bottom:1px solid var(--line)}
#detail pre{white-space:pre-wrap;word-break:break-word;background:#f8f9fa;border:1px solid var(--line);
 border-radius:4px;padding:6px;margin:3px 0 8px;font:12px ui-monospace,Menlo,Consolas,monospace;max-height:320px;overflow:auto}
#detail .meta{color:var(--mut);font-size:12px}
#detail .pill{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;margin-left:6px;background:#e8eaed}
#detail .pill.bad{background:#fce8e6;color:var(--bad)}
#detail .pill.pos{background:#e6f4ea;color:#137333}
#detail .pill.neg{background:#fce8e6;color:#a50e0e}
#detail table{border-collapse:collapse;font-size:12px;width:100%}
#detail td,#detail th{border-bottom:1px solid var(--line);padding:2px 5px;text-align:left;vertical-align:top}
#detail td.num{text-align:right;font-variant-numeric:tabular-nums}
#detail button.link{border:none;background:none;color:var(--accent);cursor:pointer;padding:0;font:inherit;text-decoration:underline}
#detail .role{font-size:11px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}
#detail .empty{color:var(--mut);font-style:italic}
"""

JS = r"""
(function () {
  'use strict';
  const DATA = JSON.parse(document.getElementById('viz-data').textContent);
  const detail = document.getElementById('detail');
  function el(tag, props, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') n.className = v; else if (k === 'onclick') n.addEventListener('click', v); else n.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) n.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return n;
  }
  const fmt = (v, d = 3) => (typeof v === 'number' && isFinite(v)) ? v.toFixed(d) : '–';
  const label = (joint, j) => Array.isArray(joint && joint[j]) ? '(' + joint[j].join(',') + ')' : '#' + j;
  function nodeLink(id) {
    return DATA[id] ? el('button', {class: 'link', onclick: () => show(id, true)}, id) : el('span', {}, String(id));
  }
  function detailsText(d) {
    if (!d || typeof d !== 'object') return '';
    const parts = [];
    if (d.all_passed) parts.push('passed');
    if (d.components) for (const [k, v] of Object.entries(d.components)) if (v) parts.push(k + ' ' + fmt(v, 2));
    for (const note of d.notes || []) parts.push(note);
    return parts.join(' · ');
  }
  function show(id, scroll) {
    const r = DATA[id];
    if (!r) return;
    document.querySelectorAll('.sel').forEach(n => n.classList.remove('sel'));
    document.querySelectorAll('g.node').forEach(g => { if (g.dataset.id === id) {
      g.classList.add('sel'); if (scroll) g.scrollIntoView({block: 'center', inline: 'nearest'}); } });
    document.querySelectorAll('g.edge').forEach(g => { if (g.dataset.child === id) g.classList.add('sel'); });
    detail.replaceChildren();
    detail.append(el('h2', {}, 'node ' + id, r.pruned ? el('span', {class: 'pill bad'}, '✂ pruned (stopped early)') : null));
    const meta = el('div', {class: 'meta'}, 'step ' + r.step + ' · turn ' + r.turn + ' · tree ' + r.tree);
    detail.append(meta);
    if (r.parent !== null && r.parent !== undefined) {
      const p = DATA[r.parent], j = r.parent_action;
      const line = el('div', {class: 'meta'}, 'child of ', nodeLink(r.parent), ' via joint action ' + label(p && p.joint_actions, j));
      if (p) line.append(' · r ' + fmt((p.rewards || [])[j]) + ' · R ' + fmt((p.returns || [])[j]));
      detail.append(line);
    }
    const rewards = r.rewards || [], returns = r.returns || [], joint = r.joint_actions || [];
    const details = r.reward_details || [], children = r.children || {};
    detail.append(el('h3', {}, 'Joint actions (' + rewards.length + ')'));
    const tbl = el('table', {}, el('tr', {}, el('th', {}, '#'), el('th', {}, 'completions'), el('th', {}, 'r'),
      el('th', {}, 'R'), el('th', {}, 'child'), el('th', {}, 'reward details')));
    rewards.forEach((rw, j) => {
      const cid = children[String(j)];
      tbl.append(el('tr', {}, el('td', {class: 'num'}, j), el('td', {}, label(joint, j)), el('td', {class: 'num'}, fmt(rw)),
        el('td', {class: 'num'}, fmt(returns[j])), el('td', {}, cid ? nodeLink(cid) : el('span', {class: 'empty'}, 'leaf')),
        el('td', {}, detailsText(details[j]))));
    });
    detail.append(tbl);
    const prompts = r.prompts || [], comps = r.completions || [], advs = r.advantages || [];
    const nAgents = Math.max(prompts.length, comps.length);
    for (let a = 0; a < nAgents; a++) {
      const adv = advs[a];
      detail.append(el('h3', {}, 'Agent ' + a, adv ? null : el('span', {class: 'pill'}, 'no advantage (no signal)')));
      const pd = el('details', {}, el('summary', {}, 'prompt (' + (prompts[a] || []).length + ((prompts[a] || []).length === 1 ? ' message)' : ' messages)')));
      for (const m of (prompts[a] || [])) {
        pd.append(el('div', {class: 'role'}, (m && m.role) || '?'), el('pre', {}, (m && typeof m.content === 'string') ? m.content : JSON.stringify(m)));
      }
      detail.append(pd);
      (comps[a] || []).forEach((c, g) => {
        const av = adv ? adv[g] : null;
        const cls = (typeof av === 'number') ? (av > 0 ? 'pill pos' : av < 0 ? 'pill neg' : 'pill') : 'pill';
        detail.append(el('div', {class: 'role'}, 'completion ' + g, el('span', {class: cls}, 'advantage ' + fmt(av))),
          el('pre', {class: 'completion'}, typeof c === 'string' ? c : JSON.stringify(c)));
      });
    }
    try { history.replaceState(null, '', '#node=' + encodeURIComponent(id)); } catch (e) { /* file:// in some browsers */ }
  }
  document.querySelectorAll('g.node').forEach(g => {
    g.addEventListener('click', () => show(g.dataset.id, false));
    g.addEventListener('keydown', ev => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); show(g.dataset.id, false); } });
  });
  let zoom = 1;
  function applyZoom() {
    document.querySelectorAll('svg.tree-svg').forEach(s => {
      s.setAttribute('width', String(Number(s.dataset.w) * zoom)); s.setAttribute('height', String(Number(s.dataset.h) * zoom)); });
    document.getElementById('zoom-level').textContent = Math.round(zoom * 100) + '%';
  }
  document.getElementById('zoom-in').addEventListener('click', () => { zoom = Math.min(zoom * 1.25, 4); applyZoom(); });
  document.getElementById('zoom-out').addEventListener('click', () => { zoom = Math.max(zoom / 1.25, 0.1); applyZoom(); });
  document.getElementById('zoom-fit').addEventListener('click', () => {
    let z = 4;
    document.querySelectorAll('section.tree .scroll').forEach(box => {
      const s = box.querySelector('svg');
      z = Math.min(z, (box.clientWidth - 4) / Number(s.dataset.w), (window.innerHeight - 170) / Number(s.dataset.h));
    });
    zoom = Math.max(z, 0.1); applyZoom();
  });
  // start zoomed out (not below 60%) when a tree is wider than its box, so every turn is in view
  let fitW = 1;
  document.querySelectorAll('section.tree .scroll').forEach(box => {
    fitW = Math.min(fitW, (box.clientWidth - 4) / Number(box.querySelector('svg').dataset.w)); });
  if (fitW < 1) { zoom = Math.max(fitW, 0.6); applyZoom(); }
  const m = /^#node=(.+)$/.exec(location.hash);
  if (m) show(decodeURIComponent(m[1]), true);
  document.documentElement.setAttribute('data-viz-ready', String(document.querySelectorAll('g.node').length));
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>window.addEventListener('error', function (ev) {{
  document.documentElement.setAttribute('data-js-error', String(ev.message || ev.type)); }});</script>
<style>{css}</style></head>
<body>
<header><h1>{title} <span class="sub">{summary}</span></h1>
<div class="legend">Turns are columns; click a node for its prompts, completions and advantages.
 <span class="k"></span>node <span class="k n"></span>no advantage signal <span class="k p"></span>pruned (early-terminated: its joint actions end there)
 · edge <b>(i,j,…) r · R</b>: the completion each agent contributes to the joint action; immediate reward r, return R
 · r̄/R̄: means over the node's joint actions
 <button id="zoom-out" type="button">−</button><button id="zoom-in" type="button">+</button><button id="zoom-fit" type="button">fit</button>
 <span id="zoom-level">100%</span> {nav}</div></header>
<main><div id="trees">{sections}</div>
<aside id="detail"><p class="empty">Click a node to read each agent's prompt and completions.</p></aside></main>
<script type="application/json" id="viz-data">{data}</script>
<script>{js}</script>
</body></html>
"""
