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


def _rows(dataset: Any) -> list[Mapping[str, Any]]:
    if isinstance(dataset, Sequence) and not isinstance(dataset, str | bytes):
        rows = list(dataset)
    else:
        import datasets

        if not isinstance(dataset, datasets.Dataset):
            raise ConfigError(f"config error: dataset: expected a list of dicts or a datasets.Dataset, got "
                              f"{type(dataset).__name__}")
        rows = dataset.to_list()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigError(f"config error: dataset: {_row(i)} is a {type(row).__name__}, expected a dict")
    return rows


def write_rows(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """One JSON object per row; a value JSON cannot hold is a `DatasetError` naming its row and column."""
    from comlrl.tasks.datasets import DatasetError

    lines = []
    for i, row in enumerate(rows):
        for column, value in row.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"dataset: {_row(i)}, column {column!r}: {type(value).__name__} cannot be "
                                   f"written as JSON ({exc})") from None
        lines.append(json.dumps(dict(row), ensure_ascii=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(path)


def train(config: RunConfig | str | Path | None = None, overrides: Sequence[str] | Mapping[str, Any] = (), *,
          dataset: Any = None,
          reward_funcs: Sequence[Callable[..., Any] | str] | None = None,
          reward_weights: Sequence[float] | None = None) -> TrainResult:
    """Train as `comlrl-train` does, in this process; returns the run's metrics and output paths.

    config: a `RunConfig` (from `load_config`), a YAML path, or None (the schema defaults); `overrides`
    are `key=value` strings or a dict on top. dataset: rows in memory (a list of dicts or a `datasets.Dataset`),
    for any task that reads `dataset.name=hf` (code tasks: `prompt`, `test`, `entry_point` columns; the
    text task: a `prompt` column and any others). reward_funcs / reward_weights: as `task.reward_funcs` /
    `task.reward_weights`, functions or `module:function` strings.
    """
    from comlrl.run.outputs import check_output_dir

    cfg = load_config(config, overrides)
    if reward_funcs is not None:
        cfg.task.reward_funcs = [fn if isinstance(fn, str) else spec_of(fn) for fn in reward_funcs]
    if reward_weights is not None:
        cfg.task.reward_weights = [float(w) for w in reward_weights]
    out = Path(cfg.training.output_dir).resolve()
    rows = None
    if dataset is not None:
        if cfg.training.resume:
            raise ConfigError(f"config error: dataset: training.resume=true reads the run's own {out / DATASET_FILE}; "
                              "pass dataset=None to resume")
        rows = _rows(dataset)
        cfg.dataset.name, cfg.dataset.path = "hf", str(out / DATASET_FILE)
    validate(cfg)
    check_runnable(cfg)
    check_output_dir(cfg)  # before writing: an earlier run's files are never touched unasked
    from comlrl.run.guard import taken_back_on_failure
    from comlrl.run.trainer import run  # torch and the models load only now

    # a run that fails before its first step takes back what it wrote (dataset.jsonl included), as the CLI does,
    # so the fixed call is not refused as "already holds a run"
    with taken_back_on_failure(cfg):
        if rows is not None:
            write_rows(rows, out / DATASET_FILE)
        run(cfg)
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if (out / "metrics.jsonl").exists() else []
    return TrainResult(cfg, out, [json.loads(line) for line in lines if line.strip()])
