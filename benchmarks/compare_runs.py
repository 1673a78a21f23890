"""Compare two runs' outputs for behaviour identity (issue 25): metrics.jsonl without its timing keys,
trees.jsonl and eval.jsonl line by line. Exit status 0 when identical, 1 with the first differences.

    python benchmarks/compare_runs.py BEFORE_DIR AFTER_DIR          # one run directory each
    python benchmarks/compare_runs.py BEFORE_ROOT AFTER_ROOT --all   # every run under the output of
                                                                     # benchmarks/behaviour_runs.sh
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

# wall-clock measures: they differ between any two runs
TIMING = re.compile(r"(seconds|_per_s|_s$|latency)")


def _metrics(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if not TIMING.search(k)} for r in rows]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_run(before: Path, after: Path) -> list[str]:
    """The differences between two run directories (empty: identical outside timing)."""
    problems: list[str] = []
    mb, ma = _metrics(before / "metrics.jsonl"), _metrics(after / "metrics.jsonl")
    if len(mb) != len(ma):
        problems.append(f"metrics.jsonl: {len(mb)} lines before, {len(ma)} after")
    for i, (b, a) in enumerate(zip(mb, ma, strict=False)):
        for key in sorted(set(b) | set(a)):
            if not _same(b.get(key, "<missing>"), a.get(key, "<missing>")):
                problems.append(f"metrics.jsonl line {i + 1} {key}: {b.get(key, '<missing>')!r} -> "
                                f"{a.get(key, '<missing>')!r}")
    for name in ("trees.jsonl", "eval.jsonl"):
        fb, fa = before / name, after / name
        if fb.exists() != fa.exists():
            problems.append(f"{name}: present before {fb.exists()}, after {fa.exists()}")
            continue
        if not fb.exists():
            continue
        lb, la = fb.read_text().splitlines(), fa.read_text().splitlines()
        if len(lb) != len(la):
            problems.append(f"{name}: {len(lb)} lines before, {len(la)} after")
        for i, (b, a) in enumerate(zip(lb, la, strict=False)):
            if b != a:
                problems.append(f"{name} line {i + 1} differs: {b[:160]!r} vs {a[:160]!r}")
                break
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--all", action="store_true", help="compare every run directory under the two roots")
    args = ap.parse_args(argv)
    pairs = ([(d, args.after / d.name) for d in sorted(args.before.iterdir()) if (d / "metrics.jsonl").exists()]
             if args.all else [(args.before, args.after)])
    failed = False
    for b, a in pairs:
        problems = compare_run(b, a)
        lines = sum(1 for _ in (b / "trees.jsonl").open()) if (b / "trees.jsonl").exists() else 0
        print(f"{b.name}: {'identical' if not problems else 'DIFFERENT'} (metrics.jsonl without timing keys, "
              f"trees.jsonl {lines} nodes, eval.jsonl)")
        for p in problems[:20]:
            print("  " + p)
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
