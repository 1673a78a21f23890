"""The run's config sections as dataclasses (`RunConfig` and the sections this package owns), each with the
checks of its own values. A module of their own below `comlrl.config.checks` (which reads a whole `RunConfig`)
and `comlrl.config.schema` (which loads one): neither imports the other for these types."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from comlrl.engines import RolloutConfig
from comlrl.errors import require
from comlrl.models import AgentsConfig, ModelConfig
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tree.contracts import TaskConfig
from feedback.context import ExternalConfig
from sandbox.executor import SandboxConfig


@dataclass
class AdvantageConfig:
    credit: str = "mean"  # cross mode: mean | sum (CoMLRL) of the returns of a completion's joint actions
    baseline: str = "mean"  # mean | loo | max | none
    scale: str = "group"  # group (divide by sibling std) | none (Dr.GRPO)
    eps: float = 1e-6
    # completions each sibling group trains, drawn with probability proportional to |advantage| and weighted by
    # its inverse (an unbiased estimate of the group's gradient at a share of the update's cost); null = all
    train_per_group: int | None = None

    def check(self) -> None:
        require(self.eps > 0, "magrpo.advantage.eps", self.eps, "a number > 0")
        require(self.train_per_group is None or self.train_per_group >= 1, "magrpo.advantage.train_per_group",
                self.train_per_group, "an integer >= 1 or null (every completion trains)")


@dataclass
class LossConfig:
    aggregation: str = "token_mean"  # token_mean | seq_mean | seq_sum (CoMLRL)
    clip_eps: float | None = None  # PPO ratio clip; needed for inner_epochs > 1
    inner_epochs: int = 1
    kl_coef: float = 0.0  # KL to the base model (adapters off)
    micro_batch_size: int = 4  # a forward within the tokens of this many longest samples (several ranks: completions)

    def check(self) -> None:
        require(self.inner_epochs >= 1, "magrpo.loss.inner_epochs", self.inner_epochs, "an integer >= 1")
        require(self.clip_eps is None or self.clip_eps > 0, "magrpo.loss.clip_eps", self.clip_eps,
                "a number > 0 or null")
        require(self.inner_epochs == 1 or self.clip_eps is not None, "magrpo.loss.inner_epochs", self.inner_epochs,
                "1 unless magrpo.loss.clip_eps is set (several epochs need the ratio clip)")
        require(self.kl_coef >= 0, "magrpo.loss.kl_coef", self.kl_coef, "a number >= 0")
        require(self.micro_batch_size >= 1, "magrpo.loss.micro_batch_size", self.micro_batch_size, "an integer >= 1")


@dataclass
class AlgorithmConfig:
    """The `algorithm` section: the algorithm's name, then one section per options type the registered
    algorithms declare (`algorithm.dpo.*`, `algorithm.critic.*`, a plugin's own; added by `run_schema`)."""

    name: str = "magrpo"  # magrpo | madpo | iac | maac | registered (comlrl.config.registry.register_algorithm)


@dataclass
class MagrpoConfig:
    num_agents: int = 2
    num_turns: int = 2
    num_generations: int = 4
    joint_mode: str = "align"  # align (G joint actions per node) | cross (G^N); CoMLRL's aligned / crossed too
    early_termination_threshold: float | None = None  # raw reward units; null disables
    discount: float = 1.0
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    learning_rate: float = 2e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    lr_schedule: str = "constant"  # constant | linear | cosine (after warmup)

    def check(self) -> None:
        for key, value in (("num_agents", self.num_agents), ("num_turns", self.num_turns),
                           ("num_generations", self.num_generations)):
            require(value >= 1, f"magrpo.{key}", value, "an integer >= 1")
        require(0.0 <= self.discount <= 1.0, "magrpo.discount", self.discount, "a number in [0, 1]")
        require(self.learning_rate > 0, "magrpo.learning_rate", self.learning_rate, "a number > 0")
        require(self.max_grad_norm > 0, "magrpo.max_grad_norm", self.max_grad_norm, "a number > 0")
        require(self.warmup_steps >= 0, "magrpo.warmup_steps", self.warmup_steps, "an integer >= 0")
        thr = self.early_termination_threshold
        require(thr is None or math.isfinite(thr), "magrpo.early_termination_threshold", thr,
                "a finite number or null")
        self.loss.check()
        self.advantage.check()


@dataclass
class TrainingConfig:
    steps: int = 8
    trees_per_step: int = 1  # trees (problems) per rank per optimizer step
    eval_every: int = 0  # 0 = only before and after training
    eval_size: int | None = None  # cap on eval problems; null = whole eval split
    save_every: int = 1  # checkpoint every k steps (and at the end); 0 = only at the end
    save_total_limit: int | None = 2  # keep the newest k checkpoints; null = every one; 0 = write none
    output_dir: str = "runs/latest"
    seed: int = 0
    resume: bool = False
    resume_from: str | None = None  # with resume: this run's checkpoint folder to start from; null = the latest
    overwrite: bool = False  # reuse an output_dir that holds an earlier run's outputs (they are replaced)
    torch_threads: int = 0  # 0 = the cores this process may use / local processes
    # stop after the step at which the steps' own time (rollout + update; evaluations, checkpoints and start-up
    # excluded; the steps before a resume included) reaches this many minutes; training.steps stays the cap.
    # Arms compared at equal training time (comlrl/run/callbacks.py: TimeBudget). null = training.steps only
    time_budget_minutes: float | None = None

    def check(self) -> None:
        for key, value in (("steps", self.steps), ("eval_every", self.eval_every), ("save_every", self.save_every),
                           ("torch_threads", self.torch_threads)):
            require(value >= 0, f"training.{key}", value, "an integer >= 0")
        require(self.time_budget_minutes is None or self.time_budget_minutes > 0, "training.time_budget_minutes",
                self.time_budget_minutes, "a number of minutes > 0, or null (training.steps only)")
        require(self.trees_per_step >= 1, "training.trees_per_step", self.trees_per_step, "an integer >= 1")
        require(bool(self.output_dir), "training.output_dir", self.output_dir, "a directory path")
        out = Path(self.output_dir).expanduser()  # a file on the way would fail the run's first write, after loading
        blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        require(blocker is None, "training.output_dir", self.output_dir, f"a directory path ({blocker} is a file)")
        require(self.save_total_limit is None or self.save_total_limit >= 0, "training.save_total_limit",
                self.save_total_limit, "an integer >= 0 (0: write none) or null (keep every checkpoint)")
        if self.resume_from is not None:
            require(self.resume, "training.resume", self.resume, "true when training.resume_from is set")
            folder, own = Path(self.resume_from).expanduser(), out / "checkpoints"
            require(folder.resolve().parent == own.resolve() and (folder / "meta.json").is_file(),
                    "training.resume_from", self.resume_from,
                    f"a checkpoint folder of this run ({own}/step-<k> with its meta.json)")


@dataclass
class EvaluationConfig:
    """How learning is measured (comlrl/run/evaluation.py): each problem gets one greedy chain and `samples`
    chains sampled at model.temperature from `seed`, on the held-out set and on a probe of the problems the
    run trains on; before and after are compared problem by problem (comlrl/run/paired.py)."""

    samples: int = 4  # sampled chains per problem, on every set (0 = greedy only)
    greedy: bool = True  # also one greedy chain per problem (eval/pass_at_1)
    probe_problems: int = 8  # the first distinct training problems the run's steps draw (0 = no probe)
    seed: int = 1234  # every evaluation samples from this seed: the same draws for the same weights

    def check(self) -> None:
        require(self.samples >= 0, "evaluation.samples", self.samples, "an integer >= 0 (0 = greedy only)")
        require(self.greedy or self.samples > 0, "evaluation.greedy", self.greedy,
                "true unless evaluation.samples > 0 (an evaluation needs greedy or sampled chains)")
        require(self.probe_problems >= 0, "evaluation.probe_problems", self.probe_problems, "an integer >= 0")


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "comlrl"
    progress_bar: bool = True


@dataclass
class RunConfig:
    plugins: list[str] = field(default_factory=list)  # user modules imported before validation (comlrl.config.registry)
    model: ModelConfig = field(default_factory=ModelConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    magrpo: MagrpoConfig = field(default_factory=MagrpoConfig)
    external: ExternalConfig = field(default_factory=ExternalConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
