"""Train N agents with tree-search MAGRPO.

    comlrl-train --config configs/align_T2_G4.yaml [key=value ...]    # one process (python scripts/train.py: the same)
    comlrl-train --resume runs/align_T2_G4 [key=value ...]             # continue a stopped run
    comlrl-train --resume runs/align_T2_G4/checkpoints/step-2          # go on from an earlier checkpoint
    accelerate launch --config_file configs/accelerate/ddp_cpu.yaml scripts/train.py --config ...  # several processes
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from comlrl.cli import add_version
from comlrl.config.checks import check_runnable
from comlrl.config.schema import ConfigError, load_config, schema_keys, to_yaml
from comlrl.errors import RunStopped


def keys_epilog() -> str:
    """The config keys by section, so --help shows what key=value can set."""
    sections: dict[str, list[str]] = {}
    for key, _ in schema_keys():
        section, rest = key.split(".", 1) if "." in key else ("top level", key)
        sections.setdefault(section, []).append(rest)
    lines = ["config keys (key=value overrides; defaults and meanings: --print-config, docs/configuration.md):"]
    lines += [textwrap.fill(", ".join(keys), width=110, initial_indent=f"  {section}.", subsequent_indent="    ")
              .replace(f"{section}.", f"{section}: ", 1) for section, keys in sections.items()]
    return "\n".join(lines)


def run_of(path: Path) -> tuple[Path, Path | None]:
    """(run folder, checkpoint or None) of what `--resume` was given: a run folder, or one of its checkpoints
    (`<run>/checkpoints/step-<k>`, told by its meta.json)."""
    if (path / "meta.json").is_file() and path.parent.name == "checkpoints":
        return path.parent.parent, path
    return path, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, epilog=keys_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    parser.add_argument("--config", default=None,
                        help="YAML config; without it the schema defaults that --print-config shows "
                             "(configs/align_T2_G4.yaml is the quick start's setup)")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help="continue the run in DIR from its latest checkpoint, with DIR/config.yaml "
                             "unless --config is given; DIR may also be one of its checkpoints, "
                             "DIR/checkpoints/step-<k>, to go on from that step (the later ones are removed)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. magrpo.joint_mode=cross")
    args = parser.parse_args(argv)
    overrides = list(args.overrides)
    config = args.config
    if args.resume:
        run_dir, checkpoint = run_of(Path(args.resume))
        overrides += [f"training.output_dir={run_dir}", "training.resume=true"]
        if checkpoint is not None:
            overrides.append(f"training.resume_from={checkpoint}")
        if config is None:
            config = run_dir / "config.yaml"
            if not config.is_file():
                print(f"error: --resume {args.resume}: {config} does not exist (not a run directory?); "
                      "give the run's config with --config", file=sys.stderr)
                return 2
    try:
        cfg = load_config(config, overrides)
        check_runnable(cfg)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    from comlrl.console import quiet_console

    quiet_console()  # before torch, transformers and vLLM are imported: some of it is read at import
    from comlrl.run.guard import Interrupted, guarded_run
    from comlrl.run.trainer import USER_ERRORS, run

    try:
        return guarded_run(cfg, run)  # Ctrl-C, early failures, a resume with nothing to do: comlrl/run/guard.py
    except USER_ERRORS as exc:  # bad input: one line naming the problem, no traceback
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(msg if "error" in msg.split(":")[0] else f"error: {msg}", file=sys.stderr)
        return 2
    except RunStopped as exc:  # a part it depends on died mid-run: which, and the checkpoint that is intact
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:  # Ctrl-C or SIGTERM: where it stopped and how to resume, in one line
        if str(exc):
            print(exc, file=sys.stderr)
        return exc.status


if __name__ == "__main__":
    sys.exit(main())
