"""Atomic checkpoints: `checkpoints/step-<k>/` appears whole or not at all.

Every rank writes into a hidden temporary folder; rank 0 renames it once all ranks are done. Only
trainable weights are stored (the adapters, or full weights in full mode), never the frozen base.
meta.json, written last, lists every file with its size, so a file cut short later (a full disk, a copy
that stopped) is named before anything loads, and the previous intact checkpoint is offered instead.
`training.save_total_limit` keeps the newest ones.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from comlrl.config.schema import RunConfig
from comlrl.errors import ConfigError
from comlrl.learn.learner import Learner

META = "meta.json"


class CheckpointError(ConfigError):
    """A checkpoint that cannot be resumed from (a file missing, cut short or unreadable): one line naming the
    file and the previous intact checkpoint."""


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint under `root`, oldest first (half-written ones are hidden
    .tmp folders without meta.json)."""
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("step-") and (p / META).is_file():
            try:
                found.append((int(p.name[5:]), p))
            except ValueError:
                continue
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    """The complete checkpoint with the highest step, if any."""
    found = checkpoints(root)
    return found[-1][1] if found else None


def resume_point(cfg: RunConfig) -> Path | None:
    """Where a resumed run starts: `training.resume_from`, else the run's latest checkpoint (None: not
    resuming, or nothing saved yet)."""
    t = cfg.training
    if not t.resume:
        return None
    return Path(t.resume_from) if t.resume_from else latest_checkpoint(Path(t.output_dir) / "checkpoints")


def checkpoint_step(path: Path) -> int:
    """The step a complete checkpoint was taken after (from its meta.json)."""
    return int(json.loads((path / META).read_text())["step"])


def write_manifest(path: Path, step: int, world_size: int) -> None:
    """meta.json: the step, the world size and every file's size (written last: it marks the folder whole)."""
    files = {p.relative_to(path).as_posix(): p.stat().st_size for p in sorted(path.rglob("*"))
             if p.is_file() and p.name != META}
    (path / META).write_text(json.dumps({"step": step, "world_size": world_size, "files": files}))


def damage(path: Path) -> str | None:
    """What is wrong with a checkpoint's files against its manifest (None: nothing found; a checkpoint written
    before manifests is not checked)."""
    listed = json.loads((path / META).read_text()).get("files", {})
    for name, size in listed.items():
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        actual = f.stat().st_size
        if actual != size:
            return f"{name} is {actual} bytes, {size} when written ({'truncated' if actual < size else 'changed'})"
    return None


def intact_before(root: Path, step: int) -> Path | None:
    """The newest checkpoint before `step` whose files match its manifest."""
    return next((p for k, p in reversed(checkpoints(root)) if k < step and damage(p) is None), None)


def _removed(paths: list[Path]) -> list[Path]:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    return paths


def prune_checkpoints(root: Path, limit: int | None) -> None:
    """Delete all but the newest `limit` complete checkpoints (None: keep every one)."""
    if limit is not None:
        _removed([path for _, path in checkpoints(root)[:-limit]])


def drop_after(root: Path, step: int) -> list[Path]:
    """Delete the complete checkpoints after `step` (a run resumed from an earlier one); the deleted ones."""
    return _removed([path for k, path in checkpoints(root) if k > step])


def _refused(path: Path, what: str) -> CheckpointError:
    previous = intact_before(path.parent, checkpoint_step(path))
    offer = (f"the previous intact checkpoint is {previous}: resume from it with --resume {previous}" if previous
             else "no earlier intact checkpoint is kept: start the run again (training.overwrite=true)")
    return CheckpointError(f"checkpoint error: {path}/{what}; {offer}")


def _rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def save_checkpoint(learner: Learner, step: int, root: Path) -> Path:
    """The learner's trainable weights, optimizer, schedule and every rank's RNG as `root/step-<step>/`."""
    accelerator = learner.accelerator
    final = root / f"step-{step}"
    tmp = root / f".step-{step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    if learner.deepspeed:
        learner.model.save_checkpoint(str(tmp / "deepspeed"), tag="state", exclude_frozen_parameters=True)  # type: ignore[operator]
    elif accelerator.is_main_process:
        torch.save(learner.optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(_rng_state(), tmp / f"rng-{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        learner.policies.save(tmp / "weights")
        torch.save(learner.scheduler.state_dict(), tmp / "scheduler.pt")
    accelerator.wait_for_everyone()  # every rank's files are in: the manifest lists them all
    if accelerator.is_main_process:
        write_manifest(tmp, step, accelerator.num_processes)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(learner: Learner, path: Path) -> int:
    """Restore weights, optimizer, scheduler and RNG; returns the step the checkpoint was taken after. A file
    missing, cut short or unreadable is a `CheckpointError` naming it (the files are checked against the
    manifest before the first one loads)."""
    what = damage(path)
    if what:
        raise _refused(path, what)
    _reading(path, "weights", learner.policies.load)
    if learner.deepspeed:
        _reading(path, "deepspeed", lambda p: learner.model.load_checkpoint(  # type: ignore[operator]
            str(p), tag="state", load_module_strict=False))
    else:
        optimizer = _reading(path, "optimizer.pt", _torch_file)
        _reading(path, "optimizer.pt", lambda _: learner.optimizer.load_state_dict(optimizer))
    scheduler = _reading(path, "scheduler.pt", _torch_file)
    _reading(path, "scheduler.pt", lambda _: learner.scheduler.load_state_dict(scheduler))
    rng_file = f"rng-{learner.accelerator.process_index}.pt"
    if (path / rng_file).is_file():
        rng = _reading(path, rng_file, _torch_file)
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
    return checkpoint_step(path)


def _torch_file(file: Path) -> Any:
    return torch.load(file, map_location="cpu", weights_only=False)


# what torch says when whole files hold state of another shape than the model built now (not damage)
MISMATCH = ("size mismatch", "Missing key(s)", "Unexpected key(s)", "parameter group", "doesn't match the size")


def _reading(path: Path, name: str, load: Any) -> Any:
    """`load(path / name)`; a failure is the one-line `CheckpointError` naming `name`: a state of another
    shape than this run's model (the files are whole: the config changed since) says so and never offers to
    start again; anything else is damage (`_refused`)."""
    try:
        return load(path / name)
    except (OSError, RuntimeError, ValueError, EOFError, KeyError, pickle.UnpicklingError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        if isinstance(exc, RuntimeError | ValueError | KeyError) and any(m in str(exc) for m in MISMATCH):
            run = path.parent.parent
            detail = next((x.strip() for x in str(exc).splitlines() if any(m in x for m in MISMATCH)), first)[:200]
            raise CheckpointError(f"checkpoint error: {path}/{name} does not fit this run's model ({detail}); its "
                                  f"files are whole, so the config changed since it was written: resume with the "
                                  f"run's own {run / 'config.yaml'}") from exc
        raise _refused(path, f"{name} cannot be loaded ({type(exc).__name__}: {first})") from exc
