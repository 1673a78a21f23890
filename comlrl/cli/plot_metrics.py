"""Plot one run's metrics, or overlay several runs (e.g. the align vs cross ablation), as PNGs.

    python scripts/plot_metrics.py runs/align [runs/cross ...] [--out DIR]

Writes overview.png, reward.png (per turn), pruned.png (per turn), loss.png and eval_pass_at_1.png, plus
summary.md: a markdown table of each run's final figures and wall time (sum of step_seconds), also
printed. Default DIR: RUN_DIR/plots for one run, ./plots for several.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from comlrl.cli import add_version
from comlrl.viz import VizError
from comlrl.viz.metrics_plot import load_runs, plot_runs, summary_table


def main(argv: list[str] | None = None) -> int:
    """Write the plots and the table; one-line error and exit 1 on a missing run or metrics file."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs' training.output_dir")
    parser.add_argument("--out", default=None, metavar="DIR", help="where the PNGs and summary.md go")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else (Path(args.run_dirs[0]) / "plots" if len(args.run_dirs) == 1
                                           else Path("plots"))
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
