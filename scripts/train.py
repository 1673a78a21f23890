"""Train N agents with tree-search MAGRPO.

    accelerate launch scripts/train.py --config configs/align_T2_G4.yaml [key=value ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from comlrl.config import ConfigError, load_config, to_yaml  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None, help="YAML config (defaults: the embedded align_T2_G4 setup)")
    parser.add_argument("--resume", default=None, metavar="DIR", help="continue the run in DIR from its latest checkpoint")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. magrpo.joint_mode=cross")
    args = parser.parse_args(argv)
    overrides = list(args.overrides)
    if args.resume:
        overrides += [f"training.output_dir={args.resume}", "training.resume=true"]
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    from comlrl.trainer import USER_ERRORS, run

    try:
        return run(cfg)
    except USER_ERRORS as exc:  # bad input: one line naming the problem, no traceback
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(msg if "error" in msg.split(":")[0] else f"error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
