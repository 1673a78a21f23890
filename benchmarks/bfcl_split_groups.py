"""What the answer-group split changes on BFCL: per category, how many entries share a question or a gold
with another entry, and, for a config's split, how many held-out entries the ungrouped split had sharing
one with a training entry (the entries the groups moved) and how many the grouped split has (0).

    python benchmarks/bfcl_split_groups.py                     # every category, eval_size 48, seed 0
    python benchmarks/bfcl_split_groups.py --config configs/bfcl_multi_turn_T1_G8.yaml
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import _common  # noqa: F401 - puts the checkout on sys.path

from comlrl.tasks.bfcl.data import (
    MULTI_TURN_CATEGORIES,
    SINGLE_TURN_CATEGORIES,
    BfclProblem,
    answer_groups,
    gold_key,
    load_category,
    question_key,
)
from comlrl.tasks.datasets import split_problems


def shared(held: list[BfclProblem], train: list[BfclProblem]) -> dict[str, int]:
    """Held-out entries whose question, or whose gold, a training entry has too."""
    questions = {question_key(p) for p in train}
    golds = {gold_key(p) for p in train} - {""}
    return {"question": sum(question_key(p) in questions for p in held),
            "gold": sum(gold_key(p) in golds for p in held),
            "either": sum(question_key(p) in questions or gold_key(p) in golds for p in held)}


def report(category: str, problems: list[BfclProblem], eval_size: int, seed: int) -> dict:
    questions = Counter(question_key(p) for p in problems)
    golds = Counter(gold_key(p) for p in problems if gold_key(p))
    groups = Counter(answer_groups(problems))
    old_train, old_held = split_problems(problems, eval_size, seed)
    new_train, new_held = split_problems(problems, eval_size, seed, answer_groups(problems))
    moved = len({p.task_id for p in old_held} - {p.task_id for p in new_held})
    return {"category": category, "entries": len(problems),
            "in_a_question_twin": sum(n for n in questions.values() if n > 1),
            "in_a_gold_twin": sum(n for n in golds.values() if n > 1),
            "groups": len(groups), "largest_group": max(groups.values()),
            "eval_size": eval_size, "ungrouped_held_out_sharing": shared(old_held, old_train),
            "grouped_held_out_sharing": shared(new_held, new_train), "held_out_entries_moved": moved}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="a bfcl or bfcl_multi_turn config: its task's entries and split")
    ap.add_argument("--eval-size", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = []
    if args.config:
        from comlrl.config.schema import load_config
        from comlrl.tasks.bfcl import BfclMultiTurnTask, BfclTask

        cfg = load_config(args.config)
        options = cfg.task.options()
        task: BfclTask | BfclMultiTurnTask = (
            BfclMultiTurnTask(BfclMultiTurnTask.resolve_options(options, cfg.magrpo.num_turns))
            if cfg.task.name == "bfcl_multi_turn" else BfclTask(options))
        categories = list(dict.fromkeys(task.cfg.categories))
        for i, category in enumerate(categories):
            size = cfg.dataset.eval_size * (i + 1) // len(categories) - cfg.dataset.eval_size * i // len(categories)
            problems = load_category(category)
            if isinstance(task, BfclMultiTurnTask):  # its curriculum's entries, cut as it trains on them
                problems = [task.cut(p) for p in problems if task.keeps(p)]
            rows.append(report(category, problems, size, cfg.dataset.seed))
    else:
        for category in SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES:
            problems = load_category(category)
            rows.append(report(category, problems, min(args.eval_size, len(problems) // 2), args.seed))
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
