"""Callbacks and argument names written the TRL / transformers way (issue 69, point 7): a
`transformers.TrainerCallback` is called `(args, state, control, **kwargs)` on views of the run's one state and
control (comlrl/run/hf_callbacks.py), beside this project's own callbacks (tests/test_trainer_api.py); TRL's
argument names in overrides are read as this trainer's keys or refused naming the key (comlrl/config/trl_names.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import transformers

from comlrl.config.schema import ConfigError, load_config
from comlrl.run.callbacks import CallbackList, TrainerCallback, TrainerState, check_callbacks

TEXT = {"task.name": "text", "magrpo.num_agents": 1, "magrpo.num_turns": 1, "model.name": "tiny-random",
        "rollout.engine": "hf", "model.max_new_tokens": 4, "evaluation.samples": 1, "evaluation.probe_problems": 1,
        "logging.progress_bar": False, "logging.tensorboard": False, "training.torch_threads": 1}
ROWS = [{"task_id": f"train/{i}", "prompt": f"Say {i}", "answer": str(i)} for i in range(6)]
HELD = [{"task_id": f"held/{i}", "prompt": f"Repeat {i}", "answer": str(i)} for i in range(3)]


def length(completions: list, **kwargs: object) -> list[float]:
    return [len(c) / 100 for c in completions]


class HFRecorder(transformers.TrainerCallback):
    """Written as for transformers' Trainer: records (hook, state.global_step, ...) and stops where told."""

    def __init__(self, stop_in: str | None = None, stop_at: int | None = None, returns: bool = False) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.logs: list[dict[str, Any]] = []
        self.args: list[Any] = []
        self.stop_in, self.stop_at, self.returns = stop_in, stop_at, returns

    def _stop(self, hook: str, state: Any, control: Any) -> Any:
        if hook == self.stop_in and state.global_step == self.stop_at:
            if self.returns:  # a hook may hand back a control of its own, as transformers lets it
                return transformers.TrainerControl(should_training_stop=True)
            control.should_training_stop = True
        return control

    def on_train_begin(self, args, state, control, **kwargs):
        self.args.append(args)
        self.events.append(("train_begin", state.global_step, state.max_steps))
        return self._stop("train_begin", state, control)

    def on_step_begin(self, args, state, control, **kwargs):
        self.events.append(("step_begin", state.global_step))
        return self._stop("step_begin", state, control)

    def on_step_end(self, args, state, control, **kwargs):
        self.events.append(("step_end", state.global_step))
        return self._stop("step_end", state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        # the run's history; a field the run has no value for reads as transformers' default
        assert state.log_history[-1] == logs and state.is_world_process_zero and state.best_metric is None
        self.logs.append(logs)
        self.events.append(("log", state.global_step, logs["step"]))
        return self._stop("log", state, control)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.events.append(("evaluate", state.global_step, int(metrics["eval/problems"])))
        return self._stop("evaluate", state, control)

    def on_save(self, args, state, control, **kwargs):
        self.events.append(("save", state.global_step, kwargs["checkpoint"].name))
        return self._stop("save", state, control)

    def on_train_end(self, args, state, control, **kwargs):
        self.events.append(("train_end", state.global_step))


class OwnRecorder(TrainerCallback):
    """This project's convention, unchanged: (state, control, metrics | checkpoint)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_step_end(self, state, control, metrics) -> None:
        self.events.append(("step", (state.global_step, "reward_mean" in metrics)))

    def on_evaluate(self, state, control, metrics) -> None:
        self.events.append(("evaluate", state.global_step))

    def on_save(self, state, control, checkpoint) -> None:
        self.events.append(("save", checkpoint.name))


def drive(calls: CallbackList, steps: int) -> int:
    """The run's calling order (comlrl/run/trainer.py) without a model: each step logged and saved, every
    step evaluated; the step after which the run ends."""
    calls.train_begin()
    for done in range(1, steps + 1):
        calls.step_begin()
        calls.step_end(done, {"step": done, "reward_mean": 0.5})
        asked = calls.control.should_training_stop
        calls.evaluate({"eval/problems": 3})
        calls.logged({"step": done, "reward_mean": 0.5})
        calls.save(Path(f"checkpoints/step-{done}"))
        if asked or calls.control.should_training_stop:
            break
    calls.train_end()
    return done


def test_a_transformers_callback_gets_its_own_signature_beside_a_comlrl_one(tmp_path: Path) -> None:
    cfg = load_config(None, {**TEXT, "max_steps": 4, "learning_rate": 3e-5, "seed": 7, "output_dir": str(tmp_path)})
    hf, own = HFRecorder(stop_in="step_end", stop_at=2), OwnRecorder()
    calls = CallbackList([hf, own], TrainerState(0, 4, tmp_path), cfg)
    assert drive(calls, 4) == 2  # the stop asked in on_step_end of step 2 made it the last
    assert hf.events == [("train_begin", 0, 4), ("step_begin", 0), ("step_end", 1), ("evaluate", 1, 3),
                         ("log", 1, 1), ("save", 1, "step-1"), ("step_begin", 1), ("step_end", 2),
                         ("evaluate", 2, 3), ("log", 2, 2), ("save", 2, "step-2"), ("train_end", 2)]
    assert own.events == [("step", (1, True)), ("evaluate", 1), ("save", "step-1"), ("step", (2, True)),
                          ("evaluate", 2), ("save", "step-2")]
    args = hf.args[0]
    assert (args.output_dir, args.max_steps, args.learning_rate, args.seed) == (str(tmp_path), 4, 3e-5, 7)
    assert [line["step"] for line in calls.state.log_history] == [1, 2]


@pytest.mark.parametrize(("hook", "at", "returns", "last"), [
    ("evaluate", 3, False, 3), ("save", 2, True, 2), ("log", 1, True, 1), ("step_begin", 2, False, 3),
    ("train_begin", 0, True, 1),  # before any step: the first is the last, as a comlrl callback's stop
])
def test_a_stop_set_or_returned_in_any_hook_is_the_runs_stop(tmp_path: Path, hook: str, at: int, returns: bool,
                                                             last: int) -> None:
    hf = HFRecorder(stop_in=hook, stop_at=at, returns=returns)
    calls = CallbackList([hf], TrainerState(0, 5, tmp_path))
    assert drive(calls, 5) == last and calls.control.should_training_stop


def test_a_returned_control_does_not_take_back_another_callbacks_stop(tmp_path: Path) -> None:
    class Stop(TrainerCallback):
        def on_step_end(self, state, control, metrics) -> None:
            control.should_training_stop = True

    class KeepsGoing(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            return transformers.TrainerControl()  # should_training_stop False

    calls = CallbackList([Stop(), KeepsGoing()], TrainerState(0, 5, tmp_path))
    assert drive(calls, 5) == 1


def test_a_duck_typed_callback_with_the_transformers_signature_is_accepted_and_others_are_refused() -> None:
    class Duck:  # neither kind's subclass; hooks it lacks are not called
        def __init__(self) -> None:
            self.steps: list[int] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(state.global_step)

    class Mixed:
        def on_step_end(self, args, state, control, **kwargs): ...
        def on_save(self, state, control, checkpoint): ...

    duck = Duck()
    assert drive(CallbackList([duck], TrainerState(0, 3, Path("."))), 3) == 3 and duck.steps == [1, 2, 3]
    for bad in (length, Mixed(), object()):
        with pytest.raises(ConfigError, match=rf"^config error: callbacks: {type(bad).__name__} is not a comlrl "
                                              r"TrainerCallback or a transformers one \(.*"
                                              r"transformers\.TrainerCallback\)$"):
            check_callbacks([bad])


@pytest.mark.parametrize(("trl", "key", "value"), [
    ("max_steps", "training.steps", 3), ("learning_rate", "magrpo.learning_rate", 1e-5),
    ("output_dir", "training.output_dir", "runs/trl"), ("save_total_limit", "training.save_total_limit", 1),
    ("num_generations", "magrpo.num_generations", 3), ("seed", "training.seed", 11),
    ("save_steps", "training.save_every", 2), ("beta", "magrpo.loss.kl_coef", 0.04),
    ("max_completion_length", "model.max_new_tokens", 64),
])
def test_trl_names_with_the_same_meaning_are_read_as_this_trainers_keys(trl: str, key: str, value: Any) -> None:
    def read(cfg: Any) -> Any:
        for part in key.split("."):
            cfg = getattr(cfg, part)
        return cfg

    assert read(load_config(None, [f"{trl}={value}"])) == value  # key=value strings (train, comlrl-train)
    assert read(load_config(None, {trl: value})) == value  # a dict (Trainer(args), train(overrides=...))


@pytest.mark.parametrize(("trl", "hint"), [
    ("per_device_train_batch_size", "training.trees_per_step"),
    ("gradient_accumulation_steps", "training.trees_per_step"),
    ("num_train_epochs", "training.steps"), ("logging_steps", "logging.tensorboard / logging.wandb"),
    ("lr_scheduler_type", "magrpo.lr_schedule"),
])
def test_trl_names_with_another_meaning_are_refused_naming_the_key(trl: str, hint: str) -> None:
    for overrides in ([f"{trl}=2"], {trl: 2}):
        with pytest.raises(ConfigError, match=rf"^config error: {trl}: not a key here \(TRL's name, with another "
                                              rf"meaning\); did you mean {hint}\? \(.+\)$"):
            load_config(None, overrides)


def test_a_trl_name_given_with_its_key_and_one_in_a_yaml_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config error: max_steps: TRL's name for training.steps, which is given "
                                          r"too; give one of them$"):
        load_config(None, {"max_steps": 3, "training": {"steps": 4}})
    yaml = tmp_path / "trl.yaml"
    yaml.write_text("max_steps: 3\n")  # a config file is this trainer's format: named, not renamed
    with pytest.raises(ConfigError, match=r"^config error: max_steps: not a key here \(TRL's name\); did you mean "
                                          r"training.steps\?$"):
        load_config(yaml)
    with pytest.raises(ConfigError, match=r"^config error: training.stepz: Key 'stepz' not in 'TrainingConfig'"):
        load_config(None, ["training.stepz=3"])  # other unknown keys: as before


@pytest.mark.slow
def test_a_transformers_callback_sees_a_real_run_and_stops_it(tmp_path: Path) -> None:
    from comlrl import Trainer

    run = tmp_path / "run"
    hf, own = HFRecorder(stop_in="step_end", stop_at=2), OwnRecorder()
    args = {**TEXT, "max_steps": 5, "output_dir": str(run), "save_total_limit": 1, "learning_rate": 1e-4,
            "num_generations": 2}
    result = Trainer(args, train_dataset=ROWS, eval_dataset=HELD, reward_funcs=[length], callbacks=[hf, own],
                     report_to="none").train()
    assert [m["step"] for m in result.metrics] == [0, 1, 2]  # stopped after step 2 of 5
    assert hf.events == [("train_begin", 0, 5), ("log", 0, 0), ("evaluate", 0, 3), ("step_begin", 0), ("step_end", 1),
                         ("log", 1, 1), ("save", 1, "step-1"), ("step_begin", 1), ("step_end", 2), ("evaluate", 2, 3),
                         ("log", 2, 2), ("save", 2, "step-2"), ("train_end", 2)]
    assert own.events == [("evaluate", 0), ("step", (1, True)), ("save", "step-1"), ("step", (2, True)),
                          ("evaluate", 2), ("save", "step-2")]
    # on_log got each metrics.jsonl line as written
    assert [log["step"] for log in hf.logs] == [m["step"] for m in result.metrics] == [0, 1, 2]
    assert [log["reward_mean"] for log in hf.logs[1:]] == pytest.approx([m["reward_mean"] for m in result.metrics[1:]])
    assert hf.logs[-1]["eval/problems"] == result.last["eval/problems"] == 3
    assert (hf.args[0].max_steps, hf.args[0].learning_rate, hf.args[0].num_generations) == (5, 1e-4, 2)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2"] and (run / "final" / "agent0").is_dir()


@pytest.mark.slow
def test_a_control_returned_from_on_evaluate_ends_the_run_after_the_steps_outputs(tmp_path: Path) -> None:
    from comlrl import Trainer

    run = tmp_path / "run"
    hf = HFRecorder(stop_in="evaluate", stop_at=2, returns=True)
    args = {**TEXT, "max_steps": 5, "output_dir": str(run), "eval_steps": 2, "save_steps": 3, "num_generations": 2}
    result = Trainer(args, train_dataset=ROWS, eval_dataset=HELD, reward_funcs=[length], callbacks=[hf]).train()
    assert [m["step"] for m in result.metrics] == [0, 1, 2] and "eval/problems" in result.last
    # step 2 was not due a checkpoint (save_steps=3): the stop saved it
    assert [e for e in hf.events if e[0] in ("save", "train_end")] == [("save", 2, "step-2"), ("train_end", 2)]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2"]
