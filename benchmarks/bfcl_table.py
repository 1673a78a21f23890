"""BFCL accuracy per category from an evaluation's per-problem scores (a run's eval.jsonl, or the `--out` file
of `comlrl-evaluate`): entries, greedy and sampled accuracy by BFCL's own pipeline, and the share of sampled
replies BFCL's decoder reads (`decoded`) beside the share the lenient decoder finds a call in
(`decoded_lenient`, never accuracy). The last evaluation in the file is read.

    comlrl-evaluate RUN --base --out /tmp/bfcl_base.jsonl      # RUN/config.yaml: the categories to table
    python benchmarks/bfcl_table.py /tmp/bfcl_base.jsonl
    python benchmarks/bfcl_table.py --curve RUN/metrics.jsonl  # what moves first in training: per 8 steps, the
                                                               # replies BFCL reads, the lenient rate, the pass
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def table(records: list[dict]) -> list[str]:
    """The markdown table's lines, one row per category in the order first seen."""
    last = max(int(r.get("step", 0)) for r in records)
    rows: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if int(r.get("step", 0)) == last and r.get("set") == "heldout":
            rows[r.get("category") or "all"].append(r)
    out = ["| category | entries | greedy accuracy | sampled accuracy | BFCL's decoder reads a call | the lenient "
           "decoder finds one |", "|---|---|---|---|---|---|"]
    for category, rs in rows.items():
        greedy = [float(r["greedy_pass"]) for r in rs if r.get("greedy_pass") is not None]
        sampled = [float(r["sampled_pass"]) for r in rs if r.get("sampled_pass") is not None]
        decoded = [float((r.get("outcomes") or {}).get("decoded", 0.0)) for r in rs]
        lenient = [float((r.get("outcomes") or {}).get("decoded_lenient", 0.0)) for r in rs]
        g = f"{int(sum(greedy))}/{len(greedy)} ({100 * sum(greedy) / len(greedy):.1f}%)" if greedy else "-"
        s = f"{100 * sum(sampled) / len(sampled):.1f}%" if sampled else "-"
        out.append(f"| {category} | {len(rs)} | {g} | {s} | {100 * sum(decoded) / len(rs):.0f}% | "
                   f"{100 * sum(lenient) / len(rs):.0f}% |")
    return out


def curve(lines: list[dict], width: int = 8) -> list[str]:
    """Training steps in buckets of `width`: the mean share of replies BFCL's decoder reads, the lenient rate
    and the pass rate of the sampled joint actions (metrics.jsonl's `decoded`, `decoded_lenient`,
    `turn_1/pass_rate`)."""
    steps = [m for m in lines if "step_seconds" in m and "decoded" in m]
    out = ["| steps | BFCL's decoder reads a call | the lenient decoder finds one | BFCL pass |", "|---|---|---|---|"]
    for i in range(0, len(steps), width):
        part = steps[i:i + width]

        def mean(key: str, rows: list[dict] = part) -> float:
            return 100 * sum(float(m.get(key, 0.0)) for m in rows) / len(rows)

        out.append(f"| {part[0]['step']}-{part[-1]['step']} | {mean('decoded'):.0f}% | {mean('decoded_lenient'):.0f}% "
                   f"| {mean('turn_1/pass_rate'):.1f}% |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=Path)
    ap.add_argument("--curve", action="store_true", help="RECORDS is a metrics.jsonl: the training curve")
    args = ap.parse_args()
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    print("\n".join(curve(records) if args.curve else table(records)))


if __name__ == "__main__":
    main()
