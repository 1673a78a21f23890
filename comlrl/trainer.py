"""The MAGRPO training loop: rollout a batch of turn trees, back up returns, one optimizer step.

Works under plain `python`, `accelerate launch` (DDP over gloo on CPU) and DeepSpeed ZeRO. Each rank
expands different problems; metrics are summed over ranks; only rank 0 writes files. A run is built by
`comlrl.components.build`; the optimizer step from the trees is `comlrl.update.train_on_trees`.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object

from comlrl.advantages import assign_advantages
from comlrl.checkpoint import checkpoint_step, latest_checkpoint, load_checkpoint, save_checkpoint
from comlrl.components import Components, build
from comlrl.config import ConfigError, RunConfig
from comlrl.console import quiet_console
from comlrl.contracts import Continuation, JointTurn, Task, Transition
from comlrl.distributed import WorldSizeError, reduce_sums
from comlrl.rollout import TreeShape, expand_trees, make_roots
from comlrl.run_outputs import RUN_OUTPUTS, RunWriter, check_output_dir, make_trackers
from comlrl.run_report import write_report
from comlrl.tree import Node, TreeStats, backup_returns
from comlrl.tree_records import node_records
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



def step_problems(n_problems: int, step: int, per_rank: int, rank: int, world: int, seed: int) -> list[int]:
    """Problem indices this rank expands at `step`: a stateless, seeded draw, so resume needs no sampler state."""
    rng = random.Random(seed * 1_000_003 + step)
    need = per_rank * world
    order: list[int] = []
    while len(order) < need:
        block = list(range(n_problems))
        rng.shuffle(block)
        order.extend(block)
    return order[rank * per_rank : (rank + 1) * per_rank]


def _history(index: dict[str, Node], node: Node, action: int, num_agents: int) -> list[list[str]]:
    """Each agent's responses along the path root → node, ending with joint action `action`."""
    path: list[tuple[Node, int]] = [(node, action)]
    cur = node
    while cur.parent is not None:
        parent = index[cur.parent]
        path.append((parent, cur.parent_action))
        cur = parent
    path.reverse()
    return [[n.completions[a][n.joint[j][a]].text for n, j in path] for a in range(num_agents)]


class Rollout:
    """The three callables the level-synchronous expander drives, bound to one batch of problems."""

    def __init__(self, comp: Components, problems: list, greedy: bool = False) -> None:
        self.c, self.problems, self.greedy = comp, problems, greedy
        self.transition: Transition = comp.task.transition(comp.feedback)
        self.roots: list[Node] = []
        self.nodes: dict[str, Node] = {}  # every node scored so far, by id: the paths of later turns
        self.gen_tokens = 0
        self.gen_seconds = 0.0
        self.score_seconds = 0.0
        self.feedback_seconds = 0.0

    def generate(self, requests: list[tuple[int, list[dict]]], n: int) -> list[list[Any]]:
        t0 = time.perf_counter()
        out = self.c.engine.generate(requests, n, greedy=self.greedy)
        self.gen_seconds += time.perf_counter() - t0
        self.gen_tokens += sum(len(s.completion_ids) for row in out for s in row)
        return out

    def score(self, pairs: list[tuple[Node, tuple[int, ...]]]) -> list[tuple[float, Any]]:
        """Scores each joint action on its node's state and keeps the state it leaves on the node."""
        t0 = time.perf_counter()
        turns = [
            JointTurn(self.problems[node.root], tuple(node.completions[a][act[a]].text for a in range(len(act))),
                      node.state)
            for node, act in pairs
        ]
        scored = self.c.task.score_joint(turns)
        for node, _ in pairs:
            self.nodes[node.id] = node
            node.next_states = []
        for (node, _), (_, state) in zip(pairs, scored, strict=True):
            node.next_states.append(state)
        self.score_seconds += time.perf_counter() - t0
        return [(r.total, r) for r, _ in scored]

    def next_messages(self, pairs: list[tuple[Node, int]]) -> list[list[list[dict]]]:
        t0 = time.perf_counter()
        n_agents = self.c.task.num_agents
        paths = [Continuation(self.problems[node.root], node, j, _history(self.nodes, node, j, n_agents))
                 for node, j in pairs]
        out = self.transition.next_messages(self.c.task, paths)
        out = [self._prefixed(self.problems[node.root], msgs) for (node, _), msgs in zip(pairs, out, strict=True)]
        self.feedback_seconds += time.perf_counter() - t0
        return out

    def _prefixed(self, problem: Any, messages: list[list[dict]]) -> list[list[dict]]:
        """Each agent's chat, ending with the task's answer prefix as a partial assistant message if it has one."""
        out = []
        for a, msgs in enumerate(messages):
            prefix = self.c.task.answer_prefix(a, problem)
            out.append([*msgs, {"role": "assistant", "content": prefix}] if prefix else msgs)
        return out

    def initial_messages(self, problem: Any) -> list[list[dict]]:
        """The turn-1 chats the agents are prompted with: the task's messages plus its answer prefix."""
        return self._prefixed(problem, self.c.task.initial_messages(problem))

    def run(self, shape: TreeShape, tag: str) -> list[Node]:
        self.c.task.begin_rollout()
        self.roots = make_roots([self.initial_messages(p) for p in self.problems], tag)
        for root, problem in zip(self.roots, self.problems, strict=True):
            root.state = self.c.task.initial_state(problem)
        return expand_trees(self.roots, shape, self.generate, self.score, self.next_messages)


