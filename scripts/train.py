"""`comlrl-train` (comlrl/cli/train.py) run from a checkout: `python scripts/train.py --help`."""

import sys

from comlrl.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
