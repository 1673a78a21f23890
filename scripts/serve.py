"""`comlrl-serve` (comlrl/cli/serve.py) run from a checkout: `python scripts/serve.py --help`."""

import sys

from comlrl.cli.serve import main

if __name__ == "__main__":
    sys.exit(main())
