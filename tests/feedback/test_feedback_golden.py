"""Golden files: every mode's prompts (and every option that changes a mode's prompt: `fb_golden.VARIANTS`)
for a passing, a failing and a syntax-error joint action, with sandbox_slice 1, -1 and 'all' (plus a
single-agent case).

Regenerate after an intended prompt change, then review the diff:

    UPDATE_GOLDEN=1 /work/venv/bin/python -m pytest tests/feedback/test_feedback_golden.py
"""

from __future__ import annotations

import os

import fb_cases as cases
import pytest
from fb_golden import (
    CASES,
    GOLDEN,
    SLICES,
    VARIANTS,
    golden_path,
    produce,
    produce_single,
    render_expert_prompt,
)

UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))


def _check(path, got: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}; create it with UPDATE_GOLDEN=1"
    assert got == path.read_text(encoding="utf-8"), f"{path} differs; if intended, regenerate with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("sandbox_slice", SLICES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_golden(variant: str, case: str, sandbox_slice: object) -> None:
    _check(golden_path(variant, case, sandbox_slice), produce(variant, case, sandbox_slice))


@pytest.mark.parametrize("variant", VARIANTS)
def test_golden_single_agent(variant: str) -> None:
    _check(GOLDEN / variant / "single_slice1.txt", produce_single(variant))


@pytest.mark.parametrize("case", CASES)
def test_golden_expert_prompt(case: str) -> None:
    """What the expert itself is asked in expert_edits mode."""
    _check(GOLDEN / "expert_prompt" / f"{case}.txt", render_expert_prompt(cases.context(case)))


def test_no_stray_golden_files() -> None:
    expected = {golden_path(v, c, s) for v in VARIANTS for c in CASES for s in SLICES}
    expected |= {GOLDEN / v / "single_slice1.txt" for v in VARIANTS}
    expected |= {GOLDEN / "expert_prompt" / f"{c}.txt" for c in CASES}
    found = set(GOLDEN.rglob("*.txt"))
    assert found <= expected, f"stale golden files: {sorted(str(p) for p in found - expected)}"