def _turn_sums(roots: list[Node], num_turns: int, task: Task | None = None) -> dict[str, float]:
    """Per-turn sums of rewards, joint actions, passes and the task's outcome counts (the same keys on
    every rank, whatever its trees hold, so they can be summed over ranks)."""
    sums: dict[str, float] = {}
    for t in range(1, num_turns + 1):
        sums[f"turn_{t}/reward_sum"] = 0.0
        sums[f"turn_{t}/count"] = 0.0
        sums[f"turn_{t}/passed"] = 0.0
        for name in task.count_names if task is not None else ():
            sums[f"turn_{t}/{name}"] = 0.0
    for root in roots:
        for node in root.walk():
            sums[f"turn_{node.turn}/reward_sum"] += sum(node.rewards)
            sums[f"turn_{node.turn}/count"] += len(node.rewards)
            sums[f"turn_{node.turn}/passed"] += sum(bool(d.all_passed) for d in node.details)
            for d in node.details if task is not None else ():
                for name, value in task.counts(d).items():
                    sums[f"turn_{node.turn}/{name}"] += float(value)
    return sums


def _turn_means(sums: dict[str, float], num_turns: int, prefix: str = "") -> dict[str, float]:
    """Means per turn and over all turns; a task's outcome counts become rates per joint action."""
    out: dict[str, float] = {}
    total_r = total_n = 0.0
    extra: dict[str, float] = {}
    for t in range(1, num_turns + 1):
        n = sums[f"turn_{t}/count"]
        total_r += sums[f"turn_{t}/reward_sum"]
        total_n += n
        out[f"{prefix}turn_{t}/reward_mean"] = sums[f"turn_{t}/reward_sum"] / n if n else float("nan")
        out[f"{prefix}turn_{t}/pass_rate"] = sums[f"turn_{t}/passed"] / n if n else float("nan")
        for key, value in sums.items():
            head, _, name = key.partition("/")
            if head == f"turn_{t}" and name not in ("reward_sum", "count", "passed"):
                out[f"{prefix}{key}"] = value / n if n else float("nan")
                extra[name] = extra.get(name, 0.0) + value
    out[f"{prefix}reward_mean"] = total_r / total_n if total_n else float("nan")
    for name, value in extra.items():
        out[f"{prefix}{name}"] = value / total_n if total_n else float("nan")
    return out


def training_step(comp: Components, step: int) -> tuple[dict[str, float], list[dict]]:
    cfg, acc = comp.cfg, comp.accelerator
    m = cfg.magrpo
    t0 = time.perf_counter()
    idx = step_problems(len(comp.train), step, cfg.training.trees_per_step, acc.process_index,
                        acc.num_processes, cfg.training.seed)
    torch.manual_seed(cfg.training.seed * 7919 + step * 101 + acc.process_index)
    comp.feedback.counters.reset()  # count this step's rollout only, not evaluations in between
    rollout = Rollout(comp, [comp.train[i] for i in idx])
    shape = TreeShape(m.num_agents, m.num_generations, m.num_turns, m.joint_mode, m.early_termination_threshold)
    roots = rollout.run(shape, tag="")
    for root in roots:
        backup_returns(root, m.discount)
    adv_stats = assign_advantages(roots, m.num_agents, m.num_generations, m.advantage.baseline,
                                  m.advantage.scale, m.advantage.eps, credit=m.advantage.credit)
    t_roll = time.perf_counter() - t0
    comp.engine.idle()
    t_update = time.perf_counter()
    train_stats = train_on_trees(comp, roots)
    t_update = time.perf_counter() - t_update
    stats = TreeStats.of(roots, m.num_turns)
    local = {
        **_turn_sums(roots, m.num_turns, comp.task),
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
    }
    total = reduce_sums(acc, local)
    world = acc.num_processes
    metrics: dict[str, float] = {"step": step + 1}
    metrics.update(_turn_means(total, m.num_turns))
    metrics["return_mean"] = total["return_sum"] / max(1.0, total["trees"])
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
    prefix = f"s{step + 1}r{acc.process_index}t"
    records = node_records(roots, step + 1, prefix, m.num_agents)
    return metrics, records


