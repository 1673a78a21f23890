"""Command line: run one solution against its tests with the trainer's isolation, for people.

    python -m sandbox run SOLUTION.py --tests TESTS.py [--entry-point NAME] [--slice N] [--json]
    python -m sandbox info

Exit status 0 only when every (selected) assert passed.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from .executor import Sandbox
from .isolation import LEVELS, detect_isolation, pick_python
from .testparse import normalize_slice, parse_tests

_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERR ", "timeout": "TIME", "not_run": "SKIP"}


def _guess_entry_point(code: str) -> str | None:
    """The last top-level function of the solution (HumanEval puts helpers first)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    return names[-1] if names else None


def _slice_arg(text: str) -> int | None:
    try:
        return normalize_slice(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _run(args: argparse.Namespace) -> int:
    code = Path(args.solution).read_text()
    test_code = Path(args.tests).read_text()
    entry = args.entry_point or _guess_entry_point(code)
    tests = parse_tests(test_code, entry)
    if args.slice is not None:
        tests = tests.sliced(args.slice)
    with Sandbox(workers=1, timeout_s=args.timeout, memory_mb=args.memory_mb, isolation=args.isolation,
                 cache=False) as sb:
        result = sb.run(code, tests)
    if args.json:
        d = result.to_dict()
        d["entry_point"] = entry
        print(json.dumps(d, indent=2))
    else:
        print(f"isolation: {result.isolation}   entry point: {entry}   status: {result.status}   "
              f"duration: {result.duration_s:.3f}s   cpu: {result.cpu_s:.3f}s")
        if result.message:
            print(f"message: {result.message}")
        for a in result.asserts:
            first = a.source.strip().splitlines()[0] if a.source.strip() else ""
            more = " ..." if len(a.source.strip().splitlines()) > 1 else ""
            print(f"  [{_MARK.get(a.status, a.status)}] #{a.index}: {first}{more}")
            if a.status != "passed" and (a.error_type or a.message):
                print(f"         {a.error_type or ''}{': ' if a.error_type and a.message else ''}{a.message}")
        if result.syntax_error:
            print(f"syntax error: {result.syntax_error}")
        if result.stdout:
            print("--- stdout (capped) ---\n" + result.stdout.rstrip())
        if result.stderr:
            print("--- stderr (capped) ---\n" + result.stderr.rstrip())
        print(f"{result.passed}/{result.total} passed")
    return 0 if result.all_passed else 1


def _info(args: argparse.Namespace) -> int:
    python = pick_python(None)
    print(json.dumps({"python": python, "isolation": detect_isolation(args.isolation, python)}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run SOLUTION.py against TESTS.py and print per-assert results")
    run.add_argument("solution")
    run.add_argument("--tests", required=True, help="HumanEval-style check(candidate) or plain asserts")
    run.add_argument("--entry-point", help="function under test (default: last top-level def)")
    run.add_argument("--slice", type=_slice_arg, default=None,
                     help="1 = first assert, n > 0 first n, n < 0 last |n|, 0 or 'all' = all (default all)")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--timeout", type=float, default=5.0,
                     help="CPU seconds for the whole run (default 5; the wall clock ends it at 5x that)")
    run.add_argument("--memory-mb", type=int, default=512)
    run.add_argument("--isolation", default="auto", choices=("auto", *LEVELS))
    run.set_defaults(func=_run)
    info = sub.add_parser("info", help="print the interpreter and isolation level in use")
    info.add_argument("--isolation", default="auto", choices=("auto", *LEVELS))
    info.set_defaults(func=_info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
