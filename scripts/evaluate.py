"""`comlrl-evaluate` (comlrl/cli/evaluate.py) run from a checkout: `python scripts/evaluate.py --help`."""

import sys

from comlrl.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
