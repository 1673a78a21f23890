"""Plot one run's metrics, or overlay several runs (e.g. the align vs cross ablation), as PNGs.

    python scripts/plot_metrics.py runs/align [runs/cross ...] [--out DIR]

Each run is one line colour in every figure:
  reward.png: what training changed, the training reward minus the untrained policy's on the same problems
      (reward_vs_start; the raw reward where under half the steps have it), and the trained-on (probe) and held-out
      problems' sampled reward at each evaluation with the paired 95% interval of the change since step 0
  reward_per_turn.png: the raw training reward per step, all turns and each turn (it follows the problems
      each step draws: not a learning curve)
  eval_pass_at_1.png: held-out pass@1, greedy and sampled (step 0 = before training)
  overview.png: reward, pruned fraction, loss and greedy eval pass@1
  pruned.png: the fraction of nodes pruned by early termination, all turns and each turn
  loss.png: the training loss
  cooperation.png: the helper-call rates of code tasks (only for runs that log them)
  signal.png: the share of generated completions that sat in a sibling group with signal, per step (only for
      runs that log it)
and summary.md: a markdown table of each run's final figures (eval pass@1: greedy, else sampled, labelled
so) and wall time (sum of step_seconds), also printed.

Default DIR: ./plots/RUN (several runs: ./plots/RUN1_vs_RUN2...), a folder of this command's own, so the
plots a run draws into RUN_DIR/plots at its end are never overwritten; --out RUN_DIR/plots redraws those.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from comlrl.cli import add_version
from comlrl.viz import VizError
from comlrl.viz.metrics_plot import default_out_dir, load_runs, plot_runs, summary_table


def main(argv: list[str] | None = None) -> int:
    """Write the plots and the table; one-line error and exit 2 on a missing run or metrics file."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs' training.output_dir")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="where the PNGs and summary.md go (default: ./plots/RUN, see above)")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else default_out_dir(args.run_dirs)
    try:
        runs = load_runs(args.run_dirs)
        paths = plot_runs(runs, out)
        table = summary_table(runs)
        listing = "\n".join(f"- `{r.name}`: {r.path.resolve()}" for r in runs)
        (out / "summary.md").write_text(f"# Runs\n\n{listing}\n\n{table}")
    except VizError as exc:
        print(f"plot_metrics: {exc}", file=sys.stderr)
        return 2  # bad input: the status every comlrl command gives it
    except OSError as exc:
        print(f"plot_metrics: cannot write to {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2  # bad input: the status every comlrl command gives it
    print(table, end="")
    print(f"wrote {', '.join(p.name for p in paths)}, summary.md to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
