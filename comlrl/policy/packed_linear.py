"""Generation's float32 matmuls on the CPU through oneDNN, each weight packed once per version.

A decode step multiplies a handful of rows by every weight of the model. torch sends a float32 CPU matmul to MKL,
whose kernels for so few rows run far below the memory's rate on some hosts: on the EPYC host of docs/results.md
SmolLM2-135M's lm_head times 4 rows took 17.9 ms (6.3 GB/s of weights), and 2 rows took longer than 4. oneDNN,
given the weight once in its own blocked layout, runs the same float32 product in 6.7 ms (16.8 GB/s); a whole
decode step of the model at 4 rows, 89 -> 56 ms (`python benchmarks/decode_floor.py`). Its kernel is slower at 2-3
rows than at the 4 the weight is packed for (a decode step at 2 rows: 70-74 ms against 56-58), so such inputs run
padded with zero rows (the real rows' bits are the same). The precision is the same:
only the order of the sums differs, as between any two float32 kernels, so a seeded draw may pick another token
where two were within rounding of each other.

The packed copy costs one pass over the weight and its size in memory, so copies live for one rollout: made at a
weight's first no-grad forward inside `serving()`, remade when the weight changed (its version counter moved),
dropped by `release()` (the trainer's engine calls it when the rollout ends, before the update needs the memory).
Forwards with autograd or autocast on (the update), other dtypes and small weights (they sit in cache, where MKL is
as fast) take torch's own path.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

PACK_MIN_ELEMENTS = 1 << 18  # 576 x 576 and up; 576 x 192 ran 0.7-0.9x MKL's speed packed
PACK_ROWS = 4  # the row count oneDNN lays the weight out for (4 was as fast as 64 or 400); 2-3 rows run padded to it


@functools.cache
def packing_available() -> bool:
    """Whether this torch has oneDNN and the two packed-linear ops (torch's x86 CPU wheels do); asked once."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:  # lookups: they raise where an op is missing
        torch.ops.mkldnn._reorder_linear_weight.default  # noqa: B018
        torch.ops.mkldnn._linear_pointwise.default  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return True


def packable(layer: nn.Module) -> bool:
    """A plain `nn.Linear` with a float32 CPU weight big enough to gain (a subclass may quantize or shard), whose
    forward nobody replaced (accelerate's offload hooks set their own on the instance: theirs stays)."""
    if type(layer) is not nn.Linear or "forward" in vars(layer):
        return False
    w = layer.weight
    return w.dtype == torch.float32 and w.device.type == "cpu" and w.numel() >= PACK_MIN_ELEMENTS


class PackedLinears:
    """One model's packed weights and the forward that uses them while `serving()` is entered (by any number of
    threads of one model at once: the first entry installs the forwards, the last exit removes them)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._packs: dict[nn.Linear, tuple[tuple[int, int], torch.Tensor]] = {}
        self._layers: list[nn.Linear] = []
        self._users = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0 and packing_available():
                self._layers = [m for m in self.model.modules() if packable(m)]
                for layer in self._layers:
                    layer.forward = functools.partial(self._forward, layer)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    for layer in self._layers:
                        del layer.forward  # the class's forward again
                    self._layers = []

    def _forward(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or x.dtype != torch.float32 or torch.is_autocast_enabled("cpu"):
            return F.linear(x, layer.weight, layer.bias)
        w = layer.weight
        version = (w.data_ptr(), w._version)
        held = self._packs.get(layer)
        if held is None or held[0] != version:
            held = self._packs[layer] = (version, torch.ops.mkldnn._reorder_linear_weight(w.detach(), PACK_ROWS))
        rows = x.numel() // x.shape[-1]
        if 1 < rows < PACK_ROWS:  # 2-3 rows run as PACK_ROWS: the same bits, in 0.7x the time (decode_floor.py)
            flat = x.reshape(rows, x.shape[-1])
            padded = torch.cat([flat, flat.new_zeros(PACK_ROWS - rows, x.shape[-1])])
            out = torch.ops.mkldnn._linear_pointwise(padded, held[1], layer.bias, "none", [], "")
            return out[:rows].reshape(*x.shape[:-1], out.shape[-1])
        return torch.ops.mkldnn._linear_pointwise(x, held[1], layer.bias, "none", [], "")

    def held(self) -> int:
        """How many packed weights are held now."""
        return len(self._packs)

    def release(self) -> None:
        """Drop every packed copy (the next generation packs again)."""
        self._packs = {}
