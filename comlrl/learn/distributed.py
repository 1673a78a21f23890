"""accelerate set-up that fails loudly instead of silently training a different world.

On CPU, accelerate picks no process-group backend and may believe world=1 while the launcher started
two ranks (or start one rank when asked for two). We pass gloo when distributed without CUDA and refuse
to start when the launcher's WORLD_SIZE and accelerate's process count disagree.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, InitProcessGroupKwargs


class WorldSizeError(RuntimeError):
    """The launcher and accelerate disagree about how many processes train."""


def launcher_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def make_accelerator(log_with: list[Any] | None = None) -> Accelerator:
    """The run's Accelerator; `log_with` takes accelerate trackers (see run_outputs.make_trackers)."""
    world = launcher_world_size()
    handlers = []
    if world > 1 and not torch.cuda.is_available():
        handlers.append(InitProcessGroupKwargs(backend="gloo", timeout=timedelta(minutes=30)))
    accelerator = Accelerator(kwargs_handlers=handlers, log_with=log_with or None)
    real = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    if accelerator.distributed_type == DistributedType.NO:
        real = 1  # a process group may exist, but accelerate will neither wrap the model nor synchronise
    if accelerator.num_processes != world or real != world:
        raise WorldSizeError(
            f"launcher started WORLD_SIZE={world} processes but accelerate sees {accelerator.num_processes} "
            f"and {real} of them train together; "
            "on CPU launch with `ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes N` "
            "or the DeepSpeed config in configs/accelerate/"
        )
    return accelerator


def uses_deepspeed(accelerator: Accelerator) -> bool:
    return accelerator.state.deepspeed_plugin is not None


def uses_zero3(accelerator: Accelerator) -> bool:
    """DeepSpeed ZeRO-3: parameters partitioned over the ranks, gathered in every forward."""
    return uses_deepspeed(accelerator) and accelerator.state.deepspeed_plugin.zero_stage == 3


def sum_over_ranks(accelerator: Accelerator, values: list[float]) -> list[float]:
    """Each position summed over ranks (every rank passes as many values, in the same order)."""
    if accelerator.num_processes == 1:
        return list(values)
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=accelerator.device)
    return [float(v) for v in accelerator.reduce(t, reduction="sum").tolist()]


def max_over_ranks(accelerator: Accelerator, value: int) -> int:
    if accelerator.num_processes == 1:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=accelerator.device)
    return int(accelerator.reduce(t, reduction="max").item())
