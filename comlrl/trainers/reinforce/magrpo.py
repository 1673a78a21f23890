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
engine's keys, applied last (e.g. `training.output_dir=runs/x`, `agents.mode=lora`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from comlrl.api import TrainResult
from comlrl.api import train as run_train
from comlrl.config.schema import RunConfig, load_config
from comlrl.errors import ConfigError
from comlrl.trainers.callbacks import RewardCall, TransitionCall, formatters_for
from comlrl.trainers.config import MAGRPOConfig
from comlrl.trainers.mapping import evaluates, map_config
from comlrl.trainers.sources import agent_sources, resolve_sources
from comlrl.trainers.task import Hooks, register_item_task, task_rows

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]

log = logging.getLogger("comlrl.trainers")


def _items(dataset: Iterable[Any], label: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The items of a list of dicts or a `datasets.Dataset` / `IterableDataset` (iterated as 1.4.3's loader does)."""
    if isinstance(dataset, str | bytes | Mapping) or not isinstance(dataset, Iterable):
        raise ConfigError(f"config error: {label}: expected a list of dicts or a datasets.Dataset, got "
                          f"{type(dataset).__name__}")
    rows = list(islice(dataset, limit))
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigError(f"config error: {label}[{i}] is a {type(row).__name__}, expected a dict")
    return [dict(row) for row in rows]


def _assign(cfg: RunConfig, key: str, value: Any) -> None:
    *path, last = key.split(".")
    node: Any = cfg
    for part in path:
        node = vars(node)[part]
    setattr(node, last, value)


def _named(exc: ConfigError, sources: Mapping[str, str]) -> ConfigError:
    """The config error with the MAGRPOConfig field its key came from, when it came from one."""
    msg = str(exc)
    for key, source in sources.items():
        if source and msg.startswith(f"config error: {key}"):
            return ConfigError(f"{msg} (from MAGRPOConfig.{source})")
    return exc


def _alias(name: str, value: Any, old: str, old_value: Any) -> Any:
    if old_value is not None and value is not None:
        raise ConfigError(f"config error: {old}: the older name of {name}; pass one of them")
    return value if value is not None else old_value


class MAGRPOTrainer:
    """CoMLRL 1.4.3's constructor, `train()` and `save_model(dir)`, on this engine's tree, rollouts and update."""

    default_config_cls = MAGRPOConfig
    algorithm_name = "MAGRPO"

    def __init__(self, agent_model: Any = None, agents: Sequence[Any] | None = None, num_agents: int = 2,
                 tokenizer: Any = None, model_config: Mapping[str, Any] | None = None, train_dataset: Any = None,
                 eval_dataset: Any = None, reward_func: Callable[..., Any] | None = None,
                 reward_processor: Callable[[float], float] | None = None, formatters: Any = None,
                 external_transition: Callable[..., Any] | None = None, wandb_config: Mapping[str, Any] | None = None,
                 eval_logger: Callable[..., Any] | None = None, eval_aggregator: Callable[..., Any] | None = None,
                 args: MAGRPOConfig | None = None, *, model: Any = None, models: Sequence[Any] | None = None,
                 dataset_type: str | None = None, overrides: Sequence[str] = ()) -> None:
        self.args = args if args is not None else self.default_config_cls()
        agent_model = _alias("agent_model", agent_model, "model", model)
        agents = _alias("agents", agents, "models", models)
        if agents is not None and agent_model is None and isinstance(agents, Sequence):
            num_agents = len(agents)
        self.num_agents = num_agents
        sources = agent_sources(agent_model, agents, num_agents)
        if reward_func is None:
            raise ConfigError("config error: reward_func: a callable that returns a list of floats is required")
        if self.args.num_turns > 1 and external_transition is None:
            raise ConfigError(f"config error: external_transition: MAGRPOConfig.num_turns={self.args.num_turns} "
                              "needs one (multi-turn MAGRPO builds the next turn's prompts with it)")
        hooks = Hooks(tuple(formatters_for(formatters, num_agents, self.args.external_prompt_passthrough)),
                      RewardCall(reward_func, num_agents, reward_processor),
                      TransitionCall(external_transition, num_agents) if external_transition is not None else None)
        self.sources = resolve_sources(sources, tokenizer, model_config, self)
        self.warnings = list(self.sources.warnings)
        self._wandb = self._wandb_keys(wandb_config)
        for name, value, why in (("eval_logger", eval_logger, "evaluation logs the reward per turn: eval/... keys"),
                                 ("eval_aggregator", eval_aggregator, "evaluation logs the reward per turn"),
                                 ("dataset_type", dataset_type, "releases before 1.4 only named the data set")):
            if value is not None:
                self.warnings.append(f"{name}: not used here ({why})")
        self.train_items = _items(train_dataset, "train_dataset") if train_dataset is not None else None
        self.eval_items = (_items(eval_dataset, "eval_dataset", self.args.eval_num_samples)
                           if evaluates(self.args, eval_dataset is not None) else [])
        self.overrides = list(overrides)
        self.task_name = register_item_task(hooks, num_agents)
        self.run_config: RunConfig | None = None
        if self.train_items is not None:
            self.run_config = self._config(self.train_items)
        for line in self.warnings:
            log.warning("%s", line)
        self.output_dir: Path | None = None
        self.result: TrainResult | None = None
        self._scratch: weakref.finalize | None = None  # removes the temporary run folder (`_output_dir`)

    def _wandb_keys(self, wandb_config: Mapping[str, Any] | None) -> dict[str, Any]:
        if wandb_config is None:
            return {}
        rest = sorted(k for k in wandb_config if k != "project")
        if rest:
            self.warnings.append(f"wandb_config: {', '.join(rest)} have no meaning here (the W&B run is written to "
                                 "<output_dir>/wandb, in project logging.wandb_project)")
        return {"logging.wandb": True, "logging.wandb_project": str(wandb_config.get("project", "comlrl"))}

    def _config(self, train_items: list[dict[str, Any]]) -> RunConfig:
        """The run's config: the mapped MAGRPOConfig fields, the agents' models, then `overrides`."""
        mapped = map_config(self.args, num_agents=self.num_agents, train_rows=len(train_items),
                            evaluate=bool(self.eval_items))
        self.warnings.extend(mapped.warnings)
        cfg = load_config(None, [f"task.name={self.task_name}", f"magrpo.num_agents={self.num_agents}"])
        for key, value in {**mapped.keys, **self.sources.keys, **self._wandb}.items():
            _assign(cfg, key, value)
        cfg.dataset.eval_size = len(self.eval_items)
        try:
            cfg = load_config(cfg, self.overrides)
        except ConfigError as exc:
            raise _named(exc, mapped.sources) from None
        if cfg.agents.mode == "lora" and cfg.agents.models:
            raise ConfigError("config error: agents.mode=lora puts every agent on one base model; the agents given "
                              f"are different models ({', '.join(cfg.agents.models)})")
        return cfg

    def _output_dir(self, cfg: RunConfig, checkpoint_dir: str | Path | None) -> str:
        """Where the run writes: `checkpoint_dir`, an output_dir given in `overrides`, or (as 1.4.3 writes
        nothing without a checkpoint_dir) a temporary folder removed with the trainer or at exit, whatever
        `train()` did; `save_model` reads the trained weights from it until then."""
        if checkpoint_dir is not None:
            return str(checkpoint_dir)
        if any(o.split("=", 1)[0].strip() == "training.output_dir" for o in self.overrides):
            return cfg.training.output_dir
        folder = tempfile.mkdtemp(prefix="comlrl-magrpo-run-")
        self._scratch = weakref.finalize(self, shutil.rmtree, folder, True)
        return folder

    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int = 1, checkpoint_total_limit: int | None = None, **kwargs: Any) -> None:
        """Train as 1.4.3's `train` does, by this engine's run (`comlrl.api.train`); `trainer.result` holds its
        metrics and paths. checkpoint_dir: the run's output_dir (checkpoints every checkpoint_interval epochs);
        resume_from_checkpoint: a run directory this engine wrote."""
        if kwargs:
            raise ConfigError(f"config error: train: {', '.join(sorted(kwargs))}: generation keywords are not "
                              "passed on here (sampling comes from MAGRPOConfig's temperature, top_p, top_k)")
        if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int) or checkpoint_interval < 1:
            raise ConfigError(f"config error: train: checkpoint_interval={checkpoint_interval!r} is not allowed; "
                              "expected a positive integer")
        if self.run_config is None or self.train_items is None:
            raise ConfigError("config error: train_dataset: training requires a train_dataset")
        cfg = load_config(self.run_config)
        cfg.training.save_total_limit = checkpoint_total_limit  # None: every checkpoint is kept, as in 1.4.3
        resume = resume_from_checkpoint is not None
        if resume:
            run = Path(resume_from_checkpoint)
            if not (run / "checkpoints").is_dir() or not (run / "dataset.jsonl").is_file():
                raise ConfigError(f"config error: train: resume_from_checkpoint={str(run)!r} is not a run directory "
                                  "this engine wrote (checkpoints/ and dataset.jsonl); CoMLRL's own checkpoints "
                                  "cannot be resumed here")
            cfg.training.output_dir, cfg.training.resume = str(run), True
            cfg.dataset.name, cfg.dataset.path = "hf", str(run / "dataset.jsonl")
        else:
            cfg.training.output_dir = self._output_dir(cfg, checkpoint_dir)
        if checkpoint_dir is not None or resume:
            cfg.training.save_every = checkpoint_interval * len(self.train_items)
        elif self._scratch is not None:  # no checkpoint asked for: one at the end (the run's own), in the scratch
            cfg.training.save_every, cfg.training.save_total_limit = 0, 1
        self.output_dir = Path(cfg.training.output_dir)
        log.info("MAGRPOTrainer: training in %s", self.output_dir)
        rows = None if resume else task_rows(self.train_items, self.eval_items)
        self.result = run_train(cfg, dataset=rows)

    def save_model(self, output_dir: str | Path) -> None:
        """Each agent's trained model as a plain folder `output_dir/agent_<i>/` (weights and tokenizer, as 1.4.3
        writes them; LoRA adapters merged into their base), replacing an agent_<i>/ already there."""
        if self.result is None:
            raise RuntimeError("save_model: call train() first (the agents are trained by this engine's run)")
        from comlrl.export.merge import merge_run

        dest = Path(output_dir)
        dest.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".save-", dir=dest))
        try:
            for a, folder in enumerate(merge_run(self.result.output_dir, staging / "agents")):
                target = dest / f"agent_{a}"
                if target.exists():
                    shutil.rmtree(target)
                folder.replace(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        log.info("MAGRPOTrainer: agents saved to %s", dest)
