"""Evaluate trained agents the way training does (comlrl/run/evaluation.py), or compare two of them, paired.

Each problem of the held-out split (and of the run's training probe) gets one greedy chain and
`evaluation.samples` chains sampled from `evaluation.seed`, so two evaluations differ only by the weights.

    python scripts/evaluate.py runs/align_T2_G4                       # the run's final weights
    python scripts/evaluate.py runs/align_T2_G4 --weights runs/align_T2_G4/checkpoints/step-4/weights
    python scripts/evaluate.py runs/align_T2_G4 --base                 # the untrained base model
    python scripts/evaluate.py runs/align_T2_G4 --against base         # paired: base vs final weights
    python scripts/evaluate.py --records runs/a/eval.jsonl runs/b/eval.jsonl   # paired, from saved scores
    accelerate launch scripts/evaluate.py RUN_DIR ...                  # problems split across ranks

`--out FILE` writes the per-problem scores (JSON lines, as a run's eval.jsonl), which `--records` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from comlrl.cli import add_version
from comlrl.config.schema import ConfigError, load_config


def _last_evaluation(path: Path) -> list[dict[str, Any]]:
    """The records of the last evaluation in an eval.jsonl-style file."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not records:
        raise ValueError(f"{path} holds no evaluation records")
    last = max(int(r.get("step", 0)) for r in records)
    return [r for r in records if int(r.get("step", 0)) == last]


def _compare_records(before: Path, after: Path) -> int:
    from comlrl.run.paired import METHOD, METHOD_FIXED
    from comlrl.run.report import paired_lines

    for path in (before, after):
        if not path.is_file():
            print(f"evaluate: records file {str(path)!r} does not exist", file=sys.stderr)
            return 2
    try:
        a, b = _last_evaluation(before), _last_evaluation(after)
    except (ValueError, KeyError) as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    lines = paired_lines(a, b)
    if not lines:
        print("evaluate: the two files share no problems to pair (different splits or sets?)", file=sys.stderr)
        return 2
    print(f"before = {before}, after = {after} (last evaluation of each; 95% intervals, {METHOD}; "
          f"trained-on sampled figures: {METHOD_FIXED})")
    for line in lines:
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("run_dir", nargs="?", help="a run's output_dir (holds config.yaml and final/)")
    parser.add_argument("--weights", default=None, help="weights folder (default RUN_DIR/final)")
    parser.add_argument("--base", action="store_true", help="evaluate the base model (adapters untouched)")
    parser.add_argument("--against", default=None, metavar="BEFORE",
                        help="also evaluate BEFORE (a weights folder, or 'base') and print the paired difference")
    parser.add_argument("--records", nargs=2, metavar=("BEFORE", "AFTER"), default=None,
                        help="compare two saved per-problem score files (eval.jsonl or --out) without a model")
    parser.add_argument("--out", default=None, help="write the per-problem scores here (JSON lines)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. evaluation.samples=8")
    args = parser.parse_intermixed_args(argv)  # overrides may come before or after the options
    if args.records:
        return _compare_records(Path(args.records[0]), Path(args.records[1]))
    if not args.run_dir:
        parser.error("give a run directory, or --records BEFORE AFTER")
    run = Path(args.run_dir)
    try:
        cfg = load_config(run / "config.yaml", args.overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    weights = None if args.base else Path(args.weights) if args.weights else run / "final"
    before = None if args.against in (None, "base") else Path(args.against)
    for folder in (weights, before):
        if folder is not None and not folder.is_dir():
            print(f"evaluate: weights folder {str(folder)!r} does not exist (train first, or use base)",
                  file=sys.stderr)
            return 2
    from comlrl.console import quiet_console
    from comlrl.cores import share_cores

    quiet_console()  # before torch, transformers and vLLM are imported: some of it is read at import
    share_cores()
    from comlrl.run.components import build
    from comlrl.run.evaluation import Evaluator
    from comlrl.run.report import category_lines, paired_lines
    from comlrl.run.run_parts import evaluation_summary

    comp = build(cfg, for_training=False)
    if sys.stderr.isatty() and comp.accelerator.is_main_process:  # the phase on one line, as training shows it
        comp.phase = lambda text: print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)
    try:
        evaluator = Evaluator(comp)
        before_records: list[dict[str, Any]] = []
        if args.against is not None:
            if before is not None:
                comp.policies.load(before)
                comp.engine.weights_changed()
            _, before_records = evaluator.run(0)
        if weights is not None:
            comp.policies.load(weights)
            comp.engine.weights_changed()
        metrics, records = evaluator.run(0)
    finally:
        comp.task.close()
        if comp.sandbox is not None:
            comp.sandbox.close()
        comp.engine.close()
    if not comp.accelerator.is_main_process:
        return 0
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    print(f"{weights or 'base model'}: {evaluation_summary(metrics)} ({metrics['eval/seconds']:.0f} s)")
    for line in category_lines(records):
        print(line)
    if before_records:
        print(f"before = {args.against}, after = {weights or 'base model'}:")
        for line in paired_lines(before_records, records):
            print(line)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in records))
        print(f"per-problem scores: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
