"""The Trainer-shaped entry point a TRL user expects (issue 36, "TRL users"): train and eval datasets as
arguments, callbacks that see steps, evaluations and checkpoints and can stop the run, `report_to`,
`save_total_limit`, resume from a chosen checkpoint; reward functions as lambdas, partials and callable objects."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError

TEXT = {"task.name": "text", "magrpo.num_agents": 1, "magrpo.num_turns": 1, "magrpo.num_generations": 2,
        "model.name": "tiny-random", "model.max_new_tokens": 4, "evaluation.samples": 1,
        "evaluation.probe_problems": 1, "logging.progress_bar": False, "training.torch_threads": 1}
ROWS = [{"task_id": f"train/{i}", "prompt": f"Say {i}", "answer": str(i)} for i in range(6)]
HELD = [{"task_id": f"held/{i}", "prompt": f"Repeat {i}", "answer": str(i)} for i in range(3)]


def length(completions: list, scale: float = 1.0, **kwargs: object) -> list[float]:
    return [scale * len(c) / 100 for c in completions]


class Distinct:
    def __call__(self, completions: list, **kwargs: object) -> list[float]:
        return [len(set(c)) / 100 for c in completions]


class Recorder:
    """A callback that records what it saw and stops the run after step `stop_at`."""

    def __init__(self, stop_at: int | None) -> None:
        from comlrl import TrainerCallback

        outer = self
        self.events: list[tuple[str, object]] = []

        class Hook(TrainerCallback):
            def on_step_end(self, state, control, metrics) -> None:
                outer.events.append(("step", state.global_step))
                if state.global_step == stop_at:
                    control.should_training_stop = True

            def on_evaluate(self, state, control, metrics) -> None:
                outer.events.append(("evaluate", (state.global_step, int(metrics["eval/problems"]))))

            def on_save(self, state, control, checkpoint) -> None:
                outer.events.append(("save", checkpoint.name))

        self.hook = Hook()


@pytest.mark.slow
def test_a_trainer_with_callbacks_an_eval_dataset_and_lambda_rewards_stops_and_resumes(tmp_path: Path) -> None:
    from comlrl import Trainer

    run = tmp_path / "run"
    rec = Recorder(stop_at=2)
    rewards = [lambda completions, **kw: [1.0 if "1" in c else 0.0 for c in completions],
               functools.partial(length, scale=2.0), Distinct()]
    args = {**TEXT, "training.steps": 5, "training.output_dir": str(run), "training.save_total_limit": 1}
    trainer = Trainer(args, train_dataset=ROWS, eval_dataset=HELD, reward_funcs=rewards, callbacks=[rec.hook],
                      report_to="none")
    result = trainer.train()
    # the stop asked for after step 2 made it the last: evaluated, checkpointed, final/ written
    assert [m["step"] for m in result.metrics] == [0, 1, 2]
    assert rec.events == [("evaluate", (0, 3)), ("step", 1), ("save", "step-1"), ("step", 2), ("evaluate", (2, 3)),
                          ("save", "step-2")]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2"]  # save_total_limit=1
    assert (run / "final" / "agent0").is_dir() and not (run / "tensorboard").exists()  # report_to="none"
    held = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in held if r["set"] == "heldout"} == {"held/0", "held/1", "held/2"}  # eval_dataset
    last = result.last
    assert {"reward/lambda", "reward/length", "reward/Distinct", "reward/weighted_sum"} <= set(last)
    config = (run / "config.yaml").read_text()
    assert "python:lambda" in config and f"eval_path: {run / 'eval_dataset.jsonl'}" in config
    # the same trainer goes on from the chosen checkpoint (the same rows: they match the run's dataset.jsonl),
    # under a time budget that steps 1-2 all but spent: their time counts, so step 3 is the last of 5
    spent = sum(m["step_seconds"] for m in result.metrics if m["step"] > 0)
    again = Trainer({**args, "training.time_budget_minutes": (spent + 1e-6) / 60}, train_dataset=ROWS,
                    eval_dataset=HELD, reward_funcs=rewards, report_to="none")
    resumed = again.train(resume_from_checkpoint=run / "checkpoints" / "step-2")
    assert [m["step"] for m in resumed.metrics] == [0, 1, 2, 3]
    assert "eval/problems" in resumed.metrics[-1]  # the budget's last step is evaluated, as a callback's stop


def test_report_to_maps_onto_the_logging_switches(tmp_path: Path) -> None:
    from comlrl import Trainer

    def switches(report_to: object) -> tuple[bool, bool]:
        cfg = Trainer({**TEXT, "training.output_dir": str(tmp_path)}, train_dataset=ROWS,
                      reward_funcs=[length], report_to=report_to).config
        return cfg.logging.tensorboard, cfg.logging.wandb

    assert switches(None) == (True, False)  # the config's own
    assert switches("none") == switches([]) == (False, False)
    assert switches("tensorboard") == switches(["tensorboard"]) == (True, False)
    assert switches(["tensorboard", "wandb"]) == (True, True)
    with pytest.raises(ConfigError, match=r"^config error: report_to: 'mlflow' is not allowed; expected tensorboard, "
                                          r"wandb, all or none \(the trackers this trainer logs to\)$"):
        switches("mlflow")


def test_a_callback_that_is_not_a_trainer_callback_is_one_line(tmp_path: Path) -> None:
    from comlrl import Trainer

    with pytest.raises(ConfigError, match=r"^config error: callbacks: function is not a comlrl TrainerCallback"):
        Trainer({**TEXT, "training.output_dir": str(tmp_path)}, train_dataset=ROWS, reward_funcs=[length],
                callbacks=[length])


def test_resuming_with_other_rows_than_the_runs_is_refused(tmp_path: Path) -> None:
    from comlrl import Trainer

    run = tmp_path / "run"
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    (run / "checkpoints" / "step-1" / "meta.json").write_text('{"step": 1, "world_size": 1}')
    (run / "dataset.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    trainer = Trainer({**TEXT, "training.output_dir": str(run)}, train_dataset=ROWS, reward_funcs=[length])
    with pytest.raises(ConfigError, match=r"^config error: train_dataset: differs from the rows the run trained on "
                                          rf"\({run / 'dataset.jsonl'}\); resume with the same rows"):
        trainer.train(resume_from_checkpoint=True)
