"""`comlrl-show-tree` (comlrl/cli/show_tree.py) run from a checkout: `python scripts/show_tree.py --help`."""

import sys

from comlrl.cli.show_tree import main

if __name__ == "__main__":
    sys.exit(main())
