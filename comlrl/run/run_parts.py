"""The run's own parts on its callback list (comlrl/run/callbacks.py): the evaluation, the files it writes, the
checkpoints with the stops callbacks ask for, and the progress on the console. `run()` (comlrl/run/trainer.py)
only trains steps and hands each finished one to them; they act in that order, each after the users' hooks of
the same moment, so a callback sees a step's metrics before its evaluation, and its log line once written.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelerate.utils import gather_object
from tqdm.contrib.logging import logging_redirect_tqdm

from comlrl.config.schema import RunConfig
from comlrl.console import plural
from comlrl.run.callbacks import CallbackList
from comlrl.run.checkpoint import prune_checkpoints, save_checkpoint
from comlrl.run.evaluation import Evaluator
from comlrl.run.guard import stops_held
from comlrl.run.outputs import OUTPUTS, RunWriter, read_run_lines
from comlrl.run.run_state import FinishedStep

if TYPE_CHECKING:
    from comlrl.run.components import Components

NAN = float("nan")
log = logging.getLogger("comlrl")


class RunPart:
    """One part of the run (`comlrl.run.callbacks.Part`): what it does before training and with each finished
    step, and what it closes; nothing by default."""

    def before_training(self, calls: CallbackList) -> None:
        """After every callback's train_begin: e.g. the evaluation of the untrained policy."""

    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None:
        """After the callbacks' step_end and the stop they agreed on."""

    def close(self) -> None:
        """At the end of the run, also a failed one."""


class Outputs(RunPart):
    """metrics.jsonl, trees.jsonl, eval.jsonl and the trackers, on the main process (started with stops held:
    a SIGTERM while the trackers start is acted on once they have, so closing them finishes them)."""

    def __init__(self, cfg: RunConfig, comp: Components, start: int) -> None:
        self.acc = comp.accelerator
        self.writer: RunWriter | None = None
        if self.acc.is_main_process:
            with stops_held():
                self.writer = RunWriter(cfg, self.acc, resume_step=start)

    def write(self, line: dict[str, Any], records: list[Any], eval_records: list[Any], calls: CallbackList) -> None:
        if self.writer:
            self.writer.log(line)
            self.writer.write_trees(records)
            self.writer.write_evals(eval_records)
        calls.logged(line)

    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None:
        gathered = gather_object(step.records) if self.acc.num_processes > 1 else step.records
        self.write(step.metrics, gathered, step.eval_records, calls)


class Evaluation(RunPart):
    """The paired evaluation: before training (a fresh run), every `training.eval_every` steps and at the last."""

    def __init__(self, cfg: RunConfig, comp: Components, start: int, outputs: Outputs) -> None:
        self.every, self.start, self.outputs = cfg.training.eval_every, start, outputs
        self.evaluator = Evaluator(comp)
        if start > 0:
            self.evaluator.restore(read_run_lines(Path(cfg.training.output_dir), "eval", start))

    def before_training(self, calls: CallbackList) -> None:
        if self.start > 0 or not self.evaluator.enabled:
            return
        main = self.evaluator.c.accelerator.is_main_process
        if main:  # minutes without output, explained
            log.info("evaluating the untrained policy: %s",
                     evaluation_plan(self.evaluator.sets, self.evaluator.greedy, self.evaluator.samples))
        ev, records = self.evaluator.run(0)
        self.write_episodes(0)
        if main:
            log.info("before training: %s (%.0f s)", evaluation_summary(ev), ev["eval/seconds"])
        self.outputs.write({"step": 0, **ev}, [], records, calls)
        calls.evaluate(ev)

    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None:
        if self.evaluator.enabled and (step.last or (self.every and step.done % self.every == 0)):
            ev, step.eval_records = self.evaluator.run(step.done)
            step.metrics.update(ev)
            self.write_episodes(step.done)
            calls.evaluate(ev)

    def write_episodes(self, step: int, keep: int = 8) -> None:
        """games.txt: the first `keep` greedy episodes of this (the latest) evaluation, where the task's rewards
        carry a transcript (the main process's share)."""
        episodes = self.evaluator.episodes[:keep]
        if episodes and self.evaluator.c.accelerator.is_main_process and self.outputs.writer is not None:
            path = self.outputs.writer.dir / OUTPUTS["games"]
            path.write_text(f"# the greedy games of the evaluation after step {step}\n\n" + "\n".join(episodes))


class Checkpoints(RunPart):
    """`checkpoints/step-<k>/` every `training.save_every` steps and at the last (none with save_total_limit 0),
    the newest save_total_limit kept; a stop a callback asks for after step_end ends the run once its step is
    saved. `agree`: a stop asked on any rank, on every rank."""

    def __init__(self, cfg: RunConfig, comp: Components, agree: Callable[[bool], bool]) -> None:
        self.cfg, self.comp, self.agree = cfg.training, comp, agree
        self.root = Path(cfg.training.output_dir) / "checkpoints"

    def save(self, done: int, calls: CallbackList) -> None:
        if self.cfg.save_total_limit == 0:  # a run that keeps no checkpoint writes none (the final weights only)
            return
        path = save_checkpoint(self.comp.trained(), done, self.root)
        if self.comp.accelerator.is_main_process:
            prune_checkpoints(self.root, self.cfg.save_total_limit)
        calls.save(path)

    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None:
        saved = step.last or bool(self.cfg.save_every and step.done % self.cfg.save_every == 0)
        if saved:
            self.save(step.done, calls)
        step.stop_after = not step.asked and calls.stop_asked(self.agree)  # from on_evaluate / on_log / on_save
        if step.stop_after and not saved:
            self.save(step.done, calls)


