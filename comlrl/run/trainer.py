"""The MAGRPO training loop: rollout a batch of turn trees, back up returns, one optimizer step.

Works under plain `python`, `accelerate launch` (DDP over gloo on CPU) and DeepSpeed ZeRO. Each rank
expands different problems; metrics are summed over ranks; only rank 0 writes files. A run is built by
`comlrl.run.components.build`; the optimizer step from the trees is `comlrl.learn.update.train_on_trees`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from comlrl.config.schema import ConfigError, RunConfig
from comlrl.console import plural, quiet_console
from comlrl.learn.advantages import AdvantageStats
from comlrl.learn.learner import WorldSizeError, sum_over_ranks
from comlrl.learn.update import UpdateStats, train_on_trees
from comlrl.run.callbacks import CallbackList, TimeBudget, TrainerState
from comlrl.run.checkpoint import (
    checkpoint_step,
    drop_after,
    load_checkpoint,
    resume_point,
)
from comlrl.run.components import Components, build
from comlrl.run.guard import stops_held
from comlrl.run.metrics import DrawSums, StepSums, leaves, mean_root_returns, turn_sums
from comlrl.run.outputs import (
    RUN_OUTPUTS,
    check_output_dir,
    close_trackers,
    make_trackers,
    read_run_lines,
)
from comlrl.run.problem_draw import step_problems
from comlrl.run.report import write_report
from comlrl.run.run_parts import Checkpoints, Evaluation, Outputs, Progress
from comlrl.run.run_state import FinishedStep
from comlrl.tree.contracts import Problem
from comlrl.tree.nodes import Node, backup_returns
from comlrl.tree.records import NodeRecord, node_records
from comlrl.tree.rollout import Rollout, TreeShape

if TYPE_CHECKING:
    from comlrl.policy.policies import AgentPolicies

log = logging.getLogger("comlrl")


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (config, files, keys, launcher), reported as one line."""
    from comlrl.llm import LLMError
    from comlrl.models import ModelError
    from comlrl.tasks.datasets import DatasetError
    from comlrl.tasks.reward_funcs import RewardFunctionError
    from sandbox.executor import SandboxUnavailable

    return (ConfigError, WorldSizeError, ModelError, DatasetError, LLMError, SandboxUnavailable, RewardFunctionError)



def training_step(comp: Components, step: int, start_rewards: dict[str, float] | None = None
                  ) -> tuple[dict[str, float], list[NodeRecord]]:
    """One training step: expand `trees_per_step` trees per rank, back up returns, one optimizer step by
    the run's algorithm (`comlrl.learn.algorithms`). With `start_rewards` (the untrained policy's sampled
    turn-1 reward per probe problem, `Evaluator.start_rewards`), `reward_vs_start` compares the step's
    turn-1 reward with it."""
    if comp.offline_pairs:
        return offline_step(comp, step), []
    if comp.atropos is not None:  # Atropos environments' groups instead of trees (comlrl/run/atropos.py)
        from comlrl.run.atropos import atropos_step

        return atropos_step(comp, step), []
    m, t0 = comp.cfg.magrpo, time.perf_counter()
    problems = _step_problems(comp, step)
    rollout = comp.rollout(problems, label=f"step {step + 1}")
    roots = rollout.run(TreeShape(m.num_agents, m.num_generations, m.num_turns, m.joint_mode,
                                  m.early_termination_threshold,
                                  later_generations=1 if comp.cfg.rollout.shape == "flat" else None,
                                  solved_generations=comp.cfg.rollout.solved_generations), tag="")
    for root in roots:
        backup_returns(root, m.discount)
    t_rollout = time.perf_counter() - t0
    comp.engine.idle()
    comp.phase("update")
    t_update = time.perf_counter()
    if comp.rounds is not None:  # madpo, marlhf: the step's pairs labeled, kept, trained with replayed ones
        update = comp.rounds.train(comp.trained(), roots, step)
    else:
        update = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, roots)
    t_update = time.perf_counter() - t_update
    sums = _step_sums(comp, roots, problems, rollout, update, start_rewards or {})
    metrics = _step_metrics(comp, step, sums, update, t_rollout, t_update, t0)
    return metrics, node_records(roots, step + 1, f"s{step + 1}r{comp.accelerator.process_index}t", m.num_agents)


