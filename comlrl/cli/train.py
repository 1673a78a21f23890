"""Train N agents with tree-search MAGRPO.

    comlrl-train --config configs/align_T2_G4.yaml [key=value ...]    # one process (python scripts/train.py: the same)
    comlrl-train --resume runs/align_T2_G4 [key=value ...]             # continue a stopped run
    comlrl-train --resume runs/align_T2_G4/checkpoints/step-2          # go on from an earlier checkpoint
    comlrl-train --config configs/align_T2_G4.yaml --check            # does it run? one tiny step, in seconds
    accelerate launch --config_file configs/accelerate/ddp_cpu.yaml scripts/train.py --config ...  # several processes
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from comlrl.cli import add_version
from comlrl.config.checks import check_runnable
from comlrl.config.schema import ConfigError, RunConfig, load_config, schema_keys, to_yaml
from comlrl.console import plural
from comlrl.cores import share_cores
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


CHECK_TOKENS = 16  # a check's completions: every part runs once on text this long


def check_overrides(cfg: RunConfig, output_dir: str) -> list[str]:
    """What makes `cfg` a one-step check (`--check`): its task, agents, tree, algorithm and feedback as they
    are; the tiny random model, one step, short completions, one sampled evaluation chain on one held-out
    and at most one probe problem, the reference engine (no vLLM start), a throw-away output folder."""
    return ["model.name=tiny-random", "agents.models=null", "training.steps=1", "training.resume=false",
            f"model.max_new_tokens={min(cfg.model.max_new_tokens, CHECK_TOKENS)}", "evaluation.samples=1",
            "evaluation.greedy=false", f"evaluation.probe_problems={min(cfg.evaluation.probe_problems, 1)}",
            "training.eval_size=1", "training.eval_every=0", "rollout.engine=hf", "logging.wandb=false",
            f"training.output_dir={output_dir}"]


def run_of(path: Path) -> tuple[Path, Path | None]:
    """(run folder, checkpoint or None) of what `--resume` was given: a run folder, or one of its checkpoints
    (`<run>/checkpoints/step-<k>`, told by its meta.json)."""
    if (path / "meta.json").is_file() and path.parent.name == "checkpoints":
        return path.parent.parent, path
    return path, None


def main(argv: list[str] | None = None) -> int:
    share_cores()  # before anything imports torch: OpenMP reads it once
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
    parser.add_argument("--check", action="store_true",
                        help="train one step of the config on the tiny random model, with short completions and "
                             "a one-chain evaluation, in a throw-away folder: whether it runs, in seconds")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. magrpo.joint_mode=cross")
    args = parser.parse_args(argv)
    overrides = list(args.overrides)
    config = args.config
    if args.check and args.resume:
        print("error: --check trains a throw-away copy of a config; it cannot --resume a run", file=sys.stderr)
        return 2
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
    scratch = tempfile.mkdtemp(prefix="comlrl-check-") if args.check else None
    try:
        try:
            cfg = load_config(config, overrides)
            if scratch:
                cfg = load_config(cfg, check_overrides(cfg, scratch))
            check_runnable(cfg)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.print_config:
            print(to_yaml(cfg), end="")
            return 0
        return _check(cfg, str(config or "the schema defaults")) if scratch else _train(cfg)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _check(cfg: RunConfig, config: str) -> int:
    """`--check`: the run, then one line saying what trained and in how long. The run's lines that point into
    its throw-away folder (outputs, plot, tree view) are left out: the folder is gone when the check ends."""
    t0 = time.perf_counter()
    scratch = str(Path(cfg.training.output_dir).resolve())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = _train(cfg)
    for line in printed.getvalue().splitlines():
        if scratch not in line and cfg.training.output_dir not in line:
            print(line)
    if status == 0:
        m = cfg.magrpo
        print(f"check passed: {config} trained 1 step of task {cfg.task.name} ({plural(m.num_agents, 'agent')}, "
              f"{plural(m.num_turns, 'turn')}, G={m.num_generations}, {m.joint_mode}) on {cfg.model.name} in "
              f"{time.perf_counter() - t0:.0f} s")
    return status


def _train(cfg: RunConfig) -> int:
    from comlrl.console import quiet_console

    quiet_console()  # before torch, transformers and vLLM are imported: some of it is read at import
    from comlrl.run.guard import Interrupted, failure_note, guarded_run, progress
    from comlrl.run.trainer import USER_ERRORS, run

    before = progress(cfg)
    try:
        return guarded_run(cfg, run)  # Ctrl-C, early failures, a resume with nothing to do: comlrl/run/guard.py
    except USER_ERRORS as exc:  # bad input: one line naming the problem, no traceback; mid-run, how to go on
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        note = failure_note(cfg, before)
        msg = msg if "error" in msg.split(":")[0] else f"error: {msg}"
        print(f"{msg}; {note}" if note else msg, file=sys.stderr)
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
