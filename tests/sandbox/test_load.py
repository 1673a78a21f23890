"""Verdicts do not depend on the machine's load: the time limit counts CPU seconds of the run, the wall
clock is only a backstop (several times the limit) for runs that sleep or block, a run still runnable
there (waiting for a CPU) goes on, and a wall-clock timeout is never cached (it says more about the
machine than about the code)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sbx_helpers import check_body

from sandbox import Sandbox
from sandbox.executor import WALL_BACKSTOP_FACTOR, WALL_CAP_PER_BACKSTOP

LIMIT_S = 1.0
BUSY = len(os.sched_getaffinity(0)) + 1  # busy loops: one more than there are cores, so every core is shared
BUSY_FOR_S = 90  # each busy loop also ends by itself, should the finally below never run
TICK_S = 0.03  # /proc reports CPU time in clock ticks (10 ms), truncated per field

# Spends exactly `s` CPU seconds of its own (process_time is the process's CPU clock, not the wall clock).
BURN = ("import time\ndef f(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n"
        "        pass\n    return 1\n")


@contextmanager
def busy_loops(n: int, cpu: int | None = None) -> Iterator[list[subprocess.Popen]]:
    """`n` busy-loop processes, each in its own session (the scheduler shares a core between sessions),
    pinned to `cpu` if given; always killed on the way out."""
    loop = f"import time\nend = time.monotonic() + {BUSY_FOR_S}\nwhile time.monotonic() < end:\n    pass\n"
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", loop], start_new_session=True))
            if cpu is not None:
                os.sched_setaffinity(procs[-1].pid, {cpu})
        time.sleep(0.2)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


@pytest.fixture()
def busy_machine() -> Iterator[list[subprocess.Popen]]:
    with busy_loops(BUSY) as procs:
        yield procs


@pytest.mark.slow
def test_verdicts_on_a_busy_machine(busy_machine: list[subprocess.Popen]) -> None:
    jobs = [
        (BURN, check_body(f"assert candidate({0.8 * LIMIT_S}) == 1")),  # one call: 0.8x the limit
        (BURN, check_body(f"assert candidate({0.3 * LIMIT_S}) == 1\nassert candidate({0.3 * LIMIT_S}) == 1")),
        ("import os\ndef f():\n    os._exit(0)\n", check_body("assert candidate() == 1")),
        ("def f():\n    while True:\n        pass\n", check_body("assert candidate() == 1")),
        (BURN, check_body(f"assert candidate({0.6 * LIMIT_S}) == 1\nassert candidate({0.6 * LIMIT_S}) == 1")),
    ]
    with Sandbox(workers=2, timeout_s=LIMIT_S) as box:
        box.run("def f():\n    return 1\n", check_body("assert candidate() == 1"))  # warm both workers
        one_call, two_calls, exits, loops, too_much = box.run_many(jobs)
        assert all(p.poll() is None for p in busy_machine)  # the load was there the whole time

        # Correct code that needs 0.5-0.8x the limit in CPU passes, although the load stretched the wall
        # clock past the limit (the old wall-clock limit scored it `timeout`).
        assert one_call.status == "passed", one_call.message
        assert 0.8 * LIMIT_S - TICK_S <= one_call.cpu_s < LIMIT_S and one_call.duration_s > LIMIT_S
        assert two_calls.status == "passed", two_calls.message
        assert 0.6 * LIMIT_S - TICK_S <= two_calls.cpu_s < LIMIT_S
        assert exits.status == "crashed" and "exited with status 0" in exits.message, exits

        # A real infinite loop is still a timeout, on the CPU clock, and that verdict is cached.
        assert loops.status == "timeout" and loops.timeout_clock == "cpu", loops
        assert LIMIT_S <= loops.cpu_s < LIMIT_S + 0.5
        assert loops.duration_s < LIMIT_S * WALL_BACKSTOP_FACTOR * WALL_CAP_PER_BACKSTOP
        # CPU time adds up over the run: the second 0.6x call crosses the limit.
        assert [a.status for a in too_much.asserts] == ["passed", "timeout"], too_much
        assert too_much.timeout_clock == "cpu" and "CPU" in too_much.message
        again = box.run(*jobs[3])
        assert again.cached and again.status == "timeout"


@pytest.mark.slow
def test_a_runnable_solution_outlives_the_wall_backstop() -> None:
    # The solution and two busy loops share one core: it gets about a third of it, so 0.8x the limit of
    # CPU takes ~2.4x the limit of wall time, past a backstop of 2x. It is runnable all along (waiting for
    # the core, not sleeping), so it goes on and passes; a sleeping solution still ends at the backstop.
    limit, factor = 0.5, 2.0
    cpu = max(os.sched_getaffinity(0))
    pinned = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n" + BURN
    with busy_loops(2, cpu), Sandbox(workers=1, timeout_s=limit, cache=False, wall_backstop_factor=factor) as box:
        r = box.run(pinned, check_body(f"assert candidate({0.8 * limit}) == 1"))
        assert r.status == "passed", r.message
        assert limit * factor < r.duration_s < limit * factor * WALL_CAP_PER_BACKSTOP
        r = box.run("import time\ndef f():\n    time.sleep(30)\n", check_body("assert candidate() == 1"))
        assert r.status == "timeout" and r.timeout_clock == "wall" and "sleeping" in r.message, r.message
        assert limit * factor <= r.duration_s < limit * factor + 1.0


def test_sleep_ends_at_the_wall_backstop_and_is_not_cached() -> None:
    limit = 0.2
    backstop = limit * WALL_BACKSTOP_FACTOR
    job = ("import time\ndef f():\n    time.sleep(60)\n    return 1\n", check_body("assert candidate() == 1"))
    with Sandbox(workers=1, timeout_s=limit) as box:
        for _ in range(2):
            t0 = time.perf_counter()
            r = box.run(*job)
            elapsed = time.perf_counter() - t0
            assert r.status == "timeout" and r.timeout_clock == "wall" and not r.cached, r
            assert r.asserts[0].status == "timeout" and "wall-clock" in r.message and "sleeping" in r.message
            assert r.cpu_s < limit and backstop <= elapsed < backstop + 3.0
        assert box.stats["cache_hits"] == 0 and box.stats["executed"] == 2


def test_the_tests_own_work_counts_and_their_sleep_ends_at_the_backstop() -> None:
    limit = 0.3
    good = "def f():\n    return 1\n"
    with Sandbox(workers=1, timeout_s=limit, cache=False) as box:
        # The judge's CPU (the tests' own code) is part of the run's CPU time. On a host so loaded that the child
        # gets under a fifth of a core, the wall backstop comes first (it should: a starved run must end too);
        # then the run is tried again, up to three times, and the CPU clock must end one of them.
        looping = check_body("assert candidate() == 1\nx = 0\nwhile True:\n    x += 1\nassert x")
        for _ in range(3):
            r = box.run(good, looping)
            assert [a.status for a in r.asserts] == ["passed", "timeout"], r.message
            if r.timeout_clock == "cpu":
                break
            assert r.timeout_clock == "wall" and r.cpu_s < limit, r.message  # starved, not miscounted
        assert r.timeout_clock == "cpu", r.message
        assert limit <= r.cpu_s < limit + 0.1
        # Tests that sleep are not runnable: they end at the backstop, not at the cap.
        t0 = time.perf_counter()
        r = box.run(good, check_body("assert candidate() == 1\nimport time\ntime.sleep(30)\nassert candidate() == 1"))
        elapsed = time.perf_counter() - t0
        assert r.timeout_clock == "wall" and "while the tests' own code ran" in r.message, r.message
        assert limit * WALL_BACKSTOP_FACTOR <= elapsed < limit * WALL_BACKSTOP_FACTOR + 3.0