def offline_step(comp: Components, step: int) -> dict[str, float]:
    """A DPO step on written pairs (algorithm.dpo.offline_pairs) instead of a rollout: this rank's share of
    the step's slice of the file (`comlrl.learn.preference_file.step_slice`: the run makes one pass over it)."""
    from comlrl.learn.preference_file import step_slice
    from comlrl.learn.units import Unit
    from comlrl.learn.update import train_units

    t0, acc, pairs = time.perf_counter(), comp.accelerator, comp.offline_pairs
    picked = step_slice(len(pairs), comp.cfg.training.steps, step,
                        comp.cfg.training.seed)[acc.process_index::acc.num_processes]
    pol = comp.policies
    units = [Unit((pol.sample_of(p.agent, p.prompt, p.chosen), pol.sample_of(p.agent, p.prompt, p.rejected)))
             for p in (pairs[i] for i in picked)]
    spare = units[0].samples[0] if units else pol.sample_of(pairs[0].agent, pairs[0].prompt, pairs[0].chosen)
    update = train_units(comp.trained(), comp.algorithm, comp.cfg, units, AdvantageStats(groups=len(units)), spare)
    names = sorted(update.metrics)
    total = sum_over_ranks(acc, [float(len(units)), update.samples, update.loss, *(update.metrics[n] for n in names)])
    summed = dict(zip(names, total[3:], strict=True))
    metrics: dict[str, float] = {"step": step + 1, "pairs": int(total[0]), "samples": int(total[1]),
                                 "loss": total[2] / acc.num_processes, "grad_norm": update.grad_norm,
                                 "weights_rank_spread": update.weights_rank_spread, "lr": update.lr}
    metrics.update({n: v / summed[f"{n}/n"] if summed[f"{n}/n"] else float("nan")
                    for n, v in summed.items() if not n.endswith("/n")})
    metrics["update_seconds"] = metrics["step_seconds"] = time.perf_counter() - t0
    return metrics


def _step_problems(comp: Components, step: int) -> list:
    """This rank's problems of `step` (a seeded draw) and the step's sampling seed."""
    t, acc = comp.cfg.training, comp.accelerator
    idx = step_problems(len(comp.train), step, t.trees_per_step, acc.process_index, acc.num_processes, t.seed)
    torch.manual_seed(t.seed * 7919 + step * 101 + acc.process_index)
    comp.feedback.counters.reset()  # count this step's rollout only, not evaluations in between
    return [comp.train[i] for i in idx]


def _step_sums(comp: Components, roots: list[Node], problems: list, rollout: Rollout, update: UpdateStats,
               start: dict[str, float]) -> StepSums:
    """This rank's sums of the step, reduced over ranks."""
    vs_start = [sum(r.rewards) / len(r.rewards) - start[p.task_id] for r, p in zip(roots, problems, strict=True)
                if isinstance(p, Problem) and p.task_id in start]
    local = StepSums(
        turn_sums(roots, comp.cfg.magrpo.num_turns, comp.task.count_names, comp.task.counts),
        trees=len(roots), leaves=leaves(roots), return_sum=mean_root_returns(roots),
        gen_tokens=rollout.gen_tokens, gen_seconds=rollout.gen_seconds, score_seconds=rollout.score_seconds,
        feedback_seconds=rollout.feedback_seconds, adv_groups=update.groups.groups,
        adv_groups_skipped=update.groups.skipped, algorithm=dict(update.metrics),
        samples=update.samples, loss=update.loss, engine_abs_gap=update.engine_abs_gap, engine_kl=update.engine_kl,
        engine_tokens=update.engine_tokens, vs_start=sum(vs_start, 0.0), vs_start_trees=len(vs_start),
        draws=DrawSums.of(roots))
    return local.reduced(lambda values: sum_over_ranks(comp.accelerator, values))


