"""What a training run promises around `comlrl.run.trainer.run`, whatever its loop looks like.

* A resume with nothing to do says so and changes nothing; one that asks for fewer steps than its checkpoint
  holds is refused (a run is not cut back). Both before anything loads.
* A run that fails before its first step leaves nothing that blocks the same command again: what it created
  in `training.output_dir` is taken back (an earlier run's outputs, a resumed run's and the user's own files
  stay). Otherwise the next attempt is refused as "already holds a run" for a config.yaml and an empty
  tensorboard/.
* A part the run depends on that fails mid-run (`RunStopped`: the rollout server died) is one line naming
  it, where the run stopped and the checkpoint that is intact.
* Ctrl-C ends with one line, the step it stopped in, the checkpoint that is intact and how to resume, and the
  shell's exit status for it (130), instead of the tracebacks of every library on the stack. A second Ctrl-C
  while the run closes its engine and sandbox exits at once with the same line. SIGTERM (what `timeout`,
  SLURM and Kubernetes send) is treated the same way, as `terminated ...` with status 143. A stop while the
  run starts its trackers is acted on once they have started (`stops_held`), so they are closed, not cut.

The state is read from what the run wrote (metrics.jsonl: one line per finished step; checkpoints/), so the
loop needs no hooks. Only rank 0 prints and takes files back, as only rank 0 writes them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from comlrl.config.schema import ConfigError, RunConfig, load_config, schema_keys
from comlrl.console import launcher_rank, plural
from comlrl.errors import RunStopped
from comlrl.run.checkpoint import checkpoint_step, latest_checkpoint, resume_point
from comlrl.run.outputs import OUTPUTS

INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
TERMINATED = 143  # 128 + SIGTERM
STOPS = {signal.SIGINT: ("interrupted", INTERRUPTED), signal.SIGTERM: ("terminated", TERMINATED)}
WRITTEN = tuple(OUTPUTS.values())  # top-level names a run writes (plus tree_step<k>.html)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: str() is the one line to print (empty on ranks > 0, which stay quiet); `status` the
    exit status the shell expects for the signal."""

    def __init__(self, line: str, status: int = INTERRUPTED) -> None:
        super().__init__(line)
        self.status = status


# What a resume must keep as the run had it, and why. The weights and optimizer in a checkpoint have the shape
# the first group of keys made; the paired before/after compares the same problems, sampled by the same policy
# settings from the same seed, which the second group fixes (the task's own section, `task.<name>`, too).
SHAPE_KEYS = ("model.name", "model.dtype", "agents.", "magrpo.num_agents", "task.name", "algorithm.name")
PAIRED_KEYS = ("dataset.", "training.eval_size", "evaluation.", "model.max_prompt_tokens", "model.max_new_tokens",
               "model.temperature", "model.top_p", "model.top_k")


def resume_conflict(saved: RunConfig, cfg: RunConfig) -> str | None:
    """The first key a resume changes that it must keep (`SHAPE_KEYS`, `PAIRED_KEYS`, the task's own section),
    as one config-error line naming it and the run's value; None when there is none."""
    before, now = dict(schema_keys(saved)), dict(schema_keys(cfg))
    task = f"task.{cfg.task.name}."
    for group, why in ((SHAPE_KEYS, "its checkpoint's weights and optimizer have the run's shape"),
                       ((*PAIRED_KEYS, task), "the held-out problems and the paired before/after are the run's")):
        for key, value in now.items():
            if any(key == k or (k.endswith(".") and key.startswith(k)) for k in group) and before.get(key) != value:
                return (f"config error: --resume {cfg.training.output_dir}: {key}={value!r} differs from the run's "
                        f"{before.get(key)!r} ({why}); resume with the run's value, or start a new run in another "
                        "training.output_dir")
    return None


def check_resume(cfg: RunConfig) -> str | None:
    """training.resume=true: ConfigError when the resume changes a key the run must keep (`resume_conflict`)
    or asks for fewer steps than the checkpoint holds; a 'nothing to do' line when the checkpoint is at
    training.steps and the final weights are written; else None (go on)."""
    t = cfg.training
    out = Path(t.output_dir)
    latest = resume_point(cfg)
    if latest is None:
        return None
    saved = out / OUTPUTS["config"]
    if saved.is_file():
        conflict = resume_conflict(load_config(saved), cfg)
        if conflict:
            raise ConfigError(conflict)
    done = checkpoint_step(latest)
    if t.steps < done:
        raise ConfigError(
            f"config error: training.steps={t.steps} is below the {plural(done, 'step')} {t.output_dir} has "
            f"trained; a run is not cut back: pass training.steps={done + 1} or more to train further, or start a "
            "new run in another training.output_dir")
    if t.steps == done and (out / "final" / "policies.json").is_file():  # else: final/ is still to be written
        return (f"nothing to do: {t.output_dir} has trained all {plural(done, 'step')} of training.steps={t.steps}; "
                f"pass training.steps={done + 1} or more to train further")
    return None


def last_step(metrics: Path) -> int:
    """The last finished step metrics.jsonl records (0: none; a line cut by a crash is skipped)."""
    steps = [0]
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            try:
                steps.append(int(json.loads(line).get("step", 0)))
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                continue
    return max(steps)


