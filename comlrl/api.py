"""The Python API: train from a script or a notebook, on rows held in memory (docs/python-api.md).

    from comlrl import load_config, train

    cfg = load_config("configs/align_T2_G4.yaml", ["training.steps=2"])
    result = train(cfg, dataset=[{"prompt": ..., "answer": ...}, ...], reward_funcs=[my_reward])
    result.last["reward_mean"], result.paths["final"]

`train` runs the same loop as `comlrl-train` in this process (one process: use `accelerate launch` and the
CLI for several). An in-memory dataset (a list of dicts or a `datasets.Dataset`) is written to
`<output_dir>/dataset.jsonl` and read as `dataset.name=hf`, so the run's config.yaml names it and
`comlrl-train --resume <output_dir>` finds it. Reward functions may be passed as functions, lambdas,
`functools.partial`s or callable objects: one importable by its name is recorded as `module:function`
(`__main__:<name>` for a notebook's or script's own), any other as `python:<name>`, which only this process
holds (resume such a run with `train(..., reward_funcs=[...])`; the command line says so).
Bad input raises the errors the CLI prints as one line (`ConfigError`, `DatasetError`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.config.checks import check_runnable
from comlrl.config.schema import ConfigError, RunConfig, load_config, validate
from comlrl.run.outputs import OUTPUTS
from comlrl.tasks.reward_funcs import spec_of

__all__ = ["DATASET_FILE", "TrainResult", "train"]

DATASET_FILE = OUTPUTS["dataset"]  # where an in-memory dataset is written, inside training.output_dir
EVAL_DATASET_FILE = OUTPUTS["eval_dataset"]  # and an in-memory held-out set (dataset.eval_path)


@dataclass(frozen=True)
class TrainResult:
    """What a finished run left: its config, its metrics (one dict per metrics.jsonl line; step 0 is the
    evaluation before training) and the paths of its outputs (`final`: agent<i>/ adapters)."""

    config: RunConfig
    output_dir: Path
    metrics: list[dict[str, Any]]

    @property
    def last(self) -> dict[str, Any]:
        """The last step's metrics (with the final evaluation's `eval/...` when the run evaluated)."""
        return self.metrics[-1] if self.metrics else {}

    @property
    def paths(self) -> dict[str, Path]:
        """Each output the run wrote, by name: config, metrics, trees, eval, dataset, tensorboard, wandb,
        checkpoints, final, plots."""
        return {name: self.output_dir / rel for name, rel in OUTPUTS.items() if (self.output_dir / rel).exists()}


def _row(i: int) -> str:
    """Row i+1, as the table loaders number dataset.jsonl's rows, with the list index it came from."""
    return f"row {i + 1} (dataset[{i}])"


def _rows(dataset: Any, arg: str = "dataset") -> list[Mapping[str, Any]]:
    if isinstance(dataset, Sequence) and not isinstance(dataset, str | bytes):
        rows = list(dataset)
    else:
        import datasets

        if not isinstance(dataset, datasets.Dataset):
            raise ConfigError(f"config error: {arg}: expected a list of dicts or a datasets.Dataset, got "
                              f"{type(dataset).__name__}")
        rows = dataset.to_list()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigError(f"config error: {arg}: {_row(i)} is a {type(row).__name__}, expected a dict")
    return rows


def jsonl_text(rows: Sequence[Mapping[str, Any]], arg: str = "dataset") -> str:
    """One JSON object per row; a value JSON cannot hold is a `DatasetError` naming its row and column."""
    from comlrl.tasks.datasets import DatasetError

    lines = []
    for i, row in enumerate(rows):
        for column, value in row.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"{arg}: {_row(i)}, column {column!r}: {type(value).__name__} cannot be "
                                   f"written as JSON ({exc})") from None
        lines.append(json.dumps(dict(row), ensure_ascii=False) + "\n")
    return "".join(lines)


