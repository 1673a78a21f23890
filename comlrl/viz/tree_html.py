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

from comlrl.tree.records import NodeRecord, RecordError, read_records
from comlrl.viz import VizError
from comlrl.viz.tree_page import CSS, JS, PAGE

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


def tree_label(rec: NodeRecord) -> str:
    """A tree's name on the page: its id and, where trees.jsonl records it, the problem it is about (so a
    reader can tell the trees apart without opening their prompts)."""
    return f"{rec.tree} · problem {rec.problem}" if rec.problem is not None else rec.tree


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
        nav.append(f'<a href="#{anchor}">{e(tree_label(root.rec))}</a>')
        sections.append(
            f'<section class="tree" id="{anchor}" data-tree="{e(tid)}"><h2>tree {e(tree_label(root.rec))} '
            f'<span class="sub">{count} nodes ({e(counts)}), {pruned} pruned, '
            f'r̄ {_fmt(_mean(root.rec.rewards))} · R̄ {_fmt(_mean(root.rec.returns))} at the root</span></h2>'
            f'<div class="scroll">{svg}</div></section>'
        )
    data = {r.id: r.to_json() for r in records}
    n_pruned = sum(r.pruned for r in records)
    return PAGE.format(
        title=e(title),
        summary=e(f"{len(roots)} tree{'s' * (len(roots) != 1)}, {total} nodes, {n_pruned} pruned; "
                  f"returns range {_fmt(lo)} … {_fmt(hi)}"),
        nav=" · ".join(nav) if len(nav) > 1 else "",
        sections="".join(sections),
        data=_json_for_script(data),
        css=CSS,
        js=JS,
    )


def render(run_dir: str | Path, step: int, tree: str | None = None) -> str:
    """Load one step of a run and build its page."""
    records = load_step(run_dir, step, tree)
    name = Path(run_dir).resolve().name or str(run_dir)
    return build_html(records, title=f"{name} · step {step}" + (f" · tree {tree}" if tree else ""))
