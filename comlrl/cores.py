"""How this process's threads share the CPU cores with other processes (issue 36, defect 13).

torch (and the colocated vLLM CPU engine, which runs on torch's threads) uses GNU OpenMP, whose threads
spin at every barrier by default. With one thread per core that is the fastest on an idle machine, but
when another process takes a core the remaining threads spin through its time slices: the embedded
model's vLLM generation fell to 0.12-0.15x of its idle rate beside one competing single-thread process,
where about half would be fair. With passive waiting the threads sleep at barriers instead: 0.56-0.65x of
its idle rate beside the same process (3.4-4.5x the spinning rate), for about 17% less when the machine is
idle (benchmarks/vllm_contention.py, docs/results.md, issue 36).

OpenMP reads its environment once, when torch loads, so the entry points call `share_cores()` before torch
is imported; a value the user has set is kept.
"""

from __future__ import annotations

import os

SHARED_CORES_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


def share_cores() -> None:
    """Set the OpenMP environment that degrades gracefully on shared cores, unless the user has set it."""
    for key, value in SHARED_CORES_ENV.items():
        os.environ.setdefault(key, value)
