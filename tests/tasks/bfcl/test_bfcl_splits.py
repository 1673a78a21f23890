"""Held-out and training entries share no answer (comlrl/tasks/bfcl/data.py: `answer_groups`): entries with the
same question, or the same gold after canonical formatting, land on the same side, in every category the
tasks load and in the multi-turn curriculum that had 10 of its 20 held-out first turns repeat a training answer."""

from __future__ import annotations

import pytest

from comlrl.tasks.bfcl import BfclMultiTurnConfig, BfclMultiTurnTask, BfclTask, BfclTaskConfig
from comlrl.tasks.bfcl.data import (
    MULTI_TURN_CATEGORIES,
    SINGLE_TURN_CATEGORIES,
    answer_groups,
    gold_key,
    load_category,
    question_key,
)
from comlrl.tasks.datasets import DatasetConfig, split_problems


def _shared(train, held) -> list[str]:
    questions = {question_key(p) for p in train}
    golds = {gold_key(p) for p in train} - {""}
    return [p.task_id for p in held if question_key(p) in questions or gold_key(p) in golds]


@pytest.mark.parametrize("category", SINGLE_TURN_CATEGORIES)
def test_no_held_out_entry_shares_a_question_or_gold_with_training(category: str) -> None:
    task = BfclTask(BfclTaskConfig(categories=[category], examples=0))
    size = min(48, len(load_category(category)) // 2)
    train, held = task.load(DatasetConfig(eval_size=size, seed=0))
    assert len(held) == size and _shared(train, held) == []


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_no_multi_turn_held_out_entry_shares_one(category: str) -> None:
    task = BfclMultiTurnTask(BfclMultiTurnConfig(categories=[category], max_user_turns=8, examples=False))
    try:
        train, held = task.load(DatasetConfig(eval_size=20, seed=0))
        assert len(held) == 20 and _shared(train, held) == []
    finally:
        task.close()


def test_the_first_turn_curriculum_no_longer_repeats_training_answers() -> None:
    """configs/bfcl_multi_turn_T1_G8.yaml's entries: the ungrouped split held out 10 first turns whose one call
    a training entry also had (`get_watchlist()`, `ls(a=True)`), and base_43 asks base_40's question."""
    cfg = BfclMultiTurnConfig(max_user_turns=1, cut_longer=True, max_turn_calls=1, max_call_args=1)
    task = BfclMultiTurnTask(cfg)
    try:
        problems = [task.cut(p) for p in load_category("multi_turn_base") if task.keeps(p)]
        old_train, old_held = split_problems(problems, 20, 0)
        assert len(_shared(old_train, old_held)) == 10
        by_id = {p.task_id: p for p in problems}
        assert question_key(by_id["multi_turn_base_43"]) == question_key(by_id["multi_turn_base_40"])
        train, held = task.load(DatasetConfig(eval_size=20, seed=0))
        assert len(held) == 20 and _shared(train, held) == []
    finally:
        task.close()


def test_simple_python_97_goes_with_the_entry_whose_gold_it_repeats() -> None:
    problems = load_category("simple_python")
    by_id = {p.task_id: p for p in problems}
    assert gold_key(by_id["simple_python_97"]) == gold_key(by_id["simple_python_1"])
    labels = dict(zip([p.task_id for p in problems], answer_groups(problems), strict=True))
    assert labels["simple_python_97"] == labels["simple_python_1"]


def test_a_split_by_groups_keeps_each_group_whole_and_the_size_exact() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class P:
        task_id: str

    problems = [P(f"t{i}") for i in range(12)]
    groups = ["a", "a", "a", "b", "b", "c", "d", "e", "f", "g", "h", "i"]
    for seed in range(20):
        for size in range(0, 10):
            train, held = split_problems(problems, size, seed, groups)
            assert len(held) == size and len(train) == 12 - size
            sides = {}
            for p in held:
                sides.setdefault(groups[int(p.task_id[1:])], set()).add("held")
            for p in train:
                sides.setdefault(groups[int(p.task_id[1:])], set()).add("train")
            assert all(len(s) == 1 for s in sides.values())
    # without groups: the split every earlier run used, unchanged
    assert split_problems(problems, 4, 3) == split_problems(problems, 4, 3, [str(i) for i in range(12)])
