"""Nodes of different G in one call against one call per distinct G (issue 39).

`rollout.solved_generations` gives a level nodes of two sizes, and the budgeted tree's second draw (a split
budget, since measured and removed: docs/results.md#what-did-not-work) gave each node its own extra count.
Before per-request counts, each distinct
count was its own `generate` call: a decode pass each, and a pass lasts about as long as its longest
completion whatever its batch. This times both ways on the embedded model's vLLM CPU engine, on
learn_easy_T1's first four training problems (two agents, turn-1 prompts, 128 new tokens at temperature
0.8), the same counts both ways, alternating which goes first, after one warm-up call (prompt prefixes cached):

    split  extra samples per node 3, 5, 8, 0 (three distinct counts: three calls, or one)
    solved per node 8, 8, 2, 2             (two distinct counts: two calls, or one)

    python benchmarks/mixed_draw.py            # writes benchmarks/results/mixed_draw.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, ROOT, machine  # noqa: E402

CASES = {"split": [3, 5, 8, 0], "solved": [8, 8, 2, 2]}


def per_count(engine, requests: list, counts: list[int]) -> tuple[float, int, int]:
    """One call per distinct count (the expander before per-request counts): seconds, tokens, calls."""
    t0, tokens, calls = time.perf_counter(), 0, 0
    for k in sorted(set(counts) - {0}):
        rows = engine.generate([r for r, c in zip(requests, counts, strict=True) if c == k], k)
        tokens += sum(len(s.completion_ids) for row in rows for s in row)
        calls += 1
    return time.perf_counter() - t0, tokens, calls


def one_call(engine, requests: list, counts: list[int]) -> tuple[float, int, int]:
    """Every request with its own count, in one call (the expander now)."""
    t0 = time.perf_counter()
    kept = [(r, c) for r, c in zip(requests, counts, strict=True) if c > 0]
    rows = engine.generate([r for r, _ in kept], [c for _, c in kept])
    return time.perf_counter() - t0, sum(len(s.completion_ids) for row in rows for s in row), 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4, help="timed pairs per case")
    ap.add_argument("--out", type=Path, default=RESULTS / "mixed_draw.json")
    args = ap.parse_args()
    from comlrl.console import quiet_console

    quiet_console()
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.components import build

    comp = build(load_config(ROOT / "configs" / "learn_easy_T1.yaml", ["rollout.engine=vllm"]), for_training=False)
    requests = [(a, comp.task.initial_messages(p)[a]) for p in comp.train[:4] for a in range(2)]
    torch.manual_seed(0)
    comp.engine.generate(requests, 2)  # warm-up: every prompt's prefix cached
    report = {"machine": machine(torch.get_num_threads()), "engine": type(comp.engine).__name__, "cases": {}}
    for name, node_counts in CASES.items():
        counts = [c for c in node_counts for _ in range(2)]  # per request: both agents of a node
        runs: dict[str, list] = {"per_count": [], "one_call": []}
        for i in range(args.repeats):
            order = (("per_count", per_count), ("one_call", one_call))
            for way, fn in order if i % 2 == 0 else order[::-1]:
                torch.manual_seed(i)
                runs[way].append(fn(comp.engine, requests, counts))
        row = {way: {"seconds": [round(s, 2) for s, _, _ in r], "tokens": [t for _, t, _ in r], "calls": r[0][2]}
               for way, r in runs.items()}
        med = {way: statistics.median(s for s, _, _ in r) for way, r in runs.items()}
        row["median_seconds"] = {way: round(v, 2) for way, v in med.items()}
        row["one_call_over_per_count"] = round(med["one_call"] / med["per_count"], 3)
        report["cases"][name] = {"counts_per_node": node_counts, **row}
        print(f"{name}: per node {node_counts}: {row['per_count']['calls']} calls {med['per_count']:.1f} s, "
              f"one call {med['one_call']:.1f} s (x{row['one_call_over_per_count']}); "
              f"tokens {row['per_count']['tokens']} vs {row['one_call']['tokens']}")
    comp.engine.close()
    if comp.sandbox is not None:
        comp.sandbox.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
