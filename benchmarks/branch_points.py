"""Where `rollout.branch` would cut the embedded model's completions, before any training: for each surprisal
threshold, the share of completions cut, how much of a completion its prefix keeps, and what K continuations
would add per trunk (decoded tokens, trained tokens). Samples one rollout of a config's training problems with
its engine (vllm for learn_easy_T1: the cut reads the engine's log-probs). Extra `key=value` arguments override
the config.

    python benchmarks/branch_points.py --config configs/learn_easy_T1.yaml --problems 8
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/learn_easy_T1.yaml")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--thresholds", type=float, nargs="*", default=[1.0, 2.0, 3.0, 4.0, 5.0])
    ap.add_argument("--min-prefix", type=int, nargs="*", default=[1, 8, 16])
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    from comlrl.console import quiet_console

    quiet_console()
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.components import build
    from comlrl.tree.branching import BranchShape, branch_point
    from comlrl.tree.rollout import TreeShape

    cfg = load_config(args.config, ["training.output_dir=/tmp/branch_points", *args.overrides])
    m = cfg.magrpo
    comp = build(cfg, for_training=False)
    try:
        torch.manual_seed(cfg.training.seed)
        t0 = time.perf_counter()
        problems = comp.train[: args.problems]
        roots = comp.rollout(problems).run(TreeShape(m.num_agents, m.num_generations, 1, "align", None), tag="b")
        samples = [s for root in roots for row in root.completions for s in row]
        print(f"{len(samples)} completions of {len(problems)} problems in {time.perf_counter() - t0:.0f} s "
              f"(engine {comp.engine.name}); mean length {statistics.mean(len(s.completion_ids) for s in samples):.1f}"
              " tokens")
        if any(s.logprobs is None for s in samples):
            raise SystemExit("the engine gave no log-probs: run with rollout.engine=vllm")
        print("| surprisal (nats) | min_prefix | completions cut | prefix / completion (cut ones) "
              "| one continuation's tokens / a trunk's |")
        print("|---|---|---|---|---|")
        for low in args.min_prefix:
            for t in args.thresholds:
                shape = BranchShape(1, t, low)
                cuts = [(s, branch_point(s.completion_ids, s.logprobs, shape)) for s in samples]
                cut = [(s, p) for s, p in cuts if p is not None]
                kept = statistics.mean(p / len(s.completion_ids) for s, p in cut) if cut else 0.0
                rest = sum(len(s.completion_ids) - p for s, p in cut) / sum(len(s.completion_ids) for s in samples)
                print(f"| {t:g} | {low} | {len(cut) / len(samples):.2f} | {kept:.2f} | {rest:.2f} |")
    finally:
        if comp.sandbox is not None:
            comp.sandbox.close()
        comp.engine.close()


if __name__ == "__main__":
    main()
