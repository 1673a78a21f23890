"""Default torch threads and sandbox workers: the process's share of its machine's cores, whatever `accelerate
launch` put in OMP_NUM_THREADS, and on several machines a share among this machine's processes only."""

from __future__ import annotations

import os

import pytest

from comlrl.run.components import cpu_share, sandbox_workers


@pytest.mark.parametrize("env,cores,want", [
    ({}, 2, 2),                                               # plain python on 2 cores
    ({"OMP_NUM_THREADS": "1", "WORLD_SIZE": "1"}, 2, 2),      # accelerate launch --num_processes 1
    ({"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"}, 2, 1),     # two ranks on this machine
    ({"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4"}, 8, 4),     # two machines, two ranks each
    ({"LOCAL_WORLD_SIZE": "4"}, 2, 1),                        # more ranks than cores: never 0
])
def test_threads_are_the_cores_divided_among_local_processes(monkeypatch: pytest.MonkeyPatch, env: dict,
                                                             cores: int, want: int) -> None:
    for key in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "OMP_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert cpu_share() == want


@pytest.mark.parametrize("env,cores,want", [
    ({}, 16, 16),                                              # one process
    ({"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"}, 16, 8),     # two ranks on this machine
    ({"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "16"}, 64, 8),    # 2 machines x 8 GPUs: 8 share this machine's 64
    ({"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "16"}, 4, 1),     # never 0
])
def test_sandbox_workers_share_this_machines_cores(monkeypatch: pytest.MonkeyPatch, env: dict, cores: int,
                                                   want: int) -> None:
    for key in ("LOCAL_WORLD_SIZE", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert sandbox_workers() == want