def _step_metrics(comp: Components, step: int, sums: StepSums, update: UpdateStats, t_rollout: float,
                  t_update: float, t0: float) -> dict[str, float]:
    """metrics.jsonl's line of the step; warns about a step that trained nothing or lost its expert."""
    metrics: dict[str, float] = {"step": step + 1, **sums.means(comp.accelerator.num_processes)}
    if comp.algorithm.derived is not None:
        metrics.update(comp.algorithm.derived(metrics))
    metrics.update(grad_norm=update.grad_norm, weights_rank_spread=update.weights_rank_spread, lr=update.lr,
                   rollout_seconds=t_rollout, update_seconds=t_update,
                   prompt_truncations=int(comp.policies.prompt_truncations))
    metrics.update({f"feedback/{k}": v for k, v in comp.feedback.metrics().items()})
    # e.g. judge calls and fallbacks of environment tasks
    metrics.update({f"task/{k}": v for k, v in comp.task.metrics().items() if isinstance(v, int | float)})
    metrics["step_seconds"] = time.perf_counter() - t0
    _warn_if_nothing_trained(comp, metrics)
    _warn_if_every_expert_prompt_fell_back(comp, metrics)
    return metrics


def _warn_if_every_expert_prompt_fell_back(comp: Components, metrics: dict[str, float]) -> None:
    """One line per step in which the expert of expert_edits gave no usable edits at all."""
    fell = metrics.get("feedback/expert/fallbacks", 0)
    if fell and not metrics.get("feedback/prompts/expert_edits", 0) and comp.accelerator.is_main_process:
        log.warning("step %d: every expert prompt (%d joint actions) fell back to external.expert_fallback=%s: "
                    "the expert gave no usable edits (feedback/expert/* in metrics.jsonl)", int(metrics["step"]),
                    int(fell), comp.cfg.external.expert_fallback)


def _warn_if_nothing_trained(comp: Components, metrics: dict[str, float]) -> None:
    """Once per run: a step whose advantage groups all tied (equal sibling returns) updated nothing."""
    if metrics["samples"] or not metrics["adv_groups"] or comp.counters.get("warned_all_tied"):
        return
    comp.counters["warned_all_tied"] = 1.0
    if comp.accelerator.is_main_process:
        log.warning("%s", tied_warning(int(metrics["step"]), int(metrics["adv_groups"])))


def tied_warning(step: int, groups: int) -> str:
    """The once-per-run line for a step whose advantage groups all tied."""
    which = "its one advantage group" if groups == 1 else f"all {groups} advantage groups"
    return (f"step {step} trained on nothing: {which} tied (every sibling got the same return, so no advantage); "
            "metrics.jsonl counts them per step in adv_groups_skipped; this is said once per run")


