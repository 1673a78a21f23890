"""CoMLRL 1.4.3's `IACTrainer` / `IACConfig` (`comlrl.trainers.actor_critic.iac`): independent actor-critics, one
critic per agent, trained by this engine's `iac`: a linear value head on each agent's own model
(`comlrl.trainers.actor_critic.mapping` has what every field becomes; docs/comlrl-compat.md).

    trainer = IACTrainer(agent_model="Qwen/Qwen2.5-0.5B", reward_func=reward, formatters=[f0, f1],
                         args=IACConfig(num_turns=1, use_separate_critic=False), train_dataset=rows)
    trainer.train()
    trainer.save_model("out")  # out/agent_0/, out/agent_1/ and the value heads, out/value_heads.pt
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from comlrl.trainers.actor_critic.checks import check_actor_critic

__all__ = ["Formatter", "IACConfig", "IACTrainer", "MetricsCallback", "RewardFunc", "RolloutSample"]

RewardFunc = Callable[..., Sequence[float]]
Formatter = Callable[[dict[str, Any]], str]


@dataclass
class IACConfig:
    """Configuration for independent actor-critic training: every field of CoMLRL 1.4.3's, with its default."""

    agent_learning_rate: float = 5e-6
    critic_learning_rate: float | None = 5e-6
    rollout_buffer_size: int = 8
    train_batch_size: int | None = None
    value_clip_range: float | None = 0.2
    value_loss_coef: float = 0.6
    advantage_normalization: bool = True
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = None
    num_train_epochs: int = 40
    use_separate_critic: bool = True
    critic_type: str = "v"  # "v" (V(h)) or "q" (Q(h, a))
    critic_value_head_hidden_dim: int | None = None
    value_head_hidden_dim: int | None = None
    num_agents: int = 2
    num_turns: int = 2
    parallel_training: str = "none"
    agent_devices: str | Sequence[str] | None = None
    critic_devices: str | Sequence[str] | None = None
    external_prompt_passthrough: bool = False
    discount: float = 1.0
    num_generations: int = 1
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    early_termination_threshold: float | None = -0.2
    logging_steps: int = 1
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: str | Sequence[str] | None = None

    def __post_init__(self) -> None:
        """1.4.3's checks; its critic_learning_rate None is agent_learning_rate."""
        check_actor_critic(self, self.use_separate_critic)
        if self.critic_learning_rate is None:
            self.critic_learning_rate = self.agent_learning_rate


@dataclass
class RolloutSample:
    """1.4.3's record of one agent's sample (what its `metrics_callback` reads). Importable for scripts that name
    it; nothing here makes one: this engine's samples are the tree's nodes (trees.jsonl)."""

    agent_idx: int
    prompt: str
    completion: str
    full_input_ids: Any
    attention_mask: Any
    prompt_len: int
    response_len: int
    old_logprob: Any
    old_value: Any
    reward: Any
    returns: Any
    advantage: Any
    normalized_advantage: Any | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


MetricsCallback = Callable[[list[RolloutSample]], dict[str, float]]


class IACTrainer(ActorCriticTrainerBase):
    """1.4.3's IAC on this engine's `iac`: per agent, a value head on its own model is the critic of its state."""

    @staticmethod
    def separate_critic(args: Any) -> bool:
        """IAC trains a critic model of its own unless its config says `use_separate_critic=False`."""
        return bool(args.use_separate_critic)

    @staticmethod
    def head_options(args: Any) -> dict[str, Any]:
        """IACConfig's critic options that MAACConfig lacks."""
        return {"value_head_hidden_dim": args.value_head_hidden_dim,
                "critic_value_head_hidden_dim": args.critic_value_head_hidden_dim,
                "value_clip_range": args.value_clip_range}

    default_config_cls = IACConfig
    algorithm_name = "IAC"
    algorithm = "iac"
    critic_note = ("the critic is a linear value head on each agent's own model, trained with the agent's weights at "
                   "critic_learning_rate; 1.4.3 trains this separate critic model instead")
