"""CoMLRL 1.4.3's `MAGRPOConfig`: the same fields, defaults and checks, so a script written for that library
builds it unchanged. What each field becomes on this engine is `comlrl.trainers.mapping` (docs/comlrl-compat.md).

A value 1.4.3 itself refuses is refused here too, as a `ConfigError` (a `ValueError`, as 1.4.3 raises) naming
the field, e.g. `config error: MAGRPOConfig.num_generations=1 is not allowed; expected an integer >= 2 ...`.
The names of the releases before 1.4 (`learning_rate`, `termination_threshold`, ...) are accepted too
(`comlrl.trainers.legacy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.errors import require
from comlrl.trainers.legacy import MAGRPO_RENAMED, MAGRPO_RETIRED, LegacyFields

PARALLEL_MODES = ("none", "mp")  # parallel_training; 1.4.3 also reads "null" as "none"


def check_field(config: object, ok: bool, name: str, value: object, allowed: str) -> None:
    """1.4.3's check of one field, as a one-line `ConfigError` naming the config class and the field."""
    require(ok, f"{type(config).__name__}.{name}", value, allowed)


def parallel_mode(config: object, value: object) -> str:
    """1.4.3's reading of parallel_training (None and "null" are "none"), refusing what it refuses."""
    mode = str(value or "none").strip().lower()
    mode = "none" if mode == "null" else mode
    check_field(config, mode in PARALLEL_MODES, "parallel_training", value, "one of: none, mp")
    return mode


@dataclass
class MAGRPOConfig(metaclass=LegacyFields):
    """Configuration for MAGRPO training: every field of CoMLRL 1.4.3's, with its default."""

    renamed_fields = MAGRPO_RENAMED  # not fields: the names before 1.4 (comlrl.trainers.legacy)
    retired_fields = MAGRPO_RETIRED

    # Core setup
    num_train_epochs: int = 20
    agent_learning_rate: float = 5.0e-6
    logging_steps: int = 50
    num_agents: int = 2
    parallel_training: str = "none"
    agent_devices: str | Sequence[str] | None = None

    # Sampling/generation
    num_generations: int = 4
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50

    # Multi-turn / tree rollout
    num_turns: int = 2
    discount: float = 1.0
    joint_mode: str = "aligned"
    early_termination_threshold: float | None = -0.2
    external_prompt_passthrough: bool = False

    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    rollout_buffer_size: int = 2
    train_batch_size: int | None = None
    advantage_normalization: bool = True
    advantage_mode: str = "mean"
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: str | Sequence[str] | None = None

    def __post_init__(self) -> None:
        """1.4.3's own checks (and its filling-in of train_batch_size and parallel_training)."""

        def check(ok: bool, name: str, value: Any, allowed: str) -> None:
            check_field(self, ok, name, value, allowed)

        check(self.num_train_epochs >= 1, "num_train_epochs", self.num_train_epochs, "an integer >= 1")
        check(self.num_agents >= 1, "num_agents", self.num_agents, "an integer >= 1")
        check(self.num_generations >= 2, "num_generations", self.num_generations,
              "an integer >= 2 (the group baseline needs several samples)")
        check(self.rollout_buffer_size >= 1, "rollout_buffer_size", self.rollout_buffer_size, "an integer >= 1")
        check(self.eval_interval >= 0, "eval_interval", self.eval_interval, "an integer >= 0")
        check(self.eval_num_samples >= 0, "eval_num_samples", self.eval_num_samples, "an integer >= 0")
        check(self.eval_batch_size >= 1, "eval_batch_size", self.eval_batch_size, "an integer >= 1")
        check(self.num_turns >= 1, "num_turns", self.num_turns, "an integer >= 1")
        check(self.logging_steps >= 1, "logging_steps", self.logging_steps, "an integer >= 1")
        if self.train_batch_size is None:
            self.train_batch_size = self.rollout_buffer_size
        check(self.train_batch_size >= 1, "train_batch_size", self.train_batch_size, "an integer >= 1 or None")
        mode = parallel_mode(self, self.parallel_training)
        check(mode != "mp" or self.agent_devices is not None, "parallel_training", self.parallel_training,
              "none unless agent_devices names a device per agent")
        self.parallel_training = mode
        check(self.reference_kl_coef >= 0, "reference_kl_coef", self.reference_kl_coef, "a number >= 0")
