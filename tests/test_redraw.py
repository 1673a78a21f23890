"""Signal-seeking groups (`rollout.redraw_tied`, comlrl/tree/rollout.py): a last-turn node whose joint actions
tie is drawn again, its first informative draw kept; counted by hand on scripted draws, no model."""

from __future__ import annotations

import pytest

from comlrl.learn.advantages import assign_advantages
from comlrl.run.metrics import DrawSums
from comlrl.tree.nodes import backup_returns, tied
from comlrl.tree.records import NodeRecord, node_records
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


def grow(rewards_by_draw: dict[str, list[list[float]]], *, redraws: int, turns: int = 1, g: int = 2,
         mode: str = "align", agents: int = 2):
    """Trees whose node `id`'s d-th draw (0 = the first) scores `rewards_by_draw[id][d]` (the last list again
    past the end); every completion names its node, draw and index, so a kept draw can be told apart."""
    draws: dict[str, int] = {}
    calls: list[list[str]] = []

    def generate(requests, n):
        return [[f"{req[1][0]['content']}/d{draws.get(req[1][0]['content'], 0)}/a{req[0]}s{k}" for k in range(n)]
                for req in requests]

    def score(pairs):
        out, seen = [], []
        for node, act in pairs:
            if node.id not in seen:
                seen.append(node.id)
            script = rewards_by_draw.get(node.id, [[0.0] * 99])
            row = script[min(draws.get(node.messages[0][0]["content"], 0), len(script) - 1)]
            out.append(Scored(row[node.joint.index(act)]))
        calls.append(seen)
        for node_id in seen:  # the next draw of these nodes is the next row
            key = next(n.messages[0][0]["content"] for n, _ in pairs if n.id == node_id)
            draws[key] = draws.get(key, 0) + 1
        return out

    def next_messages(pairs):
        return [[[{"role": "user", "content": f"{node.id}.{j}"}] for _ in range(agents)] for node, j in pairs]

    roots = make_roots([[[{"role": "user", "content": str(i)}]] * agents for i in range(len(
        [k for k in rewards_by_draw if "." not in k]) or 1)])
    shape = TreeShape(agents, g, turns, mode, None, redraws=redraws)
    expand_trees(roots, shape, generate, score, next_messages)
    return roots, calls


def test_tied_is_no_spread():
    assert tied([1.0, 1.0, 1.0]) and tied([0.5]) and not tied([0.0, 1e-9]) and tied([0.3, 0.3 + 1e-13])


def test_a_tied_node_is_drawn_again_until_its_rewards_differ_and_that_draw_is_kept():
    # node 0 ties, ties, then differs; node 1 differs at once
    roots, calls = grow({"0": [[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]], "1": [[1.0, 0.0]]}, redraws=3)
    a, b = roots
    assert calls == [["0", "1"], ["0"], ["0"]]  # one scoring call per draw; the third draw of 0 differs: stop
    assert (a.redraws, b.redraws) == (2, 0)
    assert a.rewards == [0.0, 1.0] and b.rewards == [1.0, 0.0]
    assert [c for row in a.completions for c in row] == ["0/d2/a0s0", "0/d2/a0s1", "0/d2/a1s0", "0/d2/a1s1"]
    assert b.completions[0] == ["1/d0/a0s0", "1/d0/a0s1"]  # a node with signal keeps its first draw


def test_the_cap_keeps_the_last_draw_of_a_node_that_always_ties():
    roots, calls = grow({"0": [[1.0, 1.0]]}, redraws=2)
    assert calls == [["0"], ["0"], ["0"]] and roots[0].redraws == 2 and roots[0].rewards == [1.0, 1.0]
    assert roots[0].completions[0] == ["0/d2/a0s0", "0/d2/a0s1"]


def test_off_is_the_fixed_tree():
    roots, calls = grow({"0": [[1.0, 1.0]]}, redraws=0)
    assert calls == [["0"]] and roots[0].redraws == 0 and roots[0].completions[0] == ["0/d0/a0s0", "0/d0/a0s1"]


def test_only_the_last_turn_is_drawn_again_and_cross_mode_keeps_its_product():
    # two turns: the root ties (turn 1: its children still add spread to its returns) and is not redrawn;
    # its children (turn 2) tie on their first draw and differ on the second
    script = {"0": [[0.0] * 4], **{f"0.{j}": [[0.0] * 4, [0.0, 1.0, 0.0, 1.0]] for j in range(4)}}
    roots, calls = grow(script, redraws=1, turns=2, mode="cross")
    root = roots[0]
    assert root.redraws == 0 and len(calls) == 3 and sorted(calls[2]) == [f"0.{j}" for j in range(4)]
    for child in root.children.values():
        assert child.redraws == 1 and len(child.joint) == 4 and child.rewards == [0.0, 1.0, 0.0, 1.0]


def test_the_kept_group_is_an_ordinary_group_of_g_for_the_advantages():
    roots, _ = grow({"0": [[0.0, 0.0], [0.0, 1.0]]}, redraws=1)
    backup_returns(roots[0], 1.0)
    stats = assign_advantages(roots, "mean", "group", 1e-6)
    assert (stats.groups, stats.skipped) == (2, 0)  # the tied draw is gone: both agents' groups train
    assert roots[0].advantages[0] == pytest.approx([-1.0, 1.0], abs=1e-5)


def test_draw_sums_count_what_the_sampling_bought():
    # node 0: tied twice then differs (3 draws of 4 completions); node 1: differs at once; node 2: always ties
    roots, _ = grow({"0": [[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]], "1": [[1.0, 0.0]], "2": [[0.5, 0.5]]}, redraws=2)
    for root in roots:
        backup_returns(root, 1.0)
    assign_advantages(roots, "mean", "group", 1e-6)
    sums = DrawSums.of(roots)
    assert (sums.generated, sums.with_signal) == (4 * 3 + 4 + 4 * 3, 4 + 4)
    assert (sums.redraws, sums.redrawn, sums.recovered) == (4, 2, 1)
    assert sums.means() == {"signal_share": pytest.approx(8 / 28), "completions_generated": 28, "redraw/draws": 4,
                            "redraw/nodes": 2, "redraw/recovered": 1}


def test_a_fixed_tree_says_only_its_signal_share_and_preference_steps_say_nothing():
    roots, _ = grow({"0": [[1.0, 1.0]], "1": [[1.0, 0.0]]}, redraws=0)
    for root in roots:
        backup_returns(root, 1.0)
    assert DrawSums.of(roots).means() == {}  # no advantages assigned (madpo, marlhf's heads): no share to tell
    assign_advantages(roots, "mean", "group", 1e-6)
    assert DrawSums.of(roots).means() == {"signal_share": 0.5, "completions_generated": 8}


def test_trees_jsonl_carries_redraws_only_where_a_node_was_drawn_again():
    roots, _ = grow({"0": [[0.0, 0.0], [0.0, 1.0]], "1": [[1.0, 0.0]]}, redraws=1)
    for root in roots:
        backup_returns(root, 1.0)
    first, second = node_records(roots, 1, "s1r0t", 2)
    assert first.to_json()["redraws"] == 1 and "redraws" not in second.to_json()
    assert NodeRecord.from_json(first.to_json()).redraws == 1 and NodeRecord.from_json(second.to_json()).redraws == 0
