"""`training.time_budget_minutes` (comlrl/run/callbacks.py: TimeBudget) by hand: which step is the last, what
a resume carries, and the run outputs it reads the earlier steps' time from (comlrl/run/outputs.py). The wiring
through a real run and its resume: tests/test_trainer_api.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from comlrl.run.callbacks import TimeBudget, TrainerControl, TrainerState
from comlrl.run.outputs import read_run_lines


def last_step(budget: TimeBudget, step_seconds: list[float]) -> int | None:
    """The step after which the budget asks the run to stop (None: never, within these steps)."""
    state, control = TrainerState(0, len(step_seconds), Path(".")), TrainerControl()
    for step, seconds in enumerate(step_seconds, start=1):
        state.global_step = step
        budget.on_step_end(state, control, {"step": step, "step_seconds": seconds})
        if control.should_training_stop:
            return step
    return None


@pytest.mark.parametrize(("minutes", "spent", "steps", "last"), [
    (1.0, 0.0, [25.0, 25.0, 25.0, 25.0], 3),  # 50 s < 60 s after step 2, 75 s after step 3: step 3 is the last
    (1.0, 0.0, [30.0, 30.0, 30.0], 2),  # reaching the budget exactly is enough: 60 s after step 2
    (1.0, 0.0, [90.0, 1.0], 1),  # one step over the budget is the only one
    (1.0, 40.0, [25.0, 25.0], 1),  # a resume's earlier 40 s count: 65 s after the first step here
    (1.0, 60.0, [5.0], 1),  # spent before the resume: the first step after it is the last
    (2.0, 0.0, [25.0, 25.0, 25.0, 25.0], None),  # 100 s of 120: training.steps ends the run, not the budget
    (0.5, 0.0, [0.0, 0.0, 29.9, 0.1], 4),  # steps that took no measurable time still count their zero
])
def test_the_step_that_reaches_the_budget_is_the_last(minutes, spent, steps, last) -> None:
    budget = TimeBudget(minutes, spent)
    assert last_step(budget, steps) == last
    assert budget.spent == pytest.approx(spent + sum(steps[:last] if last else steps))


def test_the_budget_says_once_where_it_stopped(caplog) -> None:
    budget = TimeBudget(0.5)
    state, control = TrainerState(7, 10, Path(".")), TrainerControl()
    with caplog.at_level(logging.INFO, logger="comlrl"):
        budget.on_step_end(state, control, {"step_seconds": 31.0})
        budget.on_step_end(state, control, {"step_seconds": 1.0})  # a later hook on the same stopped step
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["training.time_budget_minutes=0.5 reached at step 7 (0.5 minutes of training steps): "
                     "this step is the last"]


def test_run_lines_are_read_up_to_a_step_and_a_cut_line_is_skipped(tmp_path: Path) -> None:
    lines = [{"step": 0, "eval/problems": 3}, {"step": 1, "step_seconds": 2.5}, {"step": 2, "step_seconds": 3.0},
             {"step": 3, "step_seconds": 4.0}]
    text = "".join(json.dumps(line) + "\n" for line in lines) + '{"step": 4, "step_sec'  # a crash mid-line
    (tmp_path / "metrics.jsonl").write_text(text)
    assert read_run_lines(tmp_path, "metrics") == lines
    assert [line["step"] for line in read_run_lines(tmp_path, "metrics", 2)] == [0, 1, 2]
    assert sum(line.get("step_seconds", 0.0) for line in read_run_lines(tmp_path, "metrics", 2)) == 5.5
    assert read_run_lines(tmp_path, "eval") == []  # not written (yet)
