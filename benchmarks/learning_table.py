"""One row per run: training minutes, the held-out figure before and after, its paired change with the 95%
interval, and the change per training minute (what "learns more per minute" compares).

    python benchmarks/learning_table.py RUN_DIR [RUN_DIR ...] [--key sampled/pass_at_1]

`--key` names the figure under `eval/` (default `pass_at_1`: a game's greedy win rate; `sampled/pass_at_1`: its
sampled win rate; `sampled/reward_mean`: the mean reward per round, a team's joint outcome with score_key).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def row(run: Path, key: str) -> dict[str, float | str]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    first, last = lines[0], lines[-1]
    minutes = sum(r.get("step_seconds", 0.0) for r in lines) / 60
    stem = f"eval/{key}"
    out: dict[str, float | str] = {"run": run.name, "steps": last["step"], "train_min": round(minutes, 1),
                                   "before": first.get(stem, float("nan")), "after": last.get(stem, float("nan"))}
    for part in ("delta", "delta_lo", "delta_hi"):
        out[part] = last.get(f"{stem}_{part}", float("nan"))
    out["delta_per_min"] = float(out["delta"]) / minutes if minutes else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--key", default="pass_at_1")
    args = ap.parse_args()
    print(f"| run | steps | training min | {args.key} before | after | change [95%] | change per min |")
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        r = row(run, args.key)
        print(f"| {r['run']} | {r['steps']} | {r['train_min']} | {float(r['before']):.3f} | {float(r['after']):.3f} | "
              f"{float(r['delta']):+.3f} [{float(r['delta_lo']):+.3f}, {float(r['delta_hi']):+.3f}] | "
              f"{float(r['delta_per_min']):+.4f} |")


if __name__ == "__main__":
    main()
