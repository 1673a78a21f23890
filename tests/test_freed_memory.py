"""`comlrl.cores.keep_freed_memory`: on a glibc CPU host, memory a run frees is kept for its next use instead of
being handed back to the OS (and faulted in again, page by page, at the next backward); a user's own allocator
settings are left alone. Each case runs in a fresh interpreter: the setting holds for the process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

REALLOC = """
import resource, torch
from comlrl.cores import keep_freed_memory
kept = keep_freed_memory()
def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
weights = [torch.randn(576, 1536) for _ in range(8)]
steps = []
for step in range(3):  # what a step's forward and backward allocate and free: activations, a 108 MB gradient
    before, h, kept_for_backward = faults(), torch.randn(256, 576), []
    for w in weights:
        h = (h @ w)[:, :576].relu()
        kept_for_backward.append(torch.ones(27 * 2**20 // 8))
    gradient = torch.ones(27 * 2**20)
    del h, kept_for_backward, gradient
    steps.append(faults() - before)
print(kept, *steps)
"""


pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


def _run(env: dict[str, str]) -> tuple[bool, list[int]]:
    """(whether the setting was made, the page faults of each step)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES",
                                                                                              "LD_PRELOAD")}
    out = subprocess.run([sys.executable, "-c", REALLOC], env={**clean, **env, "CUDA_VISIBLE_DEVICES": ""},
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", [int(n) for n in out[1:]]


def test_a_later_step_reuses_the_memory_the_first_one_freed() -> None:
    kept, faults = _run({})
    assert kept and faults[0] > 40_000 and faults[-1] < faults[0] // 50, faults  # ~230 MB a step, then ~none


def test_without_it_glibc_hands_the_memory_back_and_every_step_faults_it_in_again() -> None:
    """The baseline the setting removes (a user's own MALLOC_ setting leaves glibc's default behaviour)."""
    kept, faults = _run({"MALLOC_TOP_PAD_": "0"})
    assert not kept and faults[-1] > faults[0] // 2, faults


@pytest.mark.parametrize("env", [{"MALLOC_ARENA_MAX": "4"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"},
                                 {"LD_PRELOAD": "/nonexistent/libjemalloc.so"}])
def test_a_users_own_allocator_settings_are_left_alone(env: dict[str, str]) -> None:
    kept, _ = _run(env)
    assert not kept
