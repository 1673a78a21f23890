"""Evaluate trained agents: greedy decoding on the held-out split, pass@1 and mean reward per turn.

    python scripts/evaluate.py runs/align_T2_G4                  # the run's final weights
    python scripts/evaluate.py runs/align_T2_G4 --weights runs/align_T2_G4/checkpoints/step-4/weights
    python scripts/evaluate.py runs/align_T2_G4 --base            # the untrained base model
    accelerate launch scripts/evaluate.py RUN_DIR ...             # problems split across ranks
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from comlrl.config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run's output_dir (holds config.yaml and final/)")
    parser.add_argument("--weights", default=None, help="weights folder (default RUN_DIR/final)")
    parser.add_argument("--base", action="store_true", help="evaluate the base model (adapters untouched)")
    parser.add_argument("--out", default=None, help="also write the metrics as JSON to this file")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. training.eval_size=20")
    args = parser.parse_args(argv)
    run = Path(args.run_dir)
    try:
        cfg = load_config(run / "config.yaml", args.overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    weights = Path(args.weights) if args.weights else run / "final"
    if not args.base and not weights.is_dir():
        print(f"evaluate: weights folder {str(weights)!r} does not exist (train first, or pass --base)",
              file=sys.stderr)
        return 2
    from comlrl.trainer import build, evaluate

    comp = build(cfg, for_training=False)
    if not args.base:
        comp.policies.load(weights)
    try:
        result = evaluate(comp, step=0)
    finally:
        comp.task.close()
        comp.sandbox.close()
        comp.engine.close()
    if comp.accelerator.is_main_process:
        text = json.dumps(result, indent=2)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
