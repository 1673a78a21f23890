"""The hand-built rewards of the golden cases match what the real sandbox reports for the same code.

Scores the three joint actions with `comlrl.tasks.code.reward.score_batch` (one isolated execution each) and
checks that every prompt built from the real rewards equals the golden file built from `cases.py`.
"""

from __future__ import annotations

import dataclasses

import fb_cases as cases
import pytest
from fb_golden import config, golden_path, render

from comlrl.tasks.code.extract import extract_code
from comlrl.tasks.code.reward import ScoreRequest, score_batch
from feedback import FeedbackMetrics, build_next_messages
from sandbox.executor import Sandbox, SandboxUnavailable
from sandbox.testparse import parse_tests


@pytest.fixture(scope="module")
def real_rewards():
    tests = parse_tests("\n".join(cases.ASSERTS), "sum_of_squares")
    latest = {c: cases.context(c) for c in cases_names()}
    reqs = [ScoreRequest(codes=tuple(extract_code(h[-1]) for h in ctx.history), entry_point="sum_of_squares",
                         tests=tests) for ctx in latest.values()]
    try:
        with Sandbox(workers=1, timeout_s=10.0) as sb:
            rewards = score_batch(reqs, sb)
    except SandboxUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no usable sandbox here: {exc}")
    return dict(zip(latest, rewards, strict=True))


def cases_names() -> tuple[str, ...]:
    return ("passing", "failing", "syntax")


@pytest.mark.parametrize("case", cases_names())
def test_fixture_facts_match_the_real_sandbox(real_rewards, case):
    real, fake = real_rewards[case], cases.context(case).reward
    for field in ("tests_passed", "tests_total", "helper_called", "helper_result_used", "thin_wrapper", "analyses",
                  "notes", "codes"):
        assert getattr(real, field) == getattr(fake, field), field
    assert real.total == pytest.approx(fake.total)
    assert (real.exec is None) == (fake.exec is None)
    if real.exec is not None:
        assert real.exec.asserts == fake.exec.asserts
        assert real.exec.status == fake.exec.status


@pytest.mark.parametrize("sandbox_slice", [1, -1, "all"])
@pytest.mark.parametrize("case", cases_names())
def test_prompts_from_real_rewards_equal_the_golden_files(real_rewards, case, sandbox_slice):
    cfg = config("level_feedback", sandbox_slice)
    ctx = dataclasses.replace(cases.context(case), reward=real_rewards[case])
    [out] = build_next_messages([ctx], cfg, metrics=FeedbackMetrics())
    assert render(out, ctx.role_names) == golden_path("level_feedback", case, sandbox_slice).read_text()
