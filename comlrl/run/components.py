"""What a run is built from, once: accelerator, task, sandbox, policies, rollout engine, optimizer, schedule.

`build` is the one place a config becomes live objects; the trainer (`comlrl.run.trainer`), the evaluation CLI
and the benchmarks start from its `Components`.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from comlrl.config.schema import RunConfig, validate_threshold
from comlrl.cores import keep_freed_memory
from comlrl.errors import ConfigError
from comlrl.learn.algorithms import Algorithm
from comlrl.learn.learner import Learner, make_accelerator, uses_deepspeed, uses_zero3
from comlrl.tree.contracts import Task
from comlrl.tree.rollout import Rollout

if TYPE_CHECKING:
    from accelerate import Accelerator

    from comlrl.engines import RolloutEngine
    from comlrl.learn.preference_file import PreferenceRecord
    from comlrl.policy import AgentPolicies
    from comlrl.run.atropos import AtroposSource
    from comlrl.run.rounds import PairRounds
    from comlrl.tasks.code.feedback import FeedbackBridge
    from sandbox.executor import Sandbox


@dataclass
class Components:
    """Everything a step needs, built once per run."""

    cfg: RunConfig
    accelerator: Accelerator
    task: Task
    sandbox: Sandbox | None  # None for a task that runs no model-written code (Task.needs_sandbox)
    policies: AgentPolicies
    engine: RolloutEngine  # samples the rollouts
    algorithm: Algorithm  # what the trees train: units and loss (algorithm.name)
    learner: Learner | None  # the trained side (None when built to evaluate only)
    feedback: FeedbackBridge
    train: list[Any]  # the task's problems
    eval: list[Any]
    offline_pairs: list[PreferenceRecord] = field(default_factory=list)  # algorithm.dpo.offline_pairs: DPO on these
    atropos: AtroposSource | None = None  # rollout.atropos.url: the steps train on Atropos environments' groups
    rounds: PairRounds | None = None  # madpo, marlhf: each step's pairs labeled, kept and replayed
    counters: dict[str, float] = field(default_factory=dict)
    # what the run is doing now ("rollout turn 1/2: generating", "update"): the trainer shows it
    phase: Callable[[str], None] = field(default=lambda text: None)

    def trained(self) -> Learner:
        """The learner of a run built for training (`build(for_training=True)`)."""
        if self.learner is None:
            raise RuntimeError("these components were built to evaluate only: no learner")
        return self.learner

    def rollout(self, problems: list, *, greedy: bool = False, label: str = "rollout") -> Rollout:
        """A rollout of `problems` by this run's engine, task and next-turn transition."""
        return Rollout(self.task, self.task.transition(self.feedback), self.engine, problems, greedy=greedy,
                       label=label, phase=self.phase, on_done=self.policies.report_truncations)


# magrpo.lr_schedule -> transformers' scheduler name (each with magrpo.warmup_steps of linear warm-up from 0)
SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def make_scheduler(cfg: RunConfig, optimizer: torch.optim.Optimizer) -> Any:
    """transformers' LR schedule for this run: warm-up, then constant or a decay to 0 at training.steps."""
    from transformers import get_scheduler

    m = cfg.magrpo
    return get_scheduler(SCHEDULES[m.lr_schedule], optimizer, num_warmup_steps=m.warmup_steps,
                         num_training_steps=max(1, cfg.training.steps))


