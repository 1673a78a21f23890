"""What a run writes to `training.output_dir`: metrics.jsonl, trees.jsonl (comlrl/tree/records.py), and
through accelerate's trackers TensorBoard events (`tensorboard/`) and, optionally, a W&B run (`wandb/`).

Only rank 0 constructs a writer. Files are appended line by line and flushed, so a crash loses at most
the line being written; a resumed run truncates lines past its checkpoint step so nothing is doubled.
A directory holding an earlier run's outputs is refused unless the run resumes or `training.overwrite`
says to replace them: nothing is deleted that the user did not ask to delete.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from comlrl.config.schema import ConfigError, RunConfig, to_yaml
from comlrl.tree.records import NodeRecord

# every top-level name a run writes in its output_dir, by name (plus tree_step<k>.html pages): the one list
OUTPUTS = {"config": "config.yaml", "metrics": "metrics.jsonl", "trees": "trees.jsonl", "eval": "eval.jsonl",
           "dataset": "dataset.jsonl", "eval_dataset": "eval_dataset.jsonl", "tensorboard": "tensorboard",
           "wandb": "wandb", "checkpoints": "checkpoints", "final": "final", "plots": "plots",
           "pairs": "pairs.jsonl", "games": "games.txt"}
# what makes a folder hold a run: config.yaml or dataset.jsonl alone (a run that failed at start-up) is no run data
RUN_OUTPUTS = tuple(OUTPUTS[k] for k in ("metrics", "trees", "eval", "tensorboard", "wandb", "checkpoints", "final",
                                          "pairs"))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def previous_outputs(out: Path) -> list[str]:
    """The names in RUN_OUTPUTS that `out` already holds."""
    return [name for name in RUN_OUTPUTS if (out / name).exists()]


def check_output_dir(cfg: RunConfig) -> None:
    """Refuse to start a new run over an earlier one's outputs unless resuming or told to overwrite, and one
    whose output_dir cannot be written (before a model loads, not at the first write after it)."""
    t = cfg.training
    found = previous_outputs(Path(t.output_dir))
    if found and not (t.resume or t.overwrite):
        raise ConfigError(
            f"config error: training.output_dir={t.output_dir!r} already holds a run ({', '.join(found)}); "
            "resume it (--resume DIR), pass training.overwrite=true to replace it, or choose another output_dir"
        )
    why = unwritable(Path(t.output_dir))
    if why:
        raise ConfigError(f"config error: training.output_dir={t.output_dir!r} cannot be written ({why}); "
                          "choose a directory this user can write")


def unwritable(out: Path) -> str | None:
    """Why files cannot be made in `out` (None: they can), found by making the directory and a probe file in
    it; what the probe made is removed again."""
    made = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".comlrl-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        for p in made:  # innermost first; a directory the run itself will make again
            try:
                p.rmdir()
            except OSError:
                pass


def clear_previous(out: Path) -> None:
    """Delete an earlier run's outputs (only called for training.overwrite=true on a fresh start)."""
    for name in previous_outputs(out):
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def flat_config(cfg: RunConfig) -> dict[str, Any]:
    """The resolved config as `section.key: value` scalars (what W&B and TensorBoard hparams take)."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                flat[f"{prefix}{key}"] = value if isinstance(value, bool | int | float | str) else json.dumps(value)

    walk(OmegaConf.to_container(OmegaConf.structured(cfg)), "")
    return flat


def make_trackers(cfg: RunConfig, resume_step: int = 0) -> list[Any]:
    """accelerate trackers for `Accelerator(log_with=...)`: TensorBoard in <output_dir>/tensorboard, W&B in
    <output_dir>/wandb (WANDB_MODE=offline works). A resumed run purges TensorBoard events past its step."""
    from accelerate.tracking import TensorBoardTracker, WandBTracker

    out = Path(cfg.training.output_dir)
    trackers: list[Any] = []
    if cfg.logging.tensorboard:
        trackers.append(TensorBoardTracker("tensorboard", str(out),
                                           purge_step=resume_step + 1 if resume_step else None))
    if cfg.logging.wandb:
        check_wandb()
        trackers.append(WandBTracker(cfg.logging.wandb_project, dir=str(out), resume="allow"))
    return trackers


def check_wandb() -> None:
    """logging.wandb=true: refuse now, before the model loads, what `wandb.init` would refuse at the first
    log (no package, a bad WANDB_MODE, no login for an online run). Only settings files, the environment
    and ~/.netrc are read: `wandb.setup()`/`wandb.login()` would start W&B's service process, whose exit
    can hang for minutes on a machine without network. The key is looked at, never sent."""
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError("config error: logging.wandb=true needs the wandb package (pip install wandb)")
    import pydantic  # wandb's settings are a pydantic model
    import wandb
    from wandb.sdk.lib.wbauth.validation import check_api_key
    from wandb.sdk.lib.wbauth.wbnetrc import read_netrc_auth

    try:
        settings = wandb.Settings(silent=True)
        settings.update_from_system_settings()
        settings.update_from_env_vars(dict(os.environ))
    except pydantic.ValidationError as exc:  # wandb's settings validation, e.g. an unknown WANDB_MODE
        bad = exc.errors()[0]
        raise ConfigError(f"config error: logging.wandb=true but W&B's settings are refused: "
                          f"{'.'.join(map(str, bad['loc'])) or 'mode'}={bad['input']!r}: {bad['msg']}") from None
    if settings.mode in ("offline", "dryrun", "disabled"):
        return
    key = os.environ.get("WANDB_API_KEY")
    if key is not None:
        if problem := check_api_key(key):  # a malformed key; the message names the variable, never the key
            raise ConfigError(f"config error: logging.wandb=true but W&B refuses the login: WANDB_API_KEY invalid: "
                              f"{problem}")
        return
    try:
        netrc_key = read_netrc_auth(host=settings.base_url)  # where `wandb login` writes its key
    except wandb.errors.Error as exc:  # a malformed key in .netrc; the message never holds the key
        raise ConfigError(f"config error: logging.wandb=true but W&B refuses the login: {exc}") from None
    if netrc_key is None:
        raise ConfigError(
            "config error: logging.wandb=true but W&B has no login here (no WANDB_API_KEY, no `wandb login`): run "
            "`wandb login`, set WANDB_API_KEY, or set WANDB_MODE=offline to keep the run local (`wandb sync` "
            "uploads it later)")


def truncate_jsonl(path: Path, keep: Any) -> None:
    """Keep only the lines for which keep(record) is true (used on resume)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if keep(json.loads(line)):
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