class Progress(RunPart):
    """A bar on a terminal (the phase on the left, the last step's own numbers on the right); into a log file
    (stderr not a terminal) one line per step instead of \\r frames; nothing with logging.progress_bar off."""

    def __init__(self, cfg: RunConfig, comp: Components, start: int) -> None:
        self.total, self.turns, self.headline = cfg.training.steps, cfg.magrpo.num_turns, comp.task.headline_outcome
        shown = comp.accelerator.is_main_process and cfg.logging.progress_bar
        self.lines = shown and not sys.stderr.isatty()
        self.bar: Any = None
        self.redirect = contextlib.ExitStack()
        if shown and not self.lines:
            self.bar = progress_bar(self.total, start)
            comp.phase = lambda text: self.bar.set_description_str(text, refresh=True)
            self.redirect.enter_context(logging_redirect_tqdm())  # log lines above the bar, each on its own line

    def finish_step(self, step: FinishedStep, calls: CallbackList) -> None:
        numbers = progress_numbers(step.metrics, self.turns, self.headline)
        if self.lines:
            log.info("step %d/%d: %s", step.done, self.total, ", ".join(f"{k}={v}" for k, v in numbers.items()))
        if self.bar:
            self.bar.set_description_str("trained", refresh=False)
            self.bar.set_postfix(numbers, refresh=False)
            self.bar.n = step.done  # the count and the numbers of the same step, in one frame
            if not (step.last or step.stop_after):
                self.bar.refresh()  # the last frame is drawn once, by close() (drawn here too, it showed twice)

    def close(self) -> None:
        if self.bar:
            self.bar.close()
        self.redirect.close()


def progress_bar(total: int, start: int) -> Any:
    """The run's bar: no rate of its own, since tqdm's would count the evaluations in."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc="starting", unit="step", dynamic_ncols=True,
                bar_format="{desc} | step {n_fmt}/{total_fmt} [{elapsed}{postfix}]")


def progress_numbers(metrics: dict[str, float], num_turns: int, headline: tuple[str, str] | None = None
                     ) -> dict[str, str]:
    """The progress bar's numbers: the step just finished (not a running average); `headline` is the task's
    (label, outcome) to show beside the reward (`Task.headline_outcome`)."""
    if "atropos/groups" in metrics:  # a step on Atropos environments' groups: their scores' mean
        return {"score": f"{metrics['reward_mean']:.2f}", "loss": f"{metrics['loss']:.3f}",
                "s_step": f"{metrics['step_seconds']:.0f}"}
    if "reward_mean" not in metrics:  # an offline DPO step: no rollout
        return {"loss": f"{metrics['loss']:.3f}", "s_step": f"{metrics['step_seconds']:.0f}"}
    out = {"reward": f"{metrics['reward_mean']:.2f}"}
    reached = [t for t in range(num_turns, 0, -1) if not math.isnan(metrics.get(f"turn_{t}/pass_rate", NAN))]
    if reached:  # the deepest turn this step reached (every node, or every game, may have stopped before the last)
        out["pass"] = f"{metrics[f'turn_{reached[0]}/pass_rate']:.2f}"
    if headline is not None and headline[1] in metrics:
        out[headline[0]] = f"{metrics[headline[1]]:.2f}"
    if "reward_vs_start" in metrics:
        out["vs_start"] = f"{metrics['reward_vs_start']:+.2f}"
    if "eval/pass_at_1" in metrics:
        out["eval"] = f"{metrics['eval/pass_at_1']:.3f}"
    out["tok_s"] = f"{metrics['tokens_per_s']:.0f}"
    out["s_step"] = f"{metrics['step_seconds']:.0f}"
    return out


def evaluation_plan(sets: dict[str, list[Any]], greedy: bool, samples: int) -> str:
    """What an evaluation will score (an `Evaluator`'s sets, greedy flag and sample count), in words."""
    chains = (["1 greedy"] if greedy else []) + ([f"{samples} sampled"] if samples else [])
    chain = "chain" if chains in (["1 greedy"], ["1 sampled"]) else "chains"
    return "; ".join(f"{plural(len(sets[name]), f'{label} problem')} ({' + '.join(chains)} {chain} each)"
                     for name, label in (("heldout", "held-out"), ("probe", "training-probe")) if sets[name])


def evaluation_summary(ev: dict[str, float]) -> str:
    """One line of an evaluation's headline figures (those present)."""
    parts = []
    if "eval/problems" in ev:
        bits = []
        if "eval/pass_at_1" in ev:
            bits.append(f"greedy {ev['eval/pass_at_1']:.3f}")
        if "eval/sampled/pass_at_1" in ev:
            bits.append(f"sampled {ev['eval/sampled/pass_at_1']:.3f}")
        parts.append(f"held-out pass@1 {', '.join(bits)} of {plural(int(ev['eval/problems']), 'problem')}")
    if "eval/probe/sampled/reward_mean" in ev:
        parts.append(f"training probe sampled reward {ev['eval/probe/sampled/reward_mean']:.3f} "
                     f"of {plural(int(ev['eval/probe/problems']), 'problem')}")
    return "; ".join(parts)