def _warn_if_nothing_trained(comp: Components, metrics: dict[str, float]) -> None:
    """Once per run: a step whose advantage groups all tied (equal sibling returns) updated nothing."""
    if metrics["samples"] or not metrics["adv_groups"] or comp.counters.get("warned_all_tied"):
        return
    comp.counters["warned_all_tied"] = 1.0
    if comp.accelerator.is_main_process:
        log.warning("step %d trained on nothing: all %d advantage groups tied (every sibling got the same return, "
                    "so no advantage); metrics.jsonl counts them per step in adv_groups_skipped (warned once)",
                    int(metrics["step"]), int(metrics["adv_groups"]))


def evaluate(comp: Components, step: int) -> dict[str, float]:
    """Greedy, one chain per held-out problem (G=1, no early stop): pass@1 and mean reward per turn, and
    the evaluation's wall seconds (`step_seconds` leaves them out; a run's CPU budget needs both)."""
    t0 = time.perf_counter()
    cfg, acc = comp.cfg, comp.accelerator
    m = cfg.magrpo
    problems = comp.eval[: cfg.training.eval_size] if cfg.training.eval_size else comp.eval
    mine = problems[acc.process_index :: acc.num_processes]
    sums = {k: 0.0 for k in _turn_sums([], m.num_turns, comp.task)}  # a rank without problems adds zeros
    if mine:
        rollout = Rollout(comp, mine, greedy=True)
        roots = rollout.run(TreeShape(m.num_agents, 1, m.num_turns, "align", None), tag="eval")
        sums = _turn_sums(roots, m.num_turns, comp.task)
    sums["problems"] = float(len(mine))
    total = reduce_sums(acc, sums)
    means = _turn_means(total, m.num_turns, prefix="eval/")
    out = {k.replace("pass_rate", "pass_at_1"): v for k, v in means.items()}
    out["eval/pass_at_1"] = out[f"eval/turn_{m.num_turns}/pass_at_1"]
    out["eval/problems"] = int(total["problems"])
    out["eval/seconds"] = time.perf_counter() - t0
    return out


def progress_numbers(metrics: dict[str, float], num_turns: int) -> dict[str, str]:
    """The progress bar's numbers: the step just finished (not a running average)."""
    out = {"reward": f"{metrics['reward_mean']:.2f}",
           "pass": f"{metrics.get(f'turn_{num_turns}/pass_rate', float('nan')):.2f}"}
    if "helper_called" in metrics:
        out["helper"] = f"{metrics['helper_called']:.2f}"
    if "eval/pass_at_1" in metrics:
        out["eval"] = f"{metrics['eval/pass_at_1']:.3f}"
    out["tok_s"] = f"{metrics['tokens_per_s']:.0f}"
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
    try:
        if start == 0 and comp.eval:
            ev = evaluate(comp, 0)
            if writer:
                writer.log({"step": 0, **ev})
                log.info("held-out before training: pass@1 %.3f of %d problems, reward %.3f (%.0f s)",
                         ev["eval/pass_at_1"], ev["eval/problems"], ev["eval/reward_mean"], ev["eval/seconds"])
        if acc.is_main_process and cfg.logging.progress_bar:  # after the first evaluation: s/step is training
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.training.steps, initial=start, desc="train", unit="step", dynamic_ncols=True)
        for step in range(start, cfg.training.steps):
            metrics, records = training_step(comp, step)
            done = step + 1
            last = done == cfg.training.steps
            if comp.eval and (last or (cfg.training.eval_every and done % cfg.training.eval_every == 0)):
                metrics.update(evaluate(comp, done))
            gathered = gather_object(records) if acc.num_processes > 1 else records
            if writer:
                writer.log(metrics)
                writer.write_trees(gathered)
            if last or (cfg.training.save_every and done % cfg.training.save_every == 0):
                save_checkpoint(acc, comp.model, comp.policies, comp.optimizer, comp.scheduler, done, ckpt_root)
            if bar:
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
        print(f"done: {cfg.training.steps} steps; outputs in {out.resolve()} "
              f"({', '.join(name for name in RUN_OUTPUTS if (out / name).exists())})")
        for line in write_report(out, cfg.training.steps):
            print(line)
    return 0


USER_ERRORS = _user_errors()