def stop_line(cfg: RunConfig, what: str = "interrupted") -> str:
    """`interrupted during step 2; checkpoint step-1 is intact; resume with --resume DIR`, from what is on
    disk (`what`: how the run ended, e.g. `stopped` when a part it depends on failed)."""
    t = cfg.training
    out = Path(t.output_dir)
    done = last_step(out / "metrics.jsonl")
    latest = latest_checkpoint(out / "checkpoints")
    if (out / "checkpoints" / f".step-{done}.tmp").exists():
        where = f"while saving checkpoint step-{done}"
    else:
        where = f"during step {done + 1}" if done < t.steps else f"after step {done}, writing the final outputs"
    if latest is not None:
        return f"{what} {where}; checkpoint step-{checkpoint_step(latest)} is intact; resume with --resume {out}"
    if done == 0 and not t.resume:
        return f"{what} {where}; nothing was kept: the same command starts the run again"
    if t.save_total_limit == 0:
        return (f"{what} {where}; this run keeps no checkpoint (training.save_total_limit=0): --resume {out} "
                "starts it again from step 0")
    return (f"{what} {where}; no checkpoint was written yet (training.save_every={t.save_every}); "
            f"--resume {out} starts it again from step 0")


def progress(cfg: RunConfig) -> tuple[int, Path | None]:
    """Where the run's folder stands: the last finished step metrics.jsonl records and the latest checkpoint."""
    out = Path(cfg.training.output_dir)
    return last_step(out / "metrics.jsonl"), latest_checkpoint(out / "checkpoints")


def failure_note(cfg: RunConfig, before: tuple[int, Path | None]) -> str:
    """For a run that failed on bad input mid-run (a reward function that raised at step 6): where it stopped and
    how to go on, `stop_line`'s words, once this run added a step or a checkpoint to its folder (`before`:
    `progress` when it started; then the same command is refused, the folder holds a run); '' otherwise (an
    error before the run moved, a config error at start included: the same command, fixed, runs again)."""
    if launcher_rank() != 0 or progress(cfg) == before:
        return ""
    return stop_line(cfg, "stopped")


class _Created:
    """What a fresh run creates in its output_dir, taken back if it fails before its first step."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.before = set(os.listdir(out)) if out.is_dir() else set()
        self.top: Path | None = None  # the outermost directory the run creates (out or an ancestor)
        p = out.absolute()
        while not p.exists():
            self.top, p = p, p.parent

    def take_back(self) -> None:
        if not self.out.is_dir() or last_step(self.out / "metrics.jsonl") or latest_checkpoint(
                self.out / "checkpoints"):
            return  # a step finished: its outputs are the run's, resume or overwrite decide about them
        for name in sorted(set(os.listdir(self.out)) - self.before):
            path = self.out / name
            if name in WRITTEN or (name.startswith("tree_step") and name.endswith(".html")):
                _remove(path)
        if self.top is not None:  # directories the run made, from the innermost up, if nothing else is in them
            for d in [self.out.absolute(), *self.out.absolute().parents]:
                if not d.is_dir() or any(d.iterdir()):
                    break
                d.rmdir()
                if d == self.top:
                    break


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C or SIGTERM inside the block is acted on when the block ends (a second one at once), for steps
    that must not be cut halfway: a stop while TensorBoard's writer started left its thread writing into the
    folder the run takes back, and the tracker without the writer it is closed through. Main thread only
    (the only one Python lets handle signals); elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if held:  # a second stop: leave now, through the handler the block replaced
            _deliver(previous[signum], signum, frame)
        held.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in STOPS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if held:
        _deliver(previous[held[0]], held[0], None)


def _deliver(handler: Any, signum: int, frame: FrameType | None) -> None:
    """Act on a held signal as its handler would have: call it, or the default (SIGINT: KeyboardInterrupt)."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL or handler is None:
        signal.raise_signal(signum)  # the default action: SIGINT's raises KeyboardInterrupt at once


@contextmanager
def taken_back_on_failure(cfg: RunConfig) -> Iterator[None]:
    """What a fresh run creates in its output_dir inside this block is taken back when the block fails before
    the run's first step (entered before anything is written: the Python API writes dataset.jsonl first)."""
    created = _Created(Path(cfg.training.output_dir)) if launcher_rank() == 0 and not cfg.training.resume else None
    try:
        yield
    except BaseException:
        if created:
            created.take_back()
        raise


def guarded_run(cfg: RunConfig, run: Callable[[RunConfig], int]) -> int:
    """`run(cfg)` with the promises of this module; raises Interrupted on Ctrl-C or SIGTERM (the caller prints
    it). Call it from the main thread, the only one Python lets install signal handlers (the CLI's)."""
    nothing = check_resume(cfg)
    if nothing:
        print(nothing)
        return 0
    main = launcher_rank() == 0
    received: list[int] = []

    def second_signal(signum: int, frame: FrameType | None) -> None:  # closing is stuck: leave now
        what, status = STOPS[signal.Signals(received[0])]
        if main:
            print(stop_line(cfg, what), file=sys.stderr, flush=True)
        os._exit(status)

    def first_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        for sig in STOPS:
            signal.signal(sig, second_signal)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, first_signal) for sig in STOPS}
    try:
        with taken_back_on_failure(cfg):
            return run(cfg)
    except KeyboardInterrupt:
        what, status = STOPS[signal.Signals(received[0])] if received else STOPS[signal.SIGINT]
        raise Interrupted(stop_line(cfg, what) if main else "", status) from None
    except RunStopped as exc:  # a part the run depends on failed: which, and where the run stands
        raise type(exc)(f"{exc}; {stop_line(cfg, 'stopped')}") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
