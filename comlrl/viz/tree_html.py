"""Render one training step's turn trees from `trees.jsonl` as one self-contained HTML page.

Turns are columns, nodes are boxes, joint actions that continue are edges to their child node labelled
with the completion indices, immediate reward r and return R; joint actions that end the branch (last
turn or an early-terminated node) are bundled into one stub per node. Clicking a node shows each agent's
prompt, its completions and their advantages, and the node's joint-action table.

Everything is inline (CSS, JS, SVG) and nothing is fetched. Model text is untrusted: it only reaches the
page inside a JSON block with `<`, `>` and `&` escaped, and the script inserts it with `textContent`;
the SVG labels are built from numbers and ids and escaped as well.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.tree_records import NodeRecord, RecordError, read_records
from comlrl.viz import VizError

BOX_W = 196
BOX_H = 44
ROW_H = 58
GAP_X = 290  # between columns: bundle stubs on the left, edge labels on the right
PAD = 24
HEAD_H = 26  # column headings


def _finite(value: Any) -> Any:
    """Replace non-finite floats (anywhere in a record) with None so the JSON stays valid."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _ranges(steps: Iterable[int]) -> str:
    """`1, 2, 3, 5` -> `1-3, 5`."""
    out: list[str] = []
    ordered = sorted(set(steps))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(out)


def load_step(run_dir: str | Path, step: int, tree: str | None = None) -> list[NodeRecord]:
    """The node records of one step (optionally one tree) of a run, in file order; VizError if absent or
    a line is not a node record."""
    run = Path(run_dir)
    if not run.is_dir():
        raise VizError(f"run directory not found: {run}")
    path = run / "trees.jsonl"
    if not path.is_file():
        raise VizError(f"no trees.jsonl in {run} (the trainer writes it after the first training step)")
    records: list[NodeRecord] = []
    steps: set[int] = set()
    try:
        for rec in read_records(path):
            steps.add(rec.step)
            if rec.step == step:
                records.append(rec)
    except RecordError as exc:
        raise VizError(str(exc)) from None
    if not records:
        avail = _ranges(steps) if steps else "none (the file is empty)"
        raise VizError(f"step {step} is not in {path}; available steps: {avail}")
    if tree is not None:
        trees = list(dict.fromkeys(r.tree for r in records))
        records = [r for r in records if r.tree == tree]
        if not records:
            raise VizError(f"tree {tree!r} is not in step {step} of {path}; trees of that step: {', '.join(trees)}")
    return records


@dataclass
class _Placed:
    rec: NodeRecord
    depth: int
    kids: list[tuple[int, _Placed]] = field(default_factory=list)  # (joint-action index, child)
    x: float = 0.0
    y: float = 0.0


def _mean(values: Any) -> float | None:
    vals = [v for v in (values or []) if isinstance(v, int | float) and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def _fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, int | float) and math.isfinite(value):
        return f"{value:.{digits}f}"
    return "–"


def _action_label(joint: list[list[int]], j: int | None) -> str:
    if j is not None and 0 <= j < len(joint):
        return "(" + ",".join(str(g) for g in joint[j]) + ")"
    return f"#{j}"


def _trees(records: list[NodeRecord]) -> list[_Placed]:
    """Link records into trees; a record whose parent is absent starts a tree of its own."""
    by_id = {r.id: r for r in records}
    placed: dict[str, _Placed] = {}
    roots: list[_Placed] = []

    def build(rec: NodeRecord, depth: int, seen: set[str]) -> _Placed:
        node = _Placed(rec, depth)
        placed[rec.id] = node
        for j, cid in sorted(rec.children.items()):
            if cid in by_id and cid not in seen and cid not in placed:
                node.kids.append((j, build(by_id[cid], depth + 1, seen | {cid})))
        return node

    for rec in records:
        if rec.id in placed:
            continue
        if rec.parent is None or rec.parent not in by_id:
            roots.append(build(rec, 0, {rec.id}))
    for rec in records:  # anything unreachable (a cycle or a broken link) still gets shown
        if rec.id not in placed:
            roots.append(build(rec, 0, {rec.id}))
    return roots


