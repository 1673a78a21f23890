"""How this process's threads share the CPU cores with other processes (issue 36, defect 13).

torch (and the colocated vLLM CPU engine, which runs on torch's threads) uses GNU OpenMP, whose threads
spin at every barrier by default. With one thread per core that is the fastest on an idle machine, but
when another process takes a core the remaining threads spin through its time slices: the embedded
model's vLLM generation fell to 0.12-0.15x of its idle rate beside one competing single-thread process,
where about half would be fair. A short spin before a thread sleeps (`GOMP_SPINCOUNT=10000`, against
300000 by default) kept 0.37-0.46x (2.2-3.4x the default's rate) for 13% less idle generation, and the quick
start's evaluation took 129 s against 112 s. Sleeping at once (`OMP_WAIT_POLICY=PASSIVE`) kept 0.56-0.65x
but took 157 s idle (benchmarks/vllm_contention.py, docs/results.md, issue 36): the short spin is the default.

OpenMP reads its environment once, when torch loads, so the entry points call `share_cores()` before torch
is imported; a user who set GOMP_SPINCOUNT or OMP_WAIT_POLICY keeps their choice.

Memory, for a run on the CPU: `keep_freed_memory()`.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

SPIN_COUNT = "10000"  # GNU OpenMP's busy-wait iterations at a barrier before the thread sleeps
OWN_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")  # a user who set either chose the waiting


def share_cores() -> None:
    """Set the short OpenMP spin that degrades gracefully on shared cores, unless the user chose the waiting
    (GOMP_SPINCOUNT set would also override an OMP_WAIT_POLICY of theirs)."""
    if not any(os.environ.get(key) for key in OWN_SETTINGS):
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT


# glibc's mallopt parameters (malloc.h), and the settings a user who chose their allocator's behaviour has made
M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8
OWN_ALLOCATOR = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                 "MALLOC_TOP_PAD_", "GLIBC_TUNABLES", "LD_PRELOAD")


def keep_freed_memory() -> bool:
    """On a glibc host, keep the memory the process frees for its next use, as a caching allocator does, instead
    of giving it back to the OS: one arena for every thread, no block of its own mapping, no trim. A run on the
    CPU calls it (`comlrl.run.components.build`, before the models load and the lanes' threads start).
    What it is for: every backward of a full-weight model allocates and frees blocks of the embedding's size
    (108 MB for SmolLM2-135M), which glibc maps and unmaps each time, so the next step faults them in page by
    page again; in the lanes' threads even the smaller ones (a thread's arena hands its heap back). A CoMLRL-style
    script faulted 4.9 M pages (20 GB, 21 s of system time) in 65 s; with this 1.5 M and 10 s, 60 s
    (benchmarks/compat_speed.py). The process keeps its peak memory until it exits. Skipped where the user set
    their allocator (MALLOC_* or GLIBC_TUNABLES, or a preloaded allocator); returns whether it was set."""
    if platform.libc_ver()[0] != "glibc" or any(os.environ.get(key) for key in OWN_ALLOCATOR):
        return False
    libc = ctypes.CDLL(None)  # the C library this process runs on
    return all(libc.mallopt(param, value) == 1
               for param, value in ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2**31 - 1)))


def side_by_side(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each call's result, in order: the calls in threads of one torch thread each, as many at once as torch had
    threads (torch's thread count is restored after). What it is for: work on a small model bound by one core
    (a 135M decode step, a forward and backward of a few hundred tokens) runs on two cores in about the time
    of one, where two threads inside each call gain less (benchmarks/compat_speed.py)."""
    import torch  # after share_cores: OpenMP reads its settings when torch loads

    threads = torch.get_num_threads()
    if threads < 2:
        return [call() for call in calls]
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=min(threads, len(calls))) as pool:
            return list(pool.map(lambda call: call(), calls))
    finally:
        torch.set_num_threads(threads)
