"""`comlrl-plot` (comlrl/cli/plot_metrics.py) run from a checkout: `python scripts/plot_metrics.py --help`."""

import sys

from comlrl.cli.plot_metrics import main

if __name__ == "__main__":
    sys.exit(main())
