"""The golden trees (issue 39): with every adaptive switch off, the expander grows exactly the trees it grew
before the switches existed. Each case grows two trees from scripted completions and rewards (hash-derived, so
groups tie, spread and stop at the threshold), backs up the returns, assigns the advantages, and writes one
canonical text of what it drew: every generate call's sizes, every node's completions, joint actions,
rewards, returns, advantages and stop flag. `tests/data/golden_trees.json` holds each case's digest as
written at af9a912, the commit before the first switch; the test re-grows them with today's code.

Only members that both commits have are used, so the same file writes the golden data at the old commit:

    git worktree add /tmp/pre39 af9a912
    # -S: the editable install's finder would import today's comlrl first
    PYTHONPATH=/tmp/pre39:.venv/lib/python3.11/site-packages .venv/bin/python -S tests/test_golden_trees.py \
        > tests/data/golden_trees.json
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pytest

from comlrl.config.checks import tree_joint_actions
from comlrl.learn.advantages import assign_advantages
from comlrl.tree.nodes import backup_returns
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots

GOLDEN = Path(__file__).parent / "data" / "golden_trees.json"
MAX_JOINT_ACTIONS = 3000  # per case: keeps the grid to seconds


def _h(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def cases() -> list[tuple[int, int, int, str, float | None, str, str]]:
    """(agents, G, turns, joint mode, threshold, baseline, scale): every small shape, both joint modes, with and
    without the early stop, under the three estimators and both scalings (trees over MAX_JOINT_ACTIONS left out)."""
    grid = itertools.product((1, 2, 3), (2, 3, 4), (1, 2, 3), ("align", "cross"), (None, 0.6),
                             (("mean", "group"), ("loo", "none"), ("max", "none")))
    return [(n, g, t, mode, thr, base, scale) for n, g, t, mode, thr, (base, scale) in grid
            if tree_joint_actions(mode, g, n, t) <= MAX_JOINT_ACTIONS and not (mode == "cross" and n == 1)]


def case_id(case: tuple) -> str:
    n, g, t, mode, thr, base, scale = case
    return f"N{n}_G{g}_T{t}_{mode}_thr{thr}_{base}_{scale}"


def grow(case: tuple) -> str:
    """The canonical text of one case's two trees and its generate calls."""
    n, g, t, mode, thr, base, scale = case
    calls: list[list[int]] = []

    def generate(requests, count):
        calls.append([len(requests), count])
        return [[f"c{_h(a, msgs[0]['content'], k) % 5}" for k in range(count)] for a, msgs in requests]

    def score(pairs):  # 0, 0.5 or 1 from the node and the joint completions: ties, spreads and solves (1)
        rewards = [(_h(node.id, *(node.completions[a][k] for a, k in enumerate(act))) % 3) / 2 for node, act in pairs]
        return [Scored(v, SimpleNamespace(all_passed=v == 1.0)) for v in rewards]

    def next_messages(pairs):
        return [[[{"role": "user", "content": f"{node.id}.{j}:{node.completions[a][node.joint[j][a]]}"}]
                 for a in range(n)] for node, j in pairs]

    roots = make_roots([[[{"role": "user", "content": f"p{i}"}]] * n for i in range(2)])
    expand_trees(roots, TreeShape(n, g, t, mode, thr), generate, score, next_messages)
    for root in roots:
        backup_returns(root, 0.9)
    assign_advantages(roots, base, scale, 1e-6)

    def r(x):
        return None if x is None else [round(v, 9) for v in x]

    nodes = [{"id": node.id, "completions": node.completions, "joint": [list(j) for j in node.joint],
              "rewards": r(node.rewards), "returns": r(node.returns), "advantages": [r(a) for a in node.advantages],
              "terminated": node.terminated, "children": sorted(node.children)}
             for root in roots for node in root.walk()]
    return json.dumps({"calls": calls, "nodes": nodes}, sort_keys=True)


@cache
def golden() -> dict[str, str]:
    """The digests written at af9a912, read once for every case."""
    return json.loads(GOLDEN.read_text())


def digest(case: tuple) -> str:
    return hashlib.sha256(grow(case).encode()).hexdigest()[:16]


def test_the_grid_covers_every_shape_and_stops() -> None:
    """The cases exercise what the switches touch: ties, early stops, both modes, up to three turns."""
    texts = [json.loads(grow(c)) for c in cases()]
    assert len(texts) >= 150
    advantages = [a for text in texts for node in text["nodes"] for a in node["advantages"]]
    assert any(a is None for a in advantages) and any(a is not None for a in advantages)  # tied and spread groups
    assert any(node["terminated"] for text in texts for node in text["nodes"])
    assert {c[2] for c in cases()} == {1, 2, 3} and {c[3] for c in cases()} == {"align", "cross"}


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_every_switch_off_grows_the_trees_of_before_the_switches(case: tuple) -> None:
    assert digest(case) == golden()[case_id(case)], f"{case_id(case)}: the fixed tree changed"


def test_the_golden_file_holds_exactly_these_cases() -> None:
    assert sorted(golden()) == sorted(case_id(c) for c in cases())


if __name__ == "__main__":
    json.dump({case_id(c): digest(c) for c in cases()}, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
