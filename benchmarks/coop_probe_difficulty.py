"""Why a code_coop run's training probe can stay at zero while its held-out set rises (issue 36, defect 14).

Reads a finished run (eval.jsonl, trees.jsonl with each tree's problem id) and the generated problems, and
prints, per probe problem: its template (combiner/rule), how its sampled chains did before and after, and
how its training trees did in the steps that drew it; then the held-out pass rate after training per
template, the chance that eight problems drawn like the held-out ones all end at zero, and that chance with
each probe problem's own template's rate.

    python benchmarks/coop_probe_difficulty.py RUN_DIR
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(run: Path) -> int:
    from comlrl.config.schema import load_config
    from comlrl.tasks.code.coop_problems import generate_coop_problems

    cfg = load_config(run / "config.yaml")
    problems = {p.task_id: p for p in generate_coop_problems(cfg.dataset.max_problems or 400, cfg.dataset.seed)}
    template = {tid: p.template for tid, p in problems.items()}
    records = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    last = max(r["step"] for r in records)
    at = {(r["step"], r["set"], r["task_id"]): r for r in records}
    trained: dict[str, list[float]] = defaultdict(list)  # per problem: its turn-1 actions passed with the helper
    for line in (run / "trees.jsonl").read_text().splitlines():
        node = json.loads(line)
        if node["turn"] == 1 and node.get("problem"):
            # passed with the helper: every test passed and the main agent's code used aux
            trained[node["problem"]] += [float(bool(d and d["all_passed"] and d["components"]["helper_used"] > 0))
                                         for d in node["reward_details"]]
    held = [r for r in records if r["set"] == "heldout" and r["step"] == last]
    per_template: dict[str, list[float]] = defaultdict(list)
    for r in held:
        per_template[template[r["task_id"]]].append(r["sampled_pass"])
    print(f"probe problems (step 0 -> step {last}; sampled pass, passed_with_helper rate of the chains' actions):")
    chance_matched = 1.0
    for (step, s, tid), r in sorted(at.items(), key=lambda kv: kv[0][2]):
        if s != "probe" or step != 0:
            continue
        after = at[(last, "probe", tid)]
        rates = per_template.get(template[tid], [])
        zero_share = sum(1 for x in rates if x == 0) / len(rates) if rates else math.nan
        chance_matched *= zero_share if rates else 1.0
        print(f"  {tid:10s} {template[tid]:28s} sampled {r['sampled_pass']:.2f} -> {after['sampled_pass']:.2f}; "
              f"in training {sum(trained[tid]):.0f} of {len(trained[tid])} actions passed with the helper; "
              f"held-out of its template after: {len(rates)} problems, {zero_share:.0%} at zero")
    zero = sum(1 for r in held if r["sampled_pass"] == 0) / len(held)
    print(f"held-out problems at zero after training: {zero:.0%} of {len(held)}; eight such all at zero: "
          f"{zero ** 8:.3f}; with each probe problem's template's share: {chance_matched:.3f}")
    print("held-out sampled pass after training, by template:")
    for name, rates in sorted(per_template.items(), key=lambda kv: -sum(kv[1]) / len(kv[1])):
        print(f"  {name:28s} {sum(rates) / len(rates):.2f} over {len(rates)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
