"""Per-turn outcome rates (helper calls) from a task's declared `outcome_counts`: sums, means, ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from comlrl.tasks.base import Task
from comlrl.tasks.code.collab import CodeCollabTask
from comlrl.trainer import evaluation_plan, evaluation_summary, progress_numbers
from comlrl.tree import Node
from comlrl.turn_metrics import turn_means, turn_sums


@dataclass
class FakeReward:
    helper_called: bool
    helper_result_used: bool
    all_passed: bool


class CountingTask(Task):
    num_agents = 2
    role_names = ["helper", "main"]
    reward_range = (0.0, 1.0)
    outcome_names = ("called",)

    def load(self, dataset_cfg):  # pragma: no cover - not used
        raise NotImplementedError

    def initial_messages(self, problem):  # pragma: no cover
        raise NotImplementedError

    def role_instructions(self, agent):  # pragma: no cover
        raise NotImplementedError

    def score(self, items):  # pragma: no cover
        raise NotImplementedError

    def outcome_counts(self, reward):
        return {"called": float(reward.helper_called)}


def _tree(turn1: list[FakeReward], turn2: list[FakeReward]) -> Node:
    root = Node(id="0", turn=1, root=0, messages=[[], []], rewards=[1.0] * len(turn1), details=turn1)
    child = Node(id="0.0", turn=2, root=0, messages=[[], []], parent="0", parent_action=0,
                 rewards=[0.5] * len(turn2), details=turn2)
    root.children[0] = child
    return root


def R(called: bool, used: bool = False, passed: bool = False) -> FakeReward:  # noqa: N802
    return FakeReward(called, used, passed)


def test_rates_per_turn_and_overall() -> None:
    root = _tree([R(True), R(False), R(False), R(False)], [R(True), R(True)])
    sums = turn_sums([root], 2, CountingTask())
    assert sums["turn_1/called"] == 1.0 and sums["turn_2/called"] == 2.0
    means = turn_means(sums, 2)
    assert means["turn_1/called"] == pytest.approx(0.25)
    assert means["turn_2/called"] == pytest.approx(1.0)
    assert means["called"] == pytest.approx(3 / 6)  # over all joint actions of both turns
    assert means["reward_mean"] == pytest.approx((4 * 1.0 + 2 * 0.5) / 6)


def test_keys_exist_for_turns_without_nodes_so_ranks_can_sum_them() -> None:
    """A rank whose trees all stopped after turn 1 must still send turn_2 keys (zeros) to the reduction."""
    root = _tree([R(True)], [])
    root.children.clear()
    sums = turn_sums([root], 2, CountingTask())
    assert sums["turn_2/called"] == 0.0 and sums["turn_2/count"] == 0.0
    assert set(turn_sums([], 2, CountingTask())) == set(sums)
    means = turn_means(sums, 2)
    assert means["turn_2/called"] != means["turn_2/called"]  # nan: no joint action in turn 2


def test_without_a_task_only_the_basic_sums() -> None:
    assert set(turn_sums([], 1)) == {"turn_1/reward_sum", "turn_1/count", "turn_1/passed"}


def test_code_collab_counts_calls_uses_and_passes_with_the_helper() -> None:
    task = CodeCollabTask()
    assert set(task.outcome_names) == {"helper_called", "helper_used", "passed_with_helper"}
    assert task.outcome_counts(R(True, True, True)) == {"helper_called": 1.0, "helper_used": 1.0,
                                                         "passed_with_helper": 1.0}
    assert task.outcome_counts(R(True, False, True)) == {"helper_called": 1.0, "helper_used": 0.0,
                                                          "passed_with_helper": 0.0}
    assert task.outcome_counts(R(False, False, False))["helper_called"] == 0.0


def test_progress_bar_shows_the_step_just_finished() -> None:
    metrics = {"reward_mean": 2.5, "turn_2/pass_rate": 0.375, "helper_called": 0.125, "tokens_per_s": 231.4,
               "step_seconds": 61.7}
    assert progress_numbers(metrics, 2) == {"reward": "2.50", "pass": "0.38", "helper": "0.12", "tok_s": "231",
                                            "s_step": "62"}  # the step's own seconds: evaluations left out
    assert progress_numbers({**metrics, "eval/pass_at_1": 0.5}, 2)["eval"] == "0.500"
    assert progress_numbers({**metrics, "reward_vs_start": 0.25}, 2)["vs_start"] == "+0.25"


def test_evaluation_lines_count_one_problem_and_one_chain_in_the_singular() -> None:
    """Issue 24, item 10 ('1 steps'): a one-step tiny run printed '1 training-probe problems' and 'of 1 problems'."""
    plan = evaluation_plan({"heldout": [0, 1], "probe": [0]}, True, 2)
    assert plan == "2 held-out problems (1 greedy + 2 sampled chains each); 1 training-probe problem (1 greedy + 2 sampled chains each)"
    assert evaluation_plan({"heldout": [0, 1], "probe": [0]}, True, 0) == \
        "2 held-out problems (1 greedy chain each); 1 training-probe problem (1 greedy chain each)"
    assert evaluation_plan({"heldout": [0], "probe": []}, False, 1) == "1 held-out problem (1 sampled chain each)"
    assert evaluation_plan({"heldout": [0], "probe": [0, 1, 2]}, False, 4) == \
        "1 held-out problem (4 sampled chains each); 3 training-probe problems (4 sampled chains each)"
    summary = evaluation_summary({"eval/problems": 1, "eval/pass_at_1": 0.0, "eval/probe/problems": 1,
                                  "eval/probe/sampled/reward_mean": 0.5})
    assert summary == "held-out pass@1 greedy 0.000 of 1 problem; training probe sampled reward 0.500 of 1 problem"
    assert evaluation_summary({"eval/problems": 32, "eval/pass_at_1": 0.25, "eval/sampled/pass_at_1": 0.5}) == \
        "held-out pass@1 greedy 0.250, sampled 0.500 of 32 problems"