def run(cfg: RunConfig, callbacks: Sequence[Any] = (), report: bool = True,
        hold_final: Callable[[AgentPolicies], None] | None = None) -> int:
    """Train as configured; `callbacks` (comlrl or transformers `TrainerCallback`s) see every step, evaluation and
    checkpoint and may end the run early, on one list with the run's own parts (comlrl/run/run_parts.py).
    `report=False`: no plots, tree page or model card at the end (a run whose folder is thrown away).
    `hold_final`: given the trained policies instead of `final/` being written (a folder thrown away, whose
    caller writes the weights only if asked: every agent's weights, at a model's size, would land there)."""
    quiet_console()  # again for callers other than scripts/train.py (idempotent)
    check_output_dir(cfg)  # before anything loads: an earlier run's outputs are never replaced unasked
    out, latest = Path(cfg.training.output_dir), resume_point(cfg)
    calls = CallbackList([*callbacks, *time_budget(cfg, latest)], TrainerState(0, cfg.training.steps, out), cfg)
    comp = build(cfg, log_with=make_trackers(cfg, checkpoint_step(latest) if latest else 0))
    acc = comp.accelerator
    finished = calls.state.global_step = start = resume(cfg, comp, latest)

    def agree(asked: bool) -> bool:  # a stop asked for on any rank, on every rank: they leave the loop together
        return sum_over_ranks(acc, [float(asked)])[0] > 0

    try:
        outputs = Outputs(cfg, comp, start)
        evaluation = Evaluation(cfg, comp, start, outputs)
        calls.parts = [evaluation, outputs, Checkpoints(cfg, comp, agree), Progress(cfg, comp, start)]
        calls.train_begin()
        calls.before_training()
        for step in range(start, cfg.training.steps):
            calls.step_begin()
            metrics, records = training_step(comp, step, evaluation.evaluator.start_rewards())
            finished = step + 1
            calls.step_end(finished, metrics)
            asked = calls.stop_asked(agree)  # this step is the last: evaluated, saved
            done = FinishedStep(finished, metrics, records, asked, asked or finished == cfg.training.steps)
            calls.finish_step(done)
            if done.asked or done.stop_after:
                if acc.is_main_process:
                    log.info("stopped after step %d of training.steps=%d (a callback or training.time_budget_minutes)",
                             finished, cfg.training.steps)
                break
        if acc.is_main_process:
            if hold_final is not None:
                hold_final(comp.policies)
            else:
                comp.policies.save(out / "final")
        calls.train_end()
    finally:
        calls.close()
        close_components(comp)
    acc.wait_for_everyone()
    if acc.is_main_process:
        print_done(out, finished, report)
    return 0


def print_done(out: Path, finished: int, report: bool) -> None:
    """The run's last lines: where its outputs are, then the report's (plots, tree page, model card). A stop while
    the report is written is acted on once it is (the one-line stop, exit 130/143): arriving inside a library's
    finalizer (the plots') it was "Exception ignored" and the run exited 0."""
    with stops_held():
        print(f"done: {plural(finished, 'step')}; outputs in {out.resolve()} "
              f"({', '.join(name for name in RUN_OUTPUTS if (out / name).exists())})")
        for line in write_report(out, finished) if report else ():
            print(line)


def time_budget(cfg: RunConfig, latest: Path | None) -> list[TimeBudget]:
    """`training.time_budget_minutes` as a callback; the steps before a resume count (metrics.jsonl)."""
    if cfg.training.time_budget_minutes is None:
        return []
    resumed_at = checkpoint_step(latest) if latest else 0
    lines = read_run_lines(Path(cfg.training.output_dir), "metrics", resumed_at)
    return [TimeBudget(cfg.training.time_budget_minutes, sum(line.get("step_seconds", 0.0) for line in lines))]


def resume(cfg: RunConfig, comp: Components, latest: Path | None) -> int:
    """The step the run starts at: 0, or the checkpoint's when resuming (later checkpoints, of the path not taken,
    removed); Atropos is told where the checkpoints are."""
    start, root = 0, Path(cfg.training.output_dir) / "checkpoints"
    if cfg.training.resume and latest is None:
        log.warning("training.resume=true but %s holds no checkpoint: starting from step 0", root)
    elif cfg.training.resume:
        start = load_checkpoint(comp.trained(), latest)
        comp.engine.weights_changed()
        if comp.rounds is not None:
            comp.rounds.resume(start)
        log.info("resumed from %s (step %d)", latest, start)
        dropped = drop_after(root, start) if comp.accelerator.is_main_process else []
        if dropped:
            log.info("removed the later checkpoints %s (this run goes on from step %d)",
                     ", ".join(p.name for p in dropped), start)
    if comp.atropos is not None:
        comp.atropos.register(start, str(root.resolve()))
    return start


def close_components(comp: Components) -> None:
    """The trackers (started by the writer, also when it was stopped while starting them), the task's
    resources, the sandbox and the engine, at the end of any run."""
    close_trackers(comp.accelerator)
    comp.task.close()
    if comp.sandbox is not None:
        comp.sandbox.close()
    comp.engine.close()


USER_ERRORS = _user_errors()
