"""Atomic checkpoints: `checkpoints/step-<k>/` appears whole or not at all.

Every rank writes into a hidden temporary folder; rank 0 renames it once all ranks are done. Only
trainable weights are stored (the adapters, or full weights in full mode), never the frozen base.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from comlrl.learn.learner import Learner


def latest_checkpoint(root: Path) -> Path | None:
    """The complete checkpoint with the highest step, if any (half-written ones are hidden .tmp dirs)."""
    if not root.is_dir():
        return None
    steps = []
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("step-") and (p / "meta.json").is_file():
            try:
                steps.append((int(p.name[5:]), p))
            except ValueError:
                continue
    return max(steps)[1] if steps else None


def checkpoint_step(path: Path) -> int:
    """The step a complete checkpoint was taken after (from its meta.json)."""
    return int(json.loads((path / "meta.json").read_text())["step"])


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
        (tmp / "meta.json").write_text(json.dumps({"step": step, "world_size": accelerator.num_processes}))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(learner: Learner, path: Path) -> int:
    """Restore weights, optimizer, scheduler and RNG; returns the step the checkpoint was taken after."""
    learner.policies.load(path / "weights")
    if learner.deepspeed:
        learner.model.load_checkpoint(str(path / "deepspeed"), tag="state", load_module_strict=False)  # type: ignore[operator]
    else:
        learner.optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False))
    learner.scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    rng_file = path / f"rng-{learner.accelerator.process_index}.pt"
    if rng_file.is_file():
        rng = torch.load(rng_file, weights_only=False)
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
    return checkpoint_step(path)
