"""Scoring the code tasks through the real sandbox."""

from __future__ import annotations

import pytest

from comlrl.tasks import CodeCollabTask, CodeSingleTask
from comlrl.tasks.code.measure import canonical_code
from comlrl.tasks.code.reward import reward_range
from comlrl.tasks.datasets import load_easy, load_humaneval

EASY = {p.entry_point: p for p in load_easy()}
ADD = EASY["add"]
VOWELS = EASY["count_vowels"]


def fenced(code: str) -> str:
    return f"```python\n{code}```"




@pytest.fixture(scope="module")
def sandbox():  # noqa: ANN201 - sandbox.executor.Sandbox
    from sandbox.executor import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box


def test_requests_follow_the_contract() -> None:
    from sandbox.testparse import parse_tests

    he = {p.task_id: p for p in load_humaneval()}
    p0 = he["HumanEval/0"]
    (req,) = CodeCollabTask().requests([(p0, ["def aux(x):\n    return x\n", "    return False"])])
    assert req.entry_point == "has_close_elements" and req.helper_name == "aux"
    assert req.preamble == "from typing import List\n"
    assert req.tests == parse_tests(p0.test, p0.entry_point, prompt=p0.prompt)
    assert req.codes[0] == "def aux(x):\n    return x\n"
    assert req.codes[1].startswith("def has_close_elements(numbers: List[float], threshold: float) -> bool:")
    with pytest.raises(ValueError, match="expected one per agent"):
        CodeCollabTask().requests([(p0, ["only one"])])


def test_reward_range_comes_from_the_code_reward() -> None:
    assert CodeCollabTask().reward_range == tuple(reward_range(2))
    assert CodeSingleTask().reward_range == tuple(reward_range(1))


def test_single_scores_right_above_wrong(sandbox) -> None:  # noqa: ANN001
    task = CodeSingleTask(sandbox)
    right = fenced(canonical_code(ADD))
    wrong = fenced("def add(a, b):\n    return a - b\n")
    prose = "I do not know."
    r_right, r_wrong, r_prose = task.score([(ADD, [right]), (ADD, [wrong]), (ADD, [prose])])
    lo, hi = task.reward_range
    assert r_right.all_passed and r_right.tests_passed == r_right.tests_total == 4
    assert not r_wrong.all_passed
    assert r_right.total > r_wrong.total >= r_prose.total
    assert all(lo <= r.total <= hi for r in (r_right, r_wrong, r_prose))


@pytest.mark.parametrize("reply", ["I do not know.", "", "asdf qwerty", "```python\n```"])
def test_a_reply_without_the_code_asked_for_scores_zero(sandbox, reply) -> None:  # noqa: ANN001
    """Levels are cumulative (the reference library's rule): syntax pays only for the functions the task asks
    for, so prose, gibberish or an empty program earn nothing, alone or in a team."""
    (single,) = CodeSingleTask(sandbox).score([(ADD, [reply])])
    (team,) = CodeCollabTask(sandbox).score([(ADD, [reply, reply])])
    assert single.total == 0.0 and single.components["syntax"] == 0.0
    assert team.total == 0.0 and team.components["syntax"] == 0.0


def test_syntax_pays_when_every_required_function_is_there(sandbox) -> None:  # noqa: ANN001
    main_only = fenced("def add(a, b):\n    return a - b\n")
    (no_helper,) = CodeCollabTask(sandbox).score([(ADD, ["no helper here", main_only])])
    assert no_helper.components["syntax"] == 0.0 and no_helper.components["main_defined"] == 0.25
    (both,) = CodeCollabTask(sandbox).score([(ADD, [fenced("def aux(x):\n    return x\n"), main_only])])
    assert both.components["syntax"] == 0.5


def test_collab_helper_used_scores_and_is_detected(sandbox) -> None:  # noqa: ANN001
    task = CodeCollabTask(sandbox)
    helper = fenced("def aux(s):\n    return [c for c in s.lower() if c in 'aeiou']\n")
    main = fenced("def count_vowels(s):\n    return len(aux(s))\n")
    main_alone = fenced("def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n")
    used, unused, broken = task.score(
        [(VOWELS, [helper, main]), (VOWELS, [helper, main_alone]), (VOWELS, ["no code", main])]
    )
    assert used.all_passed and used.helper_called
    assert unused.all_passed and not unused.helper_called
    assert not broken.all_passed  # main calls a helper that was never written
    lo, hi = task.reward_range
    assert all(lo <= r.total <= hi for r in (used, unused, broken))
    assert used.total >= unused.total > broken.total


def test_score_keeps_item_order_and_runs_a_batch(sandbox) -> None:  # noqa: ANN001
    task = CodeSingleTask(sandbox)
    items = [(p, [fenced(canonical_code(p))]) for p in list(EASY.values())[:6]]
    items.insert(3, (ADD, ["def add(a, b):\n    return 0\n"]))
    rewards = task.score(items)
    assert [r.all_passed for r in rewards] == [True, True, True, False, True, True, True]


def test_humaneval_canonical_solutions_score_full(sandbox) -> None:  # noqa: ANN001
    he = load_humaneval()[:8]
    task = CodeSingleTask(sandbox)
    rewards = task.score([(p, [fenced(canonical_code(p))]) for p in he])
    assert all(r.all_passed for r in rewards), [(p.task_id, r.notes) for p, r in zip(he, rewards, strict=True)
                                                if not r.all_passed]