def write_rows(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """`jsonl_text(rows)` written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(jsonl_text(rows), encoding="utf-8")
    tmp.replace(path)


def train(config: RunConfig | str | Path | None = None, overrides: Sequence[str] | Mapping[str, Any] = (), *,
          dataset: Any = None,
          reward_funcs: Sequence[Callable[..., Any] | str] | None = None,
          reward_weights: Sequence[float] | None = None, report: bool = True) -> TrainResult:
    """Train as `comlrl-train` does, in this process; returns the run's metrics and output paths.

    config: a `RunConfig` (from `load_config`), a YAML path, or None (the schema defaults); `overrides`
    are `key=value` strings or a dict on top. dataset: rows in memory (a list of dicts or a `datasets.Dataset`),
    for any task that reads `dataset.name=hf` (code tasks: `prompt`, `test`, `entry_point` columns; the
    text task: a `prompt` column and any others). reward_funcs / reward_weights: as `task.reward_funcs` /
    `task.reward_weights`, functions or `module:function` strings. report=False: no plots, tree page or model
    card at the end (for a run whose folder is thrown away).
    """
    cfg = load_config(config, overrides)
    with_rewards(cfg, reward_funcs, reward_weights)
    return _train(cfg, {"dataset": dataset}, (), report)


def with_rewards(cfg: RunConfig, reward_funcs: Sequence[Callable[..., Any] | str] | None,
                 reward_weights: Sequence[float] | None) -> None:
    """Set task.reward_funcs (each function named by `spec_of`) and task.reward_weights, where given."""
    if reward_funcs is not None:
        specs: list[str] = []
        for fn in reward_funcs:
            specs.append(fn if isinstance(fn, str) else spec_of(fn, specs))
        cfg.task.reward_funcs = specs
    if reward_weights is not None:
        cfg.task.reward_weights = [float(w) for w in reward_weights]


def _staged(cfg: RunConfig, datasets: Mapping[str, Any]) -> list[tuple[list[Mapping[str, Any]], Path]]:
    """The in-memory tables to write (rows, file), with the config pointed at the files. `datasets` maps the
    argument's name (how errors call it) to its rows or None; `eval_dataset` is the held-out one. Resuming,
    the rows must be those the run wrote (a run is not resumed on other data); they are not written again."""
    out = Path(cfg.training.output_dir).resolve()
    staged = []
    for arg, value in datasets.items():
        if value is None:
            continue
        held_out = arg == "eval_dataset"
        rows, path = _rows(value, arg), out / (EVAL_DATASET_FILE if held_out else DATASET_FILE)
        if cfg.training.resume:
            if not path.is_file() or path.read_text(encoding="utf-8") != jsonl_text(rows, arg):
                raise ConfigError(f"config error: {arg}: differs from the rows the run trained on ({path}); resume "
                                  f"with the same rows, or pass {arg}=None to use the run's own")
        else:
            staged.append((rows, path))
        if held_out:
            cfg.dataset.eval_path = str(path)
        else:
            cfg.dataset.name, cfg.dataset.path = "hf", str(path)
    return staged


def _train(cfg: RunConfig, datasets: Mapping[str, Any], callbacks: Sequence[Any], report: bool = True,
           hold_final: Callable[[Any], None] | None = None) -> TrainResult:
    """Write the in-memory tables, run, read back the metrics: what `train`, `Trainer.train` and the CoMLRL
    trainers share (`hold_final`: as `comlrl.run.trainer.run`'s)."""
    from comlrl.run.outputs import check_output_dir

    staged = _staged(cfg, datasets)
    validate(cfg)
    check_runnable(cfg)
    check_output_dir(cfg)  # before writing: an earlier run's files are never touched unasked
    from comlrl.run.guard import check_resume

    check_resume(cfg)  # a resume that changes the weights' shape or the held-out set: one line, as the CLI's
    from comlrl.cores import share_cores

    share_cores()  # before torch loads (no effect if the caller imported it already: OpenMP reads it once)
    from comlrl.run.guard import taken_back_on_failure
    from comlrl.run.trainer import run  # torch and the models load only now

    out = Path(cfg.training.output_dir).resolve()
    # a run that fails before its first step takes back what it wrote (dataset.jsonl included), as the CLI does,
    # so the fixed call is not refused as "already holds a run"
    with taken_back_on_failure(cfg):
        for rows, path in staged:
            write_rows(rows, path)
        run(cfg, callbacks, report, hold_final)
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if (out / "metrics.jsonl").exists() else []
    return TrainResult(cfg, out, [json.loads(line) for line in lines if line.strip()])


REPORT_TO = ("tensorboard", "wandb")  # the trackers a run logs to (logging.tensorboard, logging.wandb)


def report_switches(report_to: str | Sequence[str]) -> tuple[bool, bool]:
    """(logging.tensorboard, logging.wandb) for TRL's `report_to`: a name, a list of names, "all" (every
    installed tracker) or "none"."""
    import importlib.util

    names = [report_to] if isinstance(report_to, str) else list(report_to)
    if names == ["all"]:
        names = ["tensorboard", *(["wandb"] if importlib.util.find_spec("wandb") else [])]
    names = [n for n in names if n != "none"]
    for name in names:
        if name not in REPORT_TO:
            raise ConfigError(f"config error: report_to: {name!r} is not allowed; expected tensorboard, wandb, all "
                              "or none (the trackers this trainer logs to)")
    return "tensorboard" in names, "wandb" in names


class Trainer:
    """A Trainer as TRL users know it, over the same run as `train` and `comlrl-train` (docs/python-api.md).

        trainer = Trainer({"task.name": "text", "training.steps": 20}, train_dataset=rows, eval_dataset=held,
                          reward_funcs=[correct, lambda completions, **kw: [...]], callbacks=[MyCallback()],
                          report_to="tensorboard")
        result = trainer.train()                          # or train(resume_from_checkpoint=True / a step folder)

    args: a `RunConfig`, a YAML path, a dict of overrides on the defaults (nested sections or dotted keys), or
    None. train_dataset / eval_dataset: rows in memory (written to the run's dataset.jsonl and
    eval_dataset.jsonl; eval_dataset is the held-out set every evaluation scores). reward_funcs: functions,
    lambdas, partials, callable objects or `module:function` strings. callbacks: comlrl `TrainerCallback`s or
    `transformers.TrainerCallback`s (called the transformers way: comlrl/run/hf_callbacks.py); TRL's argument
    names in `args` (`max_steps`, ...) are read as this trainer's keys or refused naming the key.
    report_to: "tensorboard", "wandb", a list of them, "all" or "none" (None: the config's logging.*).
    """

    def __init__(self, args: RunConfig | str | Path | Mapping[str, Any] | None = None, *,
                 train_dataset: Any = None, eval_dataset: Any = None,
                 reward_funcs: Sequence[Callable[..., Any] | str] | None = None,
                 reward_weights: Sequence[float] | None = None, callbacks: Sequence[Any] | None = None,
                 report_to: str | Sequence[str] | None = None) -> None:
        from comlrl.run.callbacks import check_callbacks

        self.config = load_config(None, args) if isinstance(args, Mapping) else load_config(args)
        with_rewards(self.config, reward_funcs, reward_weights)
        if report_to is not None:
            self.config.logging.tensorboard, self.config.logging.wandb = report_switches(report_to)
        self.callbacks = check_callbacks(list(callbacks or []))
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.result: TrainResult | None = None

    def add_callback(self, callback: Any) -> None:
        from comlrl.run.callbacks import check_callbacks

        self.callbacks += check_callbacks([callback])

    def train(self, resume_from_checkpoint: bool | str | Path | None = None) -> TrainResult:
        """Run; `resume_from_checkpoint`: True (the run's latest checkpoint) or a checkpoint folder
        (`<output_dir>/checkpoints/step-<k>`: the run goes on from that step, the later checkpoints are removed)."""
        cfg = load_config(self.config)
        if resume_from_checkpoint is not None and resume_from_checkpoint is not False:
            cfg.training.resume = True
            if resume_from_checkpoint is not True:
                checkpoint = Path(resume_from_checkpoint)
                cfg.training.output_dir, cfg.training.resume_from = str(checkpoint.parent.parent), str(checkpoint)
        self.result = _train(cfg, {"train_dataset": self.train_dataset, "eval_dataset": self.eval_dataset},
                             self.callbacks)
        return self.result