def read_run_lines(run_dir: str | Path, output: str, up_to_step: int | None = None) -> list[dict[str, Any]]:
    """One of a run's JSON-lines outputs (`output`: an `OUTPUTS` key, e.g. "eval" for the per-problem
    evaluation scores, "metrics" for the step lines), optionally only the lines up to a step."""
    path = Path(run_dir) / OUTPUTS[output]
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        if up_to_step is None or record.get("step", 0) <= up_to_step:
            out.append(record)
    return out


def read_run_config(run_dir: str | Path) -> Any:
    """A run's config.yaml as omegaconf reads it: no plugin import and no check, for the few keys a report reads
    (the resolved config that `--config` loads back goes through load_config instead)."""
    return OmegaConf.load(Path(run_dir) / OUTPUTS["config"])


class RunWriter:
    """metrics.jsonl and trees.jsonl, plus every metric to the accelerator's trackers (started here)."""

    def __init__(self, cfg: RunConfig, accelerator: Any, resume_step: int = 0) -> None:
        self.dir = Path(cfg.training.output_dir)
        self.accelerator = accelerator
        if resume_step == 0 and cfg.training.overwrite and not cfg.training.resume:
            clear_previous(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "config.yaml").write_text(to_yaml(cfg))
        self.metrics_path = self.dir / "metrics.jsonl"
        self.trees_path = self.dir / "trees.jsonl"
        self.evals_path = self.dir / "eval.jsonl"
        pairs = self.dir / OUTPUTS["pairs"]  # written by the preference rounds (comlrl/run/rounds.py)
        if resume_step > 0:
            for p in (self.metrics_path, self.trees_path, self.evals_path):
                truncate_jsonl(p, lambda r: r.get("step", 0) <= resume_step)
            truncate_jsonl(pairs, lambda r: r.get("meta", {}).get("step", 0) <= resume_step)
        else:  # a fresh start: check_output_dir let it through (resume without a checkpoint, or overwrite)
            for p in (self.metrics_path, self.trees_path, self.evals_path, pairs):
                p.unlink(missing_ok=True)
        accelerator.init_trackers(cfg.logging.wandb_project, config=flat_config(cfg))

    def log(self, metrics: dict[str, Any]) -> None:
        record = {k: _clean(v) for k, v in metrics.items()}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        scalars = {k: v for k, v in metrics.items()
                   if k != "step" and isinstance(v, int | float) and math.isfinite(v)}
        self.accelerator.log(scalars, step=int(metrics["step"]))

    def write_trees(self, records: list[NodeRecord]) -> None:
        with self.trees_path.open("a") as f:
            for r in records:
                f.write(r.to_line())

    def write_evals(self, records: list[dict[str, Any]]) -> None:
        """Per-problem evaluation scores (comlrl/run/evaluation.py), one JSON line each."""
        with self.evals_path.open("a") as f:
            for r in records:
                f.write(json.dumps({k: _clean(v) for k, v in r.items()}) + "\n")



def close_trackers(accelerator: Any) -> None:
    """Finish the accelerator's trackers: flushes TensorBoard (and stops its writer thread), syncs or closes
    the W&B run."""
    for tracker in accelerator.trackers:
        tracker.finish()

