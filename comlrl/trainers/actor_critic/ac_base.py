"""CoMLRL 1.4.3's `ActorCriticTrainerBase`: the constructor `IACTrainer` and `MAACTrainer` share (the same
arguments, in 1.4.3's order), on this engine's `iac` / `maac` (`comlrl.trainers.actor_critic.mapping` says what
every field becomes). `train()` and `save_model(dir)` are every compatible trainer's (`comlrl.trainers.base`):
save_model also writes the agents' value heads, as `dir/value_heads.pt`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from comlrl.errors import ConfigError
from comlrl.trainers.actor_critic.mapping import map_actor_critic
from comlrl.trainers.base import CompatTrainer, need_reward, need_transition
from comlrl.trainers.callbacks import RewardCall, TransitionCall, formatters_for
from comlrl.trainers.mapping import Mapped
from comlrl.trainers.task import Hooks

__all__ = ["ActorCriticTrainerBase"]


class ActorCriticTrainerBase(CompatTrainer):
    """An actor-critic of 1.4.3 on this engine's value heads: each subclass names its config class, this engine's
    algorithm (`algorithm`) and how its critic differs from 1.4.3's (`critic_note`, the warning where a critic
    model is passed)."""

    algorithm = "iac"
    critic_note = ""

    def __init__(self, agent_model: Any = None, critic_model: Any = None, tokenizer: Any = None,
                 reward_func: Callable[..., Any] | None = None,
                 reward_processor: Callable[[float], float] | None = None, formatters: Any = None,
                 args: Any = None, train_dataset: Any = None, eval_dataset: Any = None,
                 model_config: Mapping[str, Any] | None = None, wandb_config: Mapping[str, Any] | None = None,
                 metrics_callback: Callable[..., Any] | None = None,
                 external_transition: Callable[..., Any] | None = None, agents: Sequence[Any] | None = None,
                 critics: Sequence[Any] | None = None, *, overrides: Sequence[str] = ()) -> None:
        args = args if args is not None else self.default_config_cls()
        if not isinstance(args, self.default_config_cls):
            raise ConfigError(f"config error: args: expected a {self.default_config_cls.__name__}, got "
                              f"{type(args).__name__}")
        need_reward(reward_func)
        need_transition(args, external_transition)
        if not self.separate_critic(args) and (critic_model is not None or critics is not None):
            raise ConfigError(f"config error: critic_model: a critic model is given with "
                              f"{type(args).__name__}.use_separate_critic=False (as 1.4.3 refuses)")
        n = int(args.num_agents)  # 1.4.3's actor-critics take the agent count from the config
        hooks = Hooks(tuple(formatters_for(formatters, n, args.external_prompt_passthrough)),
                      RewardCall(reward_func, n, reward_processor, read="joint", all_prompts=True),
                      TransitionCall(external_transition, n) if external_transition is not None else None)
        not_used = {"critic_model": (critic_model, self.critic_note), "critics": (critics, self.critic_note),
                    "metrics_callback": (metrics_callback, "it reads 1.4.3's RolloutSamples; the run logs its own "
                                         "metrics")}
        self._setup(args, hooks, agent_model=agent_model, agents=agents, num_agents=n, tokenizer=tokenizer,
                    model_config=model_config, train_dataset=train_dataset, eval_dataset=eval_dataset,
                    wandb_config=wandb_config, not_used=not_used, overrides=overrides, nested_model_kwargs=True)

    @staticmethod
    def separate_critic(args: Any) -> bool:
        """Whether 1.4.3 trains a critic model of its own for `args` (MAAC always does; IAC says in its config)."""
        return True

    @staticmethod
    def head_options(args: Any) -> dict[str, Any]:
        """The critic options only some configs have, by name (IAC's hidden dims and value clip; MAAC has none)."""
        return {}

    def _map(self, train_rows: int) -> Mapped:
        return map_actor_critic(self.args, algorithm=self.algorithm, defaults=self.default_config_cls(),
                                separate=self.separate_critic(self.args), train_rows=train_rows,
                                head_options=self.head_options(self.args),
                                evaluate=bool(self.eval_items))
