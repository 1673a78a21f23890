"""Command-line entry points (`comlrl-*` console scripts; `scripts/*.py` are thin shims over them)."""

from __future__ import annotations

import argparse


def add_version(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--version`: the installed comlrl's version (every console script takes it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("comlrl")
    except PackageNotFoundError:  # a checkout run without installing
        installed = "unknown (not installed)"
    parser.add_argument("--version", action="version", version=f"comlrl {installed}")
    return parser
