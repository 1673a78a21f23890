"""The MAGRPO training loop: rollout a batch of turn trees, back up returns, one optimizer step.

Works under plain `python`, `accelerate launch` (DDP over gloo on CPU) and DeepSpeed ZeRO. Each rank
expands different problems; metrics are summed over ranks; only rank 0 writes files. A run is built by
`comlrl.components.build`; the optimizer step from the trees is `comlrl.update.train_on_trees`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object

from comlrl.advantages import assign_advantages
from comlrl.checkpoint import checkpoint_step, latest_checkpoint, load_checkpoint, save_checkpoint
from comlrl.components import Components, build
from comlrl.config import ConfigError, RunConfig
from comlrl.console import plural, quiet_console
from comlrl.contracts import Problem
from comlrl.distributed import WorldSizeError, reduce_sums
from comlrl.evaluation import Evaluator
from comlrl.problem_draw import step_problems
from comlrl.rollout import TreeShape
from comlrl.rollout_driver import Rollout
from comlrl.run_outputs import RUN_OUTPUTS, RunWriter, check_output_dir, make_trackers, read_eval_records
from comlrl.run_report import write_report
from comlrl.tree import TreeStats, backup_returns
from comlrl.tree_records import node_records
from comlrl.turn_metrics import turn_means, turn_sums
from comlrl.update import train_on_trees

log = logging.getLogger("comlrl")


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (config, files, keys, launcher), reported as one line."""
    from comlrl.llm import LLMError
    from comlrl.models import ModelError
    from comlrl.reward_funcs import RewardFunctionError
    from comlrl.tasks.datasets import DatasetError
    from sandbox.executor import SandboxUnavailable

    return (ConfigError, WorldSizeError, ModelError, DatasetError, LLMError, SandboxUnavailable, RewardFunctionError)



def training_step(comp: Components, step: int, start_rewards: dict[str, float] | None = None
                  ) -> tuple[dict[str, float], list[dict]]:
    """One rollout of `trees_per_step` trees per rank, returns backed up, one optimizer step. With
    `start_rewards` (the untrained policy's sampled turn-1 reward per problem, `Evaluator.start_rewards`),
    `reward_vs_start` is the step's turn-1 reward minus the untrained one on the same problems."""
    cfg, acc = comp.cfg, comp.accelerator
    m = cfg.magrpo
    t0 = time.perf_counter()
    idx = step_problems(len(comp.train), step, cfg.training.trees_per_step, acc.process_index,
                        acc.num_processes, cfg.training.seed)
    torch.manual_seed(cfg.training.seed * 7919 + step * 101 + acc.process_index)
    comp.feedback.counters.reset()  # count this step's rollout only, not evaluations in between
    problems = [comp.train[i] for i in idx]
    rollout = Rollout(comp, problems, label=f"step {step + 1}")
    shape = TreeShape(m.num_agents, m.num_generations, m.num_turns, m.joint_mode, m.early_termination_threshold)
    roots = rollout.run(shape, tag="")
    for root in roots:
        backup_returns(root, m.discount)
    adv_stats = assign_advantages(roots, m.num_agents, m.num_generations, m.advantage.baseline,
                                  m.advantage.scale, m.advantage.eps, credit=m.advantage.credit)
    t_roll = time.perf_counter() - t0
    comp.engine.idle()
    comp.phase("update")
    t_update = time.perf_counter()
    train_stats = train_on_trees(comp, roots)
    t_update = time.perf_counter() - t_update
    stats = TreeStats.of(roots, m.num_turns)
    local = {
        **turn_sums(roots, m.num_turns, comp.task),
        "nodes": sum(stats.nodes), "pruned": sum(stats.pruned), "leaves": stats.leaves,
        "joint_actions": sum(stats.joint_actions),
        **{f"turn_{t + 1}/nodes": stats.nodes[t] for t in range(m.num_turns)},
        **{f"turn_{t + 1}/pruned": stats.pruned[t] for t in range(m.num_turns)},
        "gen_tokens": rollout.gen_tokens, "gen_seconds": rollout.gen_seconds,
        "score_seconds": rollout.score_seconds, "feedback_seconds": rollout.feedback_seconds,
        "adv_groups": adv_stats.groups, "adv_groups_skipped": adv_stats.skipped,
        "samples": train_stats["samples"], "loss": train_stats["loss"],
        "engine_abs_gap_sum": train_stats["abs_gap_sum"], "engine_kl_sum": train_stats["kl_sum"],
        "engine_tokens": train_stats["tokens"],
        "return_sum": sum(sum(r.returns) / len(r.returns) for r in roots), "trees": len(roots),
        **_vs_start_sums(roots, problems, start_rewards or {}),
    }
    total = reduce_sums(acc, local)
    world = acc.num_processes
    metrics: dict[str, float] = {"step": step + 1}
    metrics.update(turn_means(total, m.num_turns))
    metrics["return_mean"] = total["return_sum"] / max(1.0, total["trees"])
    if total["vs_start_count"]:
        metrics["reward_vs_start"] = total["vs_start_sum"] / total["vs_start_count"]
    for key in ("nodes", "pruned", "leaves", "joint_actions", "gen_tokens", "adv_groups", "adv_groups_skipped",
                "samples", "trees"):
        metrics[key] = int(total[key])
    for t in range(1, m.num_turns + 1):
        metrics[f"turn_{t}/nodes"] = int(total[f"turn_{t}/nodes"])
        n = total[f"turn_{t}/nodes"]
        metrics[f"turn_{t}/pruned_frac"] = total[f"turn_{t}/pruned"] / n if n else float("nan")
    metrics["pruned_frac"] = total["pruned"] / max(1.0, total["nodes"])
    metrics["loss"] = total["loss"] / world
    metrics["grad_norm"] = train_stats["grad_norm"]
    metrics["weights_rank_spread"] = train_stats["weights_rank_spread"]
    metrics["lr"] = train_stats["lr"]
    if total["engine_tokens"]:  # the rollout engine's log-probs vs the trainer's, per token
        metrics["rollout/logprob_abs_gap"] = total["engine_abs_gap_sum"] / total["engine_tokens"]
        metrics["rollout/kl_engine_train"] = total["engine_kl_sum"] / total["engine_tokens"]
    metrics["rollout_seconds"] = t_roll
    metrics["update_seconds"] = t_update
    metrics["gen_seconds"] = total["gen_seconds"] / world
    metrics["score_seconds"] = total["score_seconds"] / world
    metrics["feedback_seconds"] = total["feedback_seconds"] / world
    metrics["tokens_per_s"] = total["gen_tokens"] / max(1e-9, total["gen_seconds"] / world)
    metrics["prompt_truncations"] = int(comp.policies.prompt_truncations)
    metrics.update({f"feedback/{k}": v for k, v in comp.feedback.metrics().items()})
    # e.g. judge calls and fallbacks of environment tasks
    metrics.update({f"task/{k}": v for k, v in comp.task.metrics().items() if isinstance(v, int | float)})
    metrics["step_seconds"] = time.perf_counter() - t0
    _warn_if_nothing_trained(comp, metrics)
    _warn_if_every_expert_prompt_fell_back(comp, metrics)
    prefix = f"s{step + 1}r{acc.process_index}t"
    records = node_records(roots, step + 1, prefix, m.num_agents)
    return metrics, records


