"""Command-line entry points (`comlrl-*` console scripts; `scripts/*.py` are thin shims over them)."""
