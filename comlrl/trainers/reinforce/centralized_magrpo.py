"""CoMLRL 1.4.3's `CentralizedMAGRPOTrainer` / `CentralizedMAGRPOConfig`: one policy writes every agent's output in
one completion, which the user's `centralized_adapter` builds the prompt for and cuts back into the agents'
outputs for the reward. Trained here as 1.4.3 trains it: `magrpo` with one agent (`magrpo.num_agents=1`), whose
prompt is `adapter.build_prompt(item, [each agent's formatter(item)])` and whose reward of a completion is
`reward_func` on `adapter.parse_completion(...)` (every agent "" when it raises `CentralizedComparatorParseError`).
This engine's own `algorithm.name=centralized` is not used: it writes its own tags around a task's roles, where
here the adapter is the protocol (docs/comlrl-compat.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.errors import ConfigError
from comlrl.trainers.base import need_reward
from comlrl.trainers.callbacks import CallbackError, Formatter, RewardCall, formatters_for
from comlrl.trainers.config import check_field
from comlrl.trainers.mapping import Mapped, map_config
from comlrl.trainers.preference.centralized import CentralizedComparatorParseError
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer"]


@dataclass
class CentralizedMAGRPOConfig(MAGRPOConfig):
    """MAGRPOConfig for one joint policy: one turn, `collaboration_mode="centralized"`, `num_agents` the roles."""

    num_turns: int = 1
    collaboration_mode: str = "centralized"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_field(self, self.collaboration_mode == "centralized", "collaboration_mode", self.collaboration_mode,
                    "centralized")
        check_field(self, self.num_turns == 1, "num_turns", self.num_turns, "1 (centralized MAGRPO is one turn)")


class CentralizedPrompt:
    """The policy's prompt of an item: the adapter's joint prompt over every role's formatted prompt."""

    def __init__(self, adapter: Any, roles: list[Formatter]) -> None:
        self.adapter, self.roles = adapter, roles

    def __call__(self, item: Mapping[str, Any]) -> str:
        prompt = self.adapter.build_prompt(item, [role.first(item) for role in self.roles])
        if not isinstance(prompt, str) or not prompt.strip():
            raise CallbackError("centralized_adapter.build_prompt returned no prompt; expected a non-empty string")
        return prompt


class CentralizedReward:
    """A completion's reward: cut into the roles' outputs by the adapter, scored by the user's reward function
    as a joint action of the roles (its `prompts`: the first role's prompt, as 1.4.3 passes it)."""

    def __init__(self, adapter: Any, roles: list[Formatter], reward: RewardCall) -> None:
        self.adapter, self.roles, self.reward = adapter, roles, reward

    def split(self, completion: str, item: Mapping[str, Any]) -> list[str]:
        try:
            outputs = self.adapter.parse_completion(completion, dict(item), len(self.roles))
        except CentralizedComparatorParseError:
            return [""] * len(self.roles)
        if isinstance(outputs, str | bytes) or len(list(outputs)) != len(self.roles) or not all(
                isinstance(o, str) for o in outputs):
            raise CallbackError(f"centralized_adapter.parse_completion returned {outputs!r:.80}; expected "
                                f"{len(self.roles)} strings (one per agent)")
        return list(outputs)

    def __call__(self, completions: list[str], batch_items: list[dict[str, Any]] | None = None) -> list[float]:
        item = (batch_items or [{}])[0]
        raw, _ = self.reward(self.split(completions[0], item), item, self.roles[0].first(item))
        return [raw]


class CentralizedMAGRPOTrainer(MAGRPOTrainer):
    """One joint policy trained by MAGRPO on the task reward of its split outputs (see the module docstring)."""

    default_config_cls = CentralizedMAGRPOConfig
    algorithm_name = "CentralizedMAGRPO"

    def __init__(self, *, centralized_adapter: Any, num_agents: int = 2, agents: Sequence[Any] | None = None,
                 tokenizer: Any = None, reward_func: Callable[..., Any] | None = None, formatters: Any = None,
                 args: CentralizedMAGRPOConfig | None = None, reward_processor: Callable[[float], float] | None = None,
                 **kwargs: Any) -> None:
        args = args if args is not None else self.default_config_cls()
        if (not isinstance(args, CentralizedMAGRPOConfig) or args.collaboration_mode != "centralized"
                or args.num_turns != 1):
            raise ConfigError("config error: args: CentralizedMAGRPOTrainer needs a CentralizedMAGRPOConfig (one turn, "
                              "collaboration_mode='centralized')")
        if num_agents != args.num_agents:
            raise ConfigError(f"config error: num_agents={num_agents} must match args.num_agents={args.num_agents} "
                              "(the number of roles)")
        if agents is not None and len(agents) != 1:
            raise ConfigError(f"config error: agents: {len(agents)} models; centralized training has one policy")
        if isinstance(tokenizer, list | tuple) and len(tokenizer) != 1:
            raise ConfigError("config error: tokenizer: centralized training has one policy and one tokenizer")
        for name in ("build_prompt", "parse_completion"):
            if not callable(getattr(centralized_adapter, name, None)):
                raise ConfigError(f"config error: centralized_adapter.{name} must be callable")
        need_reward(reward_func)
        self.num_roles = num_agents
        roles = formatters_for(formatters, num_agents, False)
        self.centralized = CentralizedReward(centralized_adapter, roles,
                                             RewardCall(reward_func, num_agents, None, read="one"))
        self._prompt = CentralizedPrompt(centralized_adapter, roles)
        super().__init__(agents=agents, num_agents=1, tokenizer=tokenizer, reward_func=self.centralized,
                         reward_processor=reward_processor, formatters=self._prompt, args=args, **kwargs)

    def _map(self, train_rows: int) -> Mapped:
        """MAGRPO's mapping for the roles, trained as one policy."""
        return map_config(self.args, num_agents=self.num_roles, train_rows=train_rows, evaluate=bool(self.eval_items),
                          policies=1)