def _layout(root: _Placed) -> tuple[list[_Placed], float, float]:
    """Tidy left-to-right layout: leaves take consecutive rows, a parent is centred on its children."""
    nodes: list[_Placed] = []
    row = 0

    def place(n: _Placed) -> None:
        nonlocal row
        nodes.append(n)
        n.x = PAD + n.depth * (BOX_W + GAP_X)
        if n.kids:
            for _, kid in n.kids:
                place(kid)
            n.y = (n.kids[0][1].y + n.kids[-1][1].y) / 2
        else:
            n.y = PAD + HEAD_H + row * ROW_H
            row += 1

    place(root)
    depth = max(n.depth for n in nodes)
    width = PAD * 2 + (depth + 1) * BOX_W + depth * GAP_X + 190  # room for the last column's leaf stubs
    height = PAD * 2 + HEAD_H + max(row, 1) * ROW_H - (ROW_H - BOX_H)
    return nodes, width, height


def _colour(value: float | None, lo: float, hi: float) -> str:
    """Red (low) to green (high) across the step's range; grey when unknown."""
    if value is None:
        return "#9aa0a6"
    t = 0.5 if hi <= lo else (value - lo) / (hi - lo)
    t = min(max(t, 0.0), 1.0)
    r, g, b = int(200 - 150 * t), int(60 + 110 * t), int(60 + 20 * t)
    return f"#{r:02x}{g:02x}{b:02x}"


def _svg(root: _Placed, lo: float, hi: float) -> tuple[str, int]:
    nodes, width, height = _layout(root)
    e = html.escape
    out = [f'<svg class="tree-svg" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" data-w="{width:.0f}" data-h="{height:.0f}">']
    for d in range(max(n.depth for n in nodes) + 1):
        turns = sorted({n.rec.turn for n in nodes if n.depth == d})
        label = "turn " + "/".join(e(str(t)) for t in turns)
        out.append(f'<text class="col-head" x="{PAD + d * (BOX_W + GAP_X):.0f}" y="{PAD + 4}">{label}</text>')
    edges: list[str] = []
    boxes: list[str] = []
    by_id = {n.rec.id: n for n in nodes}
    for n in nodes:
        rec = n.rec
        rewards, returns, joint = rec.rewards, rec.returns, rec.joint_actions
        cy = n.y + BOX_H / 2
        for j, kid in n.kids:
            ky = kid.y + BOX_H / 2
            x1, x2 = n.x + BOX_W, kid.x
            bend = x2 - 150  # the curve ends here; the label sits on the straight run into the child
            mid = (x1 + bend) / 2
            ret = returns[j] if 0 <= j < len(returns) else None
            rew = rewards[j] if 0 <= j < len(rewards) else None
            col = _colour(ret if isinstance(ret, int | float) else None, lo, hi)
            label = f"{_action_label(joint, j)}  r {_fmt(rew)} · R {_fmt(ret)}"
            edges.append(
                f'<g class="edge" data-parent="{e(rec.id)}" data-child="{e(kid.rec.id)}" '
                f'data-action="{j}"><path d="M{x1:.1f},{cy:.1f} C{mid:.1f},{cy:.1f} {mid:.1f},{ky:.1f} '
                f'{bend:.1f},{ky:.1f} L{x2:.1f},{ky:.1f}" stroke="{col}"/>'
                f'<text x="{x2 - 8:.1f}" y="{ky - 5:.1f}" text-anchor="end">{e(label)}</text></g>'
            )
        leaf = [j for j in range(len(rewards)) if j not in {k for k, _ in n.kids}]
        if leaf:
            lr = _mean([rewards[j] for j in leaf])
            lR = _mean([returns[j] for j in leaf if j < len(returns)])
            sx = n.x + BOX_W
            edges.append(
                f'<g class="leaf-stub" data-parent="{e(rec.id)}"><path d="M{sx:.1f},{cy:.1f} '
                f'L{sx + 22:.1f},{cy:.1f}" stroke="{_colour(lR, lo, hi)}"/>'
                f'<text x="{sx + 27:.1f}" y="{cy - 3:.1f}">{len(leaf)} leaf action{"s" * (len(leaf) != 1)}</text>'
                f'<text x="{sx + 27:.1f}" y="{cy + 10:.1f}">r̄ {_fmt(lr)} · R̄ {_fmt(lR)}</text></g>'
            )
        pruned = rec.pruned
        signal = any(a is not None for a in rec.advantages)
        cls = "node" + (" pruned" if pruned else "") + ("" if signal else " nosignal")
        nid, tree_id = rec.id, rec.tree
        head = "…" + nid[len(tree_id):] if n.depth and tree_id and nid.startswith(tree_id) else nid
        parent = by_id.get(rec.parent) if rec.parent is not None else None
        if parent is not None and rec.parent_action is not None:
            head += f"  via {_action_label(parent.rec.joint_actions, rec.parent_action)}"
        stats = f"r̄ {_fmt(_mean(rewards))} · R̄ {_fmt(_mean(returns))} · {len(rewards)} act"
        badge = (f'<text class="badge" x="{n.x + BOX_W - 6:.1f}" y="{n.y + 14:.1f}" text-anchor="end">✂ PRUNED</text>'
                 if pruned else "")
        boxes.append(
            f'<g class="{cls}" data-id="{e(nid)}" tabindex="0" role="button" aria-label="node {e(nid)}">'
            f'<title>{e(nid)}{" (pruned: stopped early)" if pruned else ""}</title>'
            f'<rect x="{n.x:.1f}" y="{n.y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
            f'<text x="{n.x + 8:.1f}" y="{n.y + 17:.1f}" class="nid">{e(head)}</text>'
            f'<text x="{n.x + 8:.1f}" y="{n.y + 35:.1f}">{e(stats)}</text>{badge}</g>'
        )
    out += edges + boxes + ["</svg>"]
    return "".join(out), len(nodes)


