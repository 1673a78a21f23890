"""Per-turn outcome rates (helper calls) from a task's declared `outcome_counts`: sums, means, ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from comlrl.run.metrics import StepSums, TurnSums, turn_means, turn_sums
from comlrl.run.run_parts import evaluation_plan, evaluation_summary, progress_numbers
from comlrl.run.trainer import tied_warning
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.code.collab import CodeCollabTask
from comlrl.tree.nodes import Node


@dataclass
class FakeReward:
    helper_called: bool
    helper_result_used: bool
    all_passed: bool


class CountingTask(TaskDefaults):
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
    child = Node(id="0.0", turn=2, root=0, messages=[[], []], parent=root, parent_action=0,
                 rewards=[0.5] * len(turn2), details=turn2)
    root.children[0] = child
    return root


def R(called: bool, used: bool = False, passed: bool = False) -> FakeReward:  # noqa: N802
    return FakeReward(called, used, passed)


def _sums(roots: list[Node], turns: int = 2) -> list[TurnSums]:
    task = CountingTask()
    return turn_sums(roots, turns, task.count_names, task.counts)


def test_rates_per_turn_and_overall() -> None:
    root = _tree([R(True), R(False), R(False), R(False)], [R(True), R(True)])
    sums = _sums([root])
    assert sums[0].counts == {"called": 1.0} and sums[1].counts == {"called": 2.0}
    means = turn_means(sums)
    assert means["turn_1/called"] == pytest.approx(0.25)
    assert means["turn_2/called"] == pytest.approx(1.0)
    assert means["called"] == pytest.approx(3 / 6)  # over all joint actions of both turns
    assert means["reward_mean"] == pytest.approx((4 * 1.0 + 2 * 0.5) / 6)


def test_keys_exist_for_turns_without_nodes_so_ranks_can_sum_them() -> None:
    """A rank whose trees all stopped after turn 1 must still send turn_2 sums (zeros) to the reduction."""
    root = _tree([R(True)], [])
    root.children.clear()
    sums = _sums([root])
    assert sums[1].counts == {"called": 0.0} and sums[1].joint_actions == 0.0
    assert len(StepSums(_sums([])).flat()) == len(StepSums(sums).flat())
    means = turn_means(sums)
    assert means["turn_2/called"] != means["turn_2/called"]  # nan: no joint action in turn 2


def test_sums_add_and_reduce_position_by_position() -> None:
    one = StepSums(_sums([_tree([R(True), R(False)], [R(True)])]), trees=1.0, loss=0.5)
    two = StepSums(_sums([_tree([R(False), R(False)], [])]), trees=1.0, loss=1.5)
    both = one + two
    assert both.trees == 2.0 and both.loss == 2.0 and both.turns[0].counts == {"called": 1.0}
    assert both.turns[0].joint_actions == 4.0 and both.turns[1].nodes == 2.0
    world = one.reduced(lambda values: [v + w for v, w in zip(values, two.flat(), strict=True)])
    assert world == both  # what a sum over two ranks gives
    means = both.means(world=2)
    assert means["loss"] == 1.0 and means["nodes"] == 4 and means["turn_1/pruned_frac"] == 0.0


def test_without_a_task_only_the_basic_sums() -> None:
    assert turn_sums([], 1) == [TurnSums()]


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
    headline = CodeCollabTask.headline_outcome
    assert progress_numbers(metrics, 2, headline) == {
        "reward": "2.50", "pass": "0.38", "helper": "0.12", "tok_s": "231",
        "s_step": "62"}  # the step's own seconds: evaluations left out
    assert "helper" not in progress_numbers(metrics, 2)  # a task without a headline outcome
    assert progress_numbers({**metrics, "eval/pass_at_1": 0.5}, 2)["eval"] == "0.500"
    assert progress_numbers({**metrics, "reward_vs_start": 0.25}, 2)["vs_start"] == "+0.25"
    # every node stopped after turn 1 (early termination): the deepest turn reached, never nan
    early = {**{k: v for k, v in metrics.items() if k != "turn_2/pass_rate"}, "turn_1/pass_rate": 0.75}
    assert progress_numbers(early, 2)["pass"] == "0.75"
    assert "pass" not in progress_numbers({"reward_mean": 0.0, "tokens_per_s": 1.0, "step_seconds": 1.0}, 2)


def test_evaluation_lines_count_one_problem_and_one_chain_in_the_singular() -> None:
    """Issue 24, item 10 ('1 steps'): a one-step tiny run printed '1 training-probe problems' and 'of 1 problems'."""
    plan = evaluation_plan({"heldout": [0, 1], "probe": [0]}, True, 2)
    assert plan == ("2 held-out problems (1 greedy + 2 sampled chains each); "
                    "1 training-probe problem (1 greedy + 2 sampled chains each)")
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


def test_the_all_tied_line_counts_one_group_in_the_singular() -> None:
    assert tied_warning(3, 1).startswith("step 3 trained on nothing: its one advantage group tied (")
    assert tied_warning(1, 10).startswith("step 1 trained on nothing: all 10 advantage groups tied (")


def test_a_count_reported_on_some_joint_actions_is_a_rate_over_those():
    """A game reports win/loss only on the round that ended it: its rate is per game, not per round."""
    first = TurnSums(reward=0.0, joint_actions=4.0, counts={"win": 1.0}, reported={"win": 1.0})
    second = TurnSums(reward=0.0, joint_actions=2.0, counts={"win": 1.0}, reported={"win": 2.0})
    means = turn_means([first, second])
    assert means["turn_1/win"] == 1.0 and means["turn_2/win"] == 0.5 and means["win"] == pytest.approx(2 / 3)
    never = TurnSums(joint_actions=3.0, counts={"win": 0.0}, reported={"win": 0.0})
    assert turn_means([never])["turn_1/win"] != turn_means([never])["turn_1/win"]  # NaN: no game ended there


def test_the_progress_bar_passes_over_turns_no_game_reached():
    metrics = {"reward_mean": 0.5, "turn_1/pass_rate": 0.25, "turn_2/pass_rate": float("nan"), "tokens_per_s": 10.0,
               "step_seconds": 3.0}
    assert progress_numbers(metrics, 2)["pass"] == "0.25"


def test_readable_episodes_take_each_category_in_turn():
    from comlrl.run.evaluation import interleaved

    items = [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("b", "b2")]
    assert interleaved(items) == ["a1", "b1", "a2", "b2", "a3"] and interleaved([]) == []
