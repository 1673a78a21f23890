"""How often the untrained team passes code_coop *with* the helper: the positive examples RL would amplify.

Samples turn-1 joint actions of the embedded model (configs/coop_T1_G8.yaml) on the first held-out
problems and counts those whose main agent calls `aux`, uses its result, passes every test, and passes
with the helper in use. Extra `key=value` arguments override the config.

    python benchmarks/coop_untrained_rate.py --problems 16 --samples 8
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    from comlrl.console import quiet_console

    quiet_console()
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.components import build
    from comlrl.tree.rollout import TreeShape

    cfg = load_config("configs/coop_T1_G8.yaml", ["training.output_dir=/tmp/coop_rate", *args.overrides])
    comp = build(cfg, for_training=False)
    try:
        torch.manual_seed(1)
        t0 = time.perf_counter()
        roots = comp.rollout(comp.eval[: args.problems]).run(TreeShape(2, args.samples, 1, "align", None), tag="r")
        details = [d for root in roots for d in root.details]
        counts = [comp.task.outcome_counts(d) for d in details]
        print(f"{len(details)} joint actions in {time.perf_counter() - t0:.0f} s: "
              f"called {sum(c['helper_called'] for c in counts):.0f}, "
              f"used {sum(c['helper_used'] for c in counts):.0f}, "
              f"passed {sum(d.all_passed for d in details)}, "
              f"passed_with_helper {sum(c['passed_with_helper'] for c in counts):.0f}")
    finally:
        comp.sandbox.close()
        comp.engine.close()


if __name__ == "__main__":
    main()
