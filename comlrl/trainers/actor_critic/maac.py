"""CoMLRL 1.4.3's `MAACTrainer` / `MAACConfig` (`comlrl.trainers.actor_critic.maac`): actor-critics with one shared
critic of the team, trained by this engine's `maac`: the team's value is the mean of linear value heads on the
agents' own models, one head over every agent's view of the state (`comlrl.trainers.actor_critic.mapping` has
what every field becomes; docs/comlrl-compat.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from comlrl.trainers.actor_critic.checks import check_actor_critic
from comlrl.trainers.actor_critic.iac import Formatter, MetricsCallback, RewardFunc

__all__ = ["Formatter", "MAACConfig", "MAACTrainer", "MetricsCallback", "RewardFunc"]


@dataclass
class MAACConfig:
    """Configuration for multi-agent actor-critic training with a shared critic: every field of CoMLRL 1.4.3's,
    with its default."""

    agent_learning_rate: float = 5e-6
    critic_learning_rate: float = 5e-6
    rollout_buffer_size: int = 8
    train_batch_size: int | None = None
    value_loss_coef: float = 0.6
    advantage_normalization: bool = True
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = None
    num_train_epochs: int = 40
    num_agents: int = 2
    num_generations: int = 1
    num_turns: int = 2
    parallel_training: str = "none"
    agent_devices: str | Sequence[str] | None = None
    critic_devices: str | Sequence[str] | None = None
    external_prompt_passthrough: bool = False
    discount: float = 1.0
    critic_type: str = "v"  # "v" (V(s)) or "q" (Q(s, a))
    early_termination_threshold: float | None = -0.2
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    logging_steps: int = 1
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: str | Sequence[str] | None = None

    def __post_init__(self) -> None:
        """1.4.3's checks (its shared critic always has devices of its own)."""
        check_actor_critic(self, separate_critic=True)


class MAACTrainer(ActorCriticTrainerBase):
    """1.4.3's MAAC on this engine's `maac`: the team's value is the mean of the agents' value heads."""

    default_config_cls = MAACConfig
    algorithm_name = "MAAC"
    algorithm = "maac"
    critic_note = ("the team critic is the mean of linear value heads on the agents' own models, trained with them "
                   "at critic_learning_rate; 1.4.3 trains this separate critic model on the joint prompt's text")
