"""The built-in easy set is correct: reference solutions pass, trivial answers fail, examples are true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import prompt_preamble
from comlrl.tasks.code.extract import extract_code, function_header
from comlrl.tasks.code.measure import canonical_code, measure_sandbox, passes
from comlrl.tasks.code.single import CodeSingleTask
from comlrl.tasks.datasets import load_easy

# Constant answers that must never pass a problem's tests (else the tests do not test anything).
STUBS = ["None", "0", "1", "-1", "''", "[]", "{}", "False", "True"]

BATCH_RUNNER = r"""
import json, sys
results = []
for program in json.load(sys.stdin):
    try:
        exec(compile(program, "<problem>", "exec"), {"__name__": "__check__"})
        results.append(True)
    except BaseException:
        results.append(False)
print(json.dumps(results))
"""


def check_program(problem: Problem, code: str) -> str:
    """A program that raises unless `code` passes all of the problem's tests (trusted code: these tests')."""
    return (f"{prompt_preamble(problem.prompt, problem.entry_point)}\n{code}\n\n{problem.test}\n\n"
            f"check({problem.entry_point})\n")


def run_batch(programs: list[str]) -> list[bool]:
    """Run trusted, test-authored programs in one child process (one fresh namespace each)."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", BATCH_RUNNER], input=json.dumps(programs), capture_output=True,
        text=True, timeout=120, env={"PATH": os.environ.get("PATH", "")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def stub(problem: Problem, value: str) -> str:
    return function_header(problem.prompt, problem.entry_point) + f"\n    return {value}\n"  # type: ignore[operator]


EASY = load_easy()


def test_every_canonical_solution_passes() -> None:
    results = run_batch([check_program(p, canonical_code(p)) for p in EASY])
    failing = [p.task_id for p, ok in zip(EASY, results, strict=True) if not ok]
    assert failing == []


def test_every_constant_answer_fails() -> None:
    pairs = [(p, v) for p in EASY for v in STUBS]
    results = run_batch([check_program(p, stub(p, v)) for p, v in pairs])
    passing = [(p.task_id, v) for (p, v), ok in zip(pairs, results, strict=True) if ok]
    assert passing == []


def test_echoing_an_argument_fails() -> None:
    """`return <first argument>` is the other cheap trick a small model finds; it must not pass."""
    programs = []
    for p in EASY:
        header = function_header(p.prompt, p.entry_point) or ""
        first_arg = header.split("(", 1)[1].split(")")[0].split(",")[0].split(":")[0].strip()
        programs.append(check_program(p, f"{header}\n    return {first_arg}\n"))
    results = run_batch(programs)
    assert [p.task_id for p, ok in zip(EASY, results, strict=True) if ok] == []


def test_docstring_examples_are_true() -> None:
    programs = []
    for p in EASY:
        lines = [line.strip() for line in p.prompt.splitlines()]
        i = next(k for k, line in enumerate(lines) if line.startswith(">>> "))
        call, expected = lines[i][4:], lines[i + 1]
        programs.append(canonical_code(p) + f"\nassert repr({call}) == {expected!r}, repr({call})\n")
    results = run_batch(programs)
    assert [p.task_id for p, ok in zip(EASY, results, strict=True) if not ok] == []


def test_canonical_answer_in_chat_form_survives_extraction() -> None:
    """A model that answers with the reference solution in a fence, plus prose and usage, gets full marks."""
    programs = []
    for p in EASY:
        reply = (
            f"Here is the function:\n```python\n{canonical_code(p)}```\nExample usage:\n"
            f"```python\nprint({p.entry_point}(1))\n```\nThis works."
        )
        code = extract_code(reply, p.entry_point, function_header(p.prompt, p.entry_point))
        programs.append(check_program(p, code))
    assert all(run_batch(programs))


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def test_measurement_scores_in_the_sandbox_and_early_exits_never_pass() -> None:
    """measure.py ran samples in its own subprocess; it now scores them as training does, in the sandbox,
    where every assert is judged: a program that ends before the asserts (exit status 0) fails."""
    p = next(q for q in EASY if q.entry_point == "add")
    right = "def add(a, b):\n    return a + b\n"
    cheats = [
        "def add(a, b):\n    return 0\nimport sys\nsys.exit(0)\n",
        "def add(a, b):\n    return 0\nimport os\nos._exit(0)\n",
        "import os\ndef add(a, b):\n    os._exit(0)\n",  # exits from inside the first assert
        "def add(a, b):\n    raise SystemExit(0)\n",
        "import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return 0\n",
        "def add(a, b):\n    while True:\n        pass\n",  # never returns: the CPU limit ends it
    ]
    with measure_sandbox() as box:
        task = CodeSingleTask(box)
        assert passes(task, p, [fenced(right), fenced(canonical_code(p)), fenced(stub(p, "0"))]) == [True, True, False]
        assert passes(task, p, [fenced(c) for c in cheats]) == [False] * len(cheats)
        assert box.stats["executed"] >= 1 + len(cheats)  # the sandbox ran them, not this process


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_model_solves_some_but_not_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A short real measurement on the first problems (loads the embedded GGUF; 1.5 CPU-minutes)."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from comlrl.tasks.code.measure import main

    os.environ["HF_HUB_OFFLINE"] = "1"
    out = tmp_path / "m.json"
    assert main(["--limit", "8", "--samples", "2", "--max-new-tokens", "96", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    summary, rows = result["summary"], result["problems"]
    assert summary["problems"] == len(rows) == 8
    assert all(r["samples"] == 2 and 0 <= r["passed"] <= 2 for r in rows)
    assert summary["solved_at_least_once"] >= 1  # add / max_of_two / is_even are solved by this model
    assert summary["sample_pass_rate"] < 1.0
    assert "Easy/0" in capsys.readouterr().out


def test_measurement_starts_no_process_of_its_own() -> None:
    import comlrl.tasks.code.measure as measure

    source = Path(measure.__file__).read_text()
    assert "subprocess" not in source and "preexec_fn" not in source and "exec(" not in source


def test_learn_easy_configs_cpu_limit_passes_every_reference_solution_and_ends_a_loop() -> None:
    """configs/learn_easy_T1.yaml lowers `sandbox.timeout_s` to 1 s so that a completion's endless loop costs 1 s
    of CPU, not 5 (a cross step scores the looping agent's completion with each of the other's: 4 runs). The
    lower limit must cost no correct answer: every reference solution passes with CPU to spare."""
    from comlrl.config.schema import load_config
    from sandbox import Sandbox
    from sandbox.testparse import parse_tests

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "learn_easy_T1.yaml").sandbox
    assert cfg.timeout_s == 1.0
    add = next(q for q in EASY if q.entry_point == "add")
    loop = "def add(a, b):\n    while True:\n        pass\n"
    with Sandbox.of(cfg) as box:
        jobs = [(canonical_code(p), parse_tests(p.test, p.entry_point, p.prompt)) for p in EASY]
        results = box.run_many([*jobs, (loop, parse_tests(add.test, add.entry_point, add.prompt))])
    *solved, looped = results
    assert [p.task_id for p, r in zip(EASY, solved, strict=True) if not r.all_passed] == []
    assert max(r.cpu_s for r in solved) < 0.25 * cfg.timeout_s
    assert (looped.status, looped.timeout_clock) == ("timeout", "cpu")