def local_processes() -> int:
    """The training processes on this machine (on several machines, WORLD_SIZE counts them all)."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1))


def cpu_share() -> int:
    """This process's share of the cores it may run on: `accelerate launch` exports OMP_NUM_THREADS=1 for
    a one-process CPU launch, which would leave all but one core idle."""
    return max(1, len(os.sched_getaffinity(0)) // local_processes())


def sandbox_workers() -> int:
    """Default sandbox workers of this process: the machine's cores shared by the processes on it."""
    return max(1, (os.cpu_count() or 1) // local_processes())


def build(cfg: RunConfig, for_training: bool = True, log_with: list[Any] | None = None) -> Components:
    from comlrl.config.registry import ALGORITHMS, TASKS
    from comlrl.engines import build_engine
    from comlrl.learn.preference_file import read_pairs
    from comlrl.policy import AgentPolicies
    from comlrl.run.rounds import build_rounds
    from comlrl.tasks import build_task
    from comlrl.tasks.code.feedback import FeedbackBridge
    from sandbox.executor import Sandbox

    acc = make_accelerator(log_with)
    if acc.device.type == "cpu":  # before the models load and the threads start
        keep_freed_memory()
    atropos = None
    if cfg.rollout.atropos.url and for_training:  # before the models load: an unreachable server is one line
        from comlrl.run.atropos import AtroposSource

        atropos = AtroposSource(cfg, acc)
        atropos.check_reachable()
    torch.set_num_threads(cfg.training.torch_threads or cpu_share())
    random.seed(cfg.training.seed)
    torch.manual_seed(cfg.training.seed)
    algorithm = ALGORITHMS.get(cfg.algorithm.name)
    # a task that runs no model-written code (text, BFCL: its own scoring process) starts no sandbox
    sandbox = Sandbox.of(cfg.sandbox, workers=sandbox_workers()) if TASKS.get(cfg.task.name).needs_sandbox else None
    task = build_task(cfg.task, sandbox)
    if algorithm.centralized:  # one policy writes every role's part; the task splits its completion
        from comlrl.tasks.centralized import centralize

        task = centralize(task, cfg.task.name)
    # reward functions declare no range: with them any threshold may be reached
    validate_threshold(cfg, (-math.inf, math.inf) if task.reward_terms else task.reward_range)
    train, evalset = task.load(cfg.dataset)
    if not train:
        raise ValueError(f"dataset {cfg.dataset.name!r} has no training problems")
    feedback = FeedbackBridge(cfg.external)
    # tool agents stop after </tool_call> so nothing the model writes past it is trained on
    policies = AgentPolicies(cfg.model, cfg.agents, cfg.magrpo.num_agents,
                             stop_strings=task.stop_strings, head_messages=task.head_messages)
    if algorithm.critic:
        policies.module.attach_value_heads(at_action=algorithm.per_action_values or cfg.algorithm.critic.kind == "q")
    engine = build_engine(cfg.rollout, policies, cfg.training.seed)
    learner = None
    if for_training:
        optimizer = adamw(param_groups(cfg, policies), cfg.magrpo.learning_rate, cfg.magrpo.weight_decay)
        scheduler = make_scheduler(cfg, optimizer)
        if uses_deepspeed(acc):
            ds = acc.state.deepspeed_plugin.deepspeed_config
            ds["gradient_clipping"] = cfg.magrpo.max_grad_norm
            # the trainer micro-batches itself and marks accumulation boundaries: one sample per DeepSpeed step
            if ds.get("train_micro_batch_size_per_gpu", "auto") == "auto":
                ds["train_micro_batch_size_per_gpu"] = 1
        model, optimizer = acc.prepare(policies.module, optimizer)
        if uses_zero3(acc) and acc.num_processes > 1:
            if engine.name == "hf":  # generate() on partitioned parameters: a gather every rank must join
                raise ConfigError(
                    f"config error: DeepSpeed ZeRO-3 with {acc.num_processes} processes needs rollout.engine=vllm "
                    "or vllm_server (the hf engine generates on the partitioned parameters, which keeps no ranks "
                    f"in step); rollout.engine={cfg.rollout.engine} gave the hf engine")
        engine.weights_changed()  # the prepared weights (ZeRO-3: gathered for the engine here, on every rank)
        learner = Learner(acc, policies, model, optimizer, scheduler, engine,
                          micro_batch_size=cfg.magrpo.loss.micro_batch_size, max_grad_norm=cfg.magrpo.max_grad_norm)
    offline = (read_pairs(cfg.algorithm.dpo.offline_pairs, cfg.magrpo.num_agents)
               if cfg.algorithm.dpo.offline_pairs else [])
    rounds = build_rounds(cfg, algorithm, learner) if not offline else None
    return Components(cfg, acc, task, sandbox, policies, engine, algorithm, learner, feedback, train, evalset,
                      offline_pairs=offline, atropos=atropos, rounds=rounds)


FUSED_ADAMW_DEVICES = ("cpu", "cuda")  # where torch's fused AdamW kernel runs


def adamw(groups: list[dict[str, Any]], lr: float, weight_decay: float) -> Any:
    """torch's AdamW, its fused kernel where every weight is a float tensor on a device that has it: the same
    update in one pass over the weights (on CPU ~5x faster than the per-tensor loop, which full-weight agents
    spend a second a step in: benchmarks/compat_speed.py)."""
    params = [p for g in groups for p in g["params"]]
    fused = bool(params) and all(p.is_floating_point() and p.device.type in FUSED_ADAMW_DEVICES for p in params)
    return torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay, fused=fused or None)


def param_groups(cfg: RunConfig, policies: Any) -> list[dict[str, Any]]:
    """The optimizer's groups: the agents' trainable weights at magrpo.learning_rate and, when the agents
    carry value heads, the heads at algorithm.critic.learning_rate (null: the same rate)."""
    heads = policies.module.value_heads
    head_ids = {id(p) for p in heads.parameters()} if heads is not None else set()
    groups: list[dict[str, Any]] = [{"params": [p for p in policies.trainable_parameters() if id(p) not in head_ids]}]
    if heads is not None:
        groups.append({"params": list(heads.parameters()),
                       "lr": cfg.algorithm.critic.learning_rate or cfg.magrpo.learning_rate})
    return groups
