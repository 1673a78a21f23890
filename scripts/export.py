"""`comlrl-export` (comlrl/cli/export.py) run from a checkout: `python scripts/export.py --help`."""

import sys

from comlrl.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
