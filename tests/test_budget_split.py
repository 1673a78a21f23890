"""The proportional split of a sample budget (`comlrl.tree.budget.allocate`, the preference rounds' replay quota)
by hand, and the fixed tree's one draw of G per node. (The budgeted tree, `rollout.budget: split`, was measured
and removed: docs/results.md#what-did-not-work.)"""

from __future__ import annotations

import pytest

from comlrl.tree.budget import allocate
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots


@pytest.mark.parametrize(("caps", "weights", "size", "newer_first", "expected"), [
    ({0: 8, 1: 8, 2: 8}, {0: 0.5, 1: 0.25, 2: 0.0}, 12, False, {0: 8, 1: 4}),  # 12 x 2/3, 12 x 1/3; weight 0: none
    # 6 x 3/5 = 3.6 > cap 3: key 0 is filled, its 0.6 goes to keys 1 and 2 (1.5 each), the odd unit to the tie's
    # smaller key, or with newer_first to the larger
    ({0: 3, 1: 3, 2: 3}, {0: 3.0, 1: 1.0, 2: 1.0}, 6, False, {0: 3, 1: 2, 2: 1}),
    ({0: 3, 1: 3, 2: 3}, {0: 3.0, 1: 1.0, 2: 1.0}, 6, True, {0: 3, 1: 1, 2: 2}),
    ({0: 2, 1: 1}, {0: 1.0, 1: 1.0}, 10, False, {0: 2, 1: 1}),  # more asked than the caps hold: every cap
    ({0: 4, 1: 4}, {0: 1.0, 1: 1.0}, 0, False, {}),
    ({0: 4, 1: 0}, {0: 1.0, 1: 5.0}, 3, False, {0: 3}),  # a cap of 0 takes nothing, whatever its weight
])
def test_allocate_splits_in_proportion_capped_in_whole_units(caps, weights, size, newer_first, expected) -> None:
    assert allocate(caps, weights, size, newer_first) == expected


def test_a_fixed_tree_is_drawn_once_with_g_everywhere() -> None:
    roots = make_roots([[[{"role": "user", "content": "p"}]]])
    calls = []

    def generate(requests, n):
        calls.append(n)
        return [["x"] * n for _ in requests]

    expand_trees(roots, TreeShape(1, 4, 1, "align", None), generate, lambda pairs: [Scored(1.0) for _ in pairs],
                 lambda pairs: [])
    assert calls == [4] and len(roots[0].completions[0]) == 4