def _warn_if_every_expert_prompt_fell_back(comp: Components, metrics: dict[str, float]) -> None:
    """One line per step in which the expert of expert_edits gave no usable edits at all."""
    fell = metrics.get("feedback/expert/fallbacks", 0)
    if fell and not metrics.get("feedback/prompts/expert_edits", 0) and comp.accelerator.is_main_process:
        log.warning("step %d: every expert prompt (%d joint actions) fell back to external.expert_fallback=%s: "
                    "the expert gave no usable edits (feedback/expert/* in metrics.jsonl)", int(metrics["step"]),
                    int(fell), comp.cfg.external.expert_fallback)


def _vs_start_sums(roots: list, problems: list, start: dict[str, float]) -> dict[str, float]:
    """Sum over this rank's trees of (mean turn-1 reward - the untrained policy's, same problem)."""
    out = {"vs_start_sum": 0.0, "vs_start_count": 0.0}
    for root, problem in zip(roots, problems, strict=True):
        label = problem.task_id if isinstance(problem, Problem) else None
        if label in start:
            out["vs_start_sum"] += sum(root.rewards) / len(root.rewards) - start[label]
            out["vs_start_count"] += 1.0
    return out


def _warn_if_nothing_trained(comp: Components, metrics: dict[str, float]) -> None:
    """Once per run: a step whose advantage groups all tied (equal sibling returns) updated nothing."""
    if metrics["samples"] or not metrics["adv_groups"] or comp.counters.get("warned_all_tied"):
        return
    comp.counters["warned_all_tied"] = 1.0
    if comp.accelerator.is_main_process:
        log.warning("step %d trained on nothing: all %d advantage groups tied (every sibling got the same return, "
                    "so no advantage); metrics.jsonl counts them per step in adv_groups_skipped (warned once)",
                    int(metrics["step"]), int(metrics["adv_groups"]))