def _json_for_script(data: Any) -> str:
    """JSON that is safe inside <script type="application/json">: no `<`, `>` or `&` survive."""
    text = json.dumps(_finite(data), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def build_html(records: list[NodeRecord], title: str = "comlrl tree") -> str:
    """The whole page for these node records (one step; any number of trees)."""
    if not records:
        raise VizError("no nodes to draw")
    e = html.escape
    roots = _trees(records)
    vals = [v for r in records for v in r.returns + r.rewards if math.isfinite(v)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    sections: list[str] = []
    nav: list[str] = []
    total = 0
    for i, root in enumerate(roots):
        svg, count = _svg(root, lo, hi)
        total += count
        tid = root.rec.tree
        per_turn: dict[Any, int] = {}
        pruned = 0
        stack = [root]
        while stack:
            n = stack.pop()
            per_turn[n.rec.turn] = per_turn.get(n.rec.turn, 0) + 1
            pruned += n.rec.pruned
            stack.extend(k for _, k in n.kids)
        counts = ", ".join(f"turn {t}: {c}" for t, c in sorted(per_turn.items()))
        anchor = f"tree-{i}"
        nav.append(f'<a href="#{anchor}">{e(tid)}</a>')
        sections.append(
            f'<section class="tree" id="{anchor}" data-tree="{e(tid)}"><h2>tree {e(tid)} '
            f'<span class="sub">{count} nodes ({e(counts)}), {pruned} pruned, '
            f'r̄ {_fmt(_mean(root.rec.rewards))} · R̄ {_fmt(_mean(root.rec.returns))} at the root</span></h2>'
            f'<div class="scroll">{svg}</div></section>'
        )
    data = {r.id: r.to_json() for r in records}
    n_pruned = sum(r.pruned for r in records)
    return _PAGE.format(
        title=e(title),
        summary=e(f"{len(roots)} tree{'s' * (len(roots) != 1)}, {total} nodes, {n_pruned} pruned; "
                  f"returns range {_fmt(lo)} … {_fmt(hi)}"),
        nav=" · ".join(nav) if len(nav) > 1 else "",
        sections="".join(sections),
        data=_json_for_script(data),
        css=_CSS,
        js=_JS,
    )


def render(run_dir: str | Path, step: int, tree: str | None = None) -> str:
    """Load one step of a run and build its page."""
    records = load_step(run_dir, step, tree)
    name = Path(run_dir).resolve().name or str(run_dir)
    return build_html(records, title=f"{name} · step {step}" + (f" · tree {tree}" if tree else ""))


_CSS = """
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

_JS = r"""
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

_PAGE = """<!DOCTYPE html>
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
