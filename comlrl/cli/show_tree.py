"""Render one training step's turn tree(s) from RUN_DIR/trees.jsonl as one self-contained HTML page.

    python scripts/show_tree.py runs/latest --step 3 [--tree s3r0t0] [--out tree.html]

Open the page in any browser (it fetches nothing): turns are columns, joint actions are edges labelled
with reward r and return R, pruned nodes are dashed red; click a node for its prompts and completions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from comlrl.cli import add_version
from comlrl.viz import VizError
from comlrl.viz.tree_html import render


def main(argv: list[str] | None = None) -> int:
    """Write the page and print its path; one-line error and exit 1 on a missing run, file, step or tree."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run's training.output_dir")
    parser.add_argument("--step", type=int, required=True, metavar="K", help="training step to draw (1-based)")
    parser.add_argument("--tree", default=None, metavar="ID", help="only this tree (e.g. s3r0t0); default: all")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="output file (default: RUN_DIR/tree_step<K>[_<ID>].html)")
    args = parser.parse_args(argv)
    try:
        page = render(args.run_dir, args.step, args.tree)
    except VizError as exc:
        print(f"show_tree: {exc}", file=sys.stderr)
        return 2  # bad input: the status every comlrl command gives it
    suffix = f"_{args.tree}" if args.tree else ""
    out = Path(args.out) if args.out else Path(args.run_dir) / f"tree_step{args.step}{suffix}.html"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"show_tree: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2  # bad input: the status every comlrl command gives it
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
