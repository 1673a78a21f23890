"""`MAGRPOTrainer` and `MAGRPOConfig` as CoMLRL 1.4.3 declares them (`comlrl.trainers.reinforce.magrpo`), trained by
this engine: a script written for that library runs unchanged (docs/comlrl-compat.md).

    trainer = MAGRPOTrainer(agent_model="Qwen/Qwen2.5-0.5B", num_agents=2, reward_func=reward, formatters=[f0, f1],
                            external_transition=transition, args=MAGRPOConfig(num_turns=2), train_dataset=rows)
    trainer.train()
    trainer.save_model("out")  # out/agent_0/, out/agent_1/: plain model folders, as 1.4.3 writes them

The constructor checks everything and builds the run's `RunConfig` (`trainer.run_config`; every field's fate is
`comlrl.trainers.mapping`) and registers the task its callables make, without loading a model; `train()` calls
`comlrl.api.train` in this process, so the run writes what every run writes (`trainer.output_dir`: metrics.jsonl,
trees.jsonl, checkpoints, final/). `overrides` (keyword only, not in 1.4.3) takes `key=value` strings for this
engine's keys, applied last (e.g. `training.output_dir=runs/x`, `agents.mode=lora`). The MAGRPO variants
(`mareinforce`, `maremax`, `marloo`, `centralized_magrpo`) subclass it, as in 1.4.3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from comlrl.trainers.base import CompatTrainer, alias, need_reward, need_transition
from comlrl.trainers.callbacks import RewardCall, TransitionCall, formatters_for
from comlrl.trainers.config import MAGRPOConfig
from comlrl.trainers.mapping import Mapped, map_config
from comlrl.trainers.task import Hooks

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]


class MAGRPOTrainer(CompatTrainer):
    """CoMLRL 1.4.3's constructor, `train()` and `save_model(dir)`, on this engine's tree, rollouts and update."""

    default_config_cls: type[MAGRPOConfig] = MAGRPOConfig
    algorithm_name = "MAGRPO"

    def __init__(self, agent_model: Any = None, agents: Sequence[Any] | None = None, num_agents: int = 2,
                 tokenizer: Any = None, model_config: Mapping[str, Any] | None = None, train_dataset: Any = None,
                 eval_dataset: Any = None, reward_func: Callable[..., Any] | None = None,
                 reward_processor: Callable[[float], float] | None = None, formatters: Any = None,
                 external_transition: Callable[..., Any] | None = None, wandb_config: Mapping[str, Any] | None = None,
                 eval_logger: Callable[..., Any] | None = None, eval_aggregator: Callable[..., Any] | None = None,
                 args: MAGRPOConfig | None = None, *, model: Any = None, models: Sequence[Any] | None = None,
                 dataset_type: str | None = None, overrides: Sequence[str] = ()) -> None:
        args = args if args is not None else self.default_config_cls()
        agent_model = alias("agent_model", agent_model, "model", model)
        agents = alias("agents", agents, "models", models)
        if agents is not None and agent_model is None and isinstance(agents, Sequence):
            num_agents = len(agents)
        need_reward(reward_func)
        need_transition(args, external_transition)
        hooks = Hooks(tuple(formatters_for(formatters, num_agents, args.external_prompt_passthrough)),
                      RewardCall(reward_func, num_agents, reward_processor),
                      TransitionCall(external_transition, num_agents) if external_transition is not None else None)
        not_used = {"eval_logger": (eval_logger, "evaluation logs the reward per turn: eval/... keys"),
                    "eval_aggregator": (eval_aggregator, "evaluation logs the reward per turn"),
                    "dataset_type": (dataset_type, "releases before 1.4 only named the data set")}
        self._setup(args, hooks, agent_model=agent_model, agents=agents, num_agents=num_agents, tokenizer=tokenizer,
                    model_config=model_config, train_dataset=train_dataset, eval_dataset=eval_dataset,
                    wandb_config=wandb_config, not_used=not_used, overrides=overrides)

    def _map(self, train_rows: int) -> Mapped:
        return map_config(self.args, num_agents=self.num_agents, train_rows=train_rows,
                          evaluate=bool(self.eval_items))