def _progress_bar(total: int, start: int) -> Any:
    """The run's bar: the phase on the left, the last step's own numbers (s/step without evaluations) on
    the right; no rate of its own, since tqdm's would count the evaluations in."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc="starting", unit="step", dynamic_ncols=True,
                bar_format="{desc} | step {n_fmt}/{total_fmt} [{elapsed}{postfix}]")


def evaluation_plan(sets: dict[str, list[Any]], greedy: bool, samples: int) -> str:
    """What an evaluation will score (an `Evaluator`'s sets, greedy flag and sample count), in words."""
    chains = (["1 greedy"] if greedy else []) + ([f"{samples} sampled"] if samples else [])
    chain = "chain" if chains in (["1 greedy"], ["1 sampled"]) else "chains"
    return "; ".join(f"{plural(len(sets[name]), f'{label} problem')} ({' + '.join(chains)} {chain} each)"
                     for name, label in (("heldout", "held-out"), ("probe", "training-probe")) if sets[name])


def _log_evaluation_start(evaluator: Evaluator) -> None:
    """One line before the first evaluation, so minutes without output are explained."""
    if evaluator.c.accelerator.is_main_process:
        log.info("evaluating the untrained policy: %s",
                 evaluation_plan(evaluator.sets, evaluator.greedy, evaluator.samples))


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


def progress_numbers(metrics: dict[str, float], num_turns: int) -> dict[str, str]:
    """The progress bar's numbers: the step just finished (not a running average)."""
    out = {"reward": f"{metrics['reward_mean']:.2f}",
           "pass": f"{metrics.get(f'turn_{num_turns}/pass_rate', float('nan')):.2f}"}
    if "helper_called" in metrics:
        out["helper"] = f"{metrics['helper_called']:.2f}"
    if "reward_vs_start" in metrics:
        out["vs_start"] = f"{metrics['reward_vs_start']:+.2f}"
    if "eval/pass_at_1" in metrics:
        out["eval"] = f"{metrics['eval/pass_at_1']:.3f}"
    out["tok_s"] = f"{metrics['tokens_per_s']:.0f}"
    out["s_step"] = f"{metrics['step_seconds']:.0f}"
    return out


def run(cfg: RunConfig) -> int:
    quiet_console()  # again for callers other than scripts/train.py (idempotent)
    check_output_dir(cfg)  # before anything loads: an earlier run's outputs are never replaced unasked
    out = Path(cfg.training.output_dir)
    ckpt_root = out / "checkpoints"
    latest = latest_checkpoint(ckpt_root) if cfg.training.resume else None
    comp = build(cfg, log_with=make_trackers(cfg, checkpoint_step(latest) if latest else 0))
    acc = comp.accelerator
    start = 0
    if cfg.training.resume:
        if latest is None:
            log.warning("training.resume=true but %s holds no checkpoint: starting from step 0", ckpt_root)
        else:
            start = load_checkpoint(acc, comp.model, comp.policies, comp.optimizer, comp.scheduler, latest)
            comp.engine.weights_changed()
            log.info("resumed from %s (step %d)", latest, start)
    writer = RunWriter(cfg, acc, resume_step=start) if acc.is_main_process else None
    bar = None
    evaluator = Evaluator(comp)
    if start > 0:
        evaluator.restore(read_eval_records(out, start))
    try:
        if acc.is_main_process and cfg.logging.progress_bar:
            bar = _progress_bar(cfg.training.steps, start)
            comp.phase = lambda text: bar.set_description_str(text, refresh=True)
        if start == 0 and evaluator.enabled:
            _log_evaluation_start(evaluator)
            ev, ev_records = evaluator.run(0)
            if writer:
                writer.log({"step": 0, **ev})
                writer.write_evals(ev_records)
                log.info("before training: %s (%.0f s)", evaluation_summary(ev), ev["eval/seconds"])
        for step in range(start, cfg.training.steps):
            metrics, records = training_step(comp, step, evaluator.start_rewards())
            done = step + 1
            last = done == cfg.training.steps
            ev_records = []
            if evaluator.enabled and (last or (cfg.training.eval_every and done % cfg.training.eval_every == 0)):
                ev, ev_records = evaluator.run(done)
                metrics.update(ev)
            gathered = gather_object(records) if acc.num_processes > 1 else records
            if writer:
                writer.log(metrics)
                writer.write_trees(gathered)
                writer.write_evals(ev_records)
            if last or (cfg.training.save_every and done % cfg.training.save_every == 0):
                save_checkpoint(acc, comp.model, comp.policies, comp.optimizer, comp.scheduler, done, ckpt_root)
            if bar:
                bar.set_description_str("trained", refresh=False)
                bar.set_postfix(progress_numbers(metrics, cfg.magrpo.num_turns), refresh=False)
                bar.update(1)  # one redraw: the count and the numbers of the same step
        if acc.is_main_process:
            comp.policies.save(out / "final")
    finally:
        if bar:
            bar.close()
        if writer:
            writer.close()
        comp.task.close()
        comp.sandbox.close()
        comp.engine.close()
    acc.wait_for_everyone()
    if acc.is_main_process:
        print(f"done: {plural(cfg.training.steps, 'step')}; outputs in {out.resolve()} "
              f"({', '.join(name for name in RUN_OUTPUTS if (out / name).exists())})")
        for line in write_report(out, cfg.training.steps):
            print(line)
    return 0


USER_ERRORS = _user_errors()
