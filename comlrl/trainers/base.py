"""What every CoMLRL-compatible trainer shares, whatever its 1.4.3 constructor looks like: the checked set-up that
builds the run's `RunConfig` without loading a model, `train()` through `comlrl.api.train` in this process and
`save_model(dir)` (docs/comlrl-compat.md).

A trainer class (`MAGRPOTrainer`, `IACTrainer`, ...) keeps 1.4.3's constructor signature, builds its `Hooks`
(the task its callables make) and calls `_setup`; `_map` says what its config's fields become (a
`comlrl.trainers.mapping.Mapped`). `overrides` (keyword only, not in 1.4.3) takes `key=value` strings for this
engine's keys, applied last (e.g. `training.output_dir=runs/x`, `agents.mode=lora`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from comlrl.api import TrainResult, _train
from comlrl.config.schema import RunConfig, load_config
from comlrl.errors import ConfigError
from comlrl.trainers.mapping import Mapped, evaluates
from comlrl.trainers.sources import agent_sources, resolve_sources
from comlrl.trainers.task import Hooks, register_item_task, task_rows

log = logging.getLogger("comlrl.trainers")


def items_of(dataset: Iterable[Any], label: str, limit: int | None = None) -> list[dict[str, Any]]:
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


def global_seed() -> int:
    """torch's global seed, as `torch.manual_seed` or `transformers.set_seed` left it before the trainer was made:
    1.4.3 samples from torch's global generator, so a script's seed chooses its run (a seed sweep is three runs,
    not one three times); here it is `training.seed`, which seeds every step's sampling."""
    import torch

    return torch.initial_seed() % 2**31


def _named(exc: ConfigError, mapped: Mapped) -> ConfigError:
    """The config error with the config field its key came from, when it came from one."""
    msg = str(exc)
    for key, source in mapped.sources.items():
        if source and msg.startswith(f"config error: {key}"):
            return ConfigError(f"{msg} (from {mapped.label}.{source})")
    return exc


def alias(name: str, value: Any, old: str, old_value: Any) -> Any:
    """An argument and its name before 1.4 (`model` for `agent_model`, ...): one of them."""
    if old_value is not None and value is not None:
        raise ConfigError(f"config error: {old}: the older name of {name}; pass one of them")
    return value if value is not None else old_value


def need_reward(reward_func: Any) -> None:
    if reward_func is None:
        raise ConfigError("config error: reward_func: a callable that returns a list of floats is required")


def need_transition(args: Any, external_transition: Any) -> None:
    """Several turns need the external transition, as in 1.4.3."""
    if args.num_turns > 1 and external_transition is None:
        raise ConfigError(f"config error: external_transition: {type(args).__name__}.num_turns={args.num_turns} "
                          "needs one (a turn after the first gets its prompts from it)")


class CompatTrainer:
    """The machinery of the compatible trainers (see the module docstring); not one of 1.4.3's names."""

    default_config_cls: type = object
    algorithm_name = "MAGRPO"

    def _map(self, train_rows: int) -> Mapped:
        """What the config's fields become, for `train_rows` training items (each trainer's own mapping)."""
        raise NotImplementedError

    def _setup(self, args: Any, hooks: Hooks, *, agent_model: Any, agents: Sequence[Any] | None, num_agents: int,
               tokenizer: Any, model_config: Mapping[str, Any] | None, train_dataset: Any, eval_dataset: Any,
               wandb_config: Mapping[str, Any] | None, not_used: Mapping[str, tuple[Any, str]],
               overrides: Sequence[str], nested_model_kwargs: bool = False) -> None:
        """Check everything, register the task of `hooks` and build `run_config` (when there is a train_dataset),
        without loading a model. `not_used`: argument name -> (value, why), one warning each where given."""
        self.args = args
        self.num_agents = num_agents
        self.sources = resolve_sources(agent_sources(agent_model, agents, num_agents), tokenizer, model_config, self,
                                       nested_model_kwargs)
        self.warnings = list(self.sources.warnings)
        self._wandb = self._wandb_keys(wandb_config)
        self.warnings += [f"{name}: not used here ({why})" for name, (value, why) in not_used.items()
                          if value is not None]
        self.train_items = items_of(train_dataset, "train_dataset") if train_dataset is not None else None
        self.eval_items = (items_of(eval_dataset, "eval_dataset", args.eval_num_samples)
                           if evaluates(args, eval_dataset is not None) else [])
        self.overrides = list(overrides)
        self.task_name = register_item_task(hooks, len(hooks.formatters))
        self.run_config: RunConfig | None = None
        if self.train_items is not None:
            self.run_config = self._config(self.train_items)
        for line in self.warnings:
            log.warning("%s", line)
        self.output_dir: Path | None = None
        self.result: TrainResult | None = None
        self._final: Any = None  # a scratch run's trained policies, held instead of written (`save_model` writes them)
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
        """The run's config: the mapped fields, the agents' models, then `overrides`."""
        mapped = self._map(len(train_items))
        self.warnings.extend(mapped.warnings)
        agents = mapped.keys["magrpo.num_agents"]
        cfg = load_config(None, [f"task.name={self.task_name}", f"magrpo.num_agents={agents}"])
        for key, value in {**mapped.keys, "training.seed": global_seed(), **self.sources.keys, **self._wandb}.items():
            _assign(cfg, key, value)
        cfg.dataset.eval_size = len(self.eval_items)
        try:
            cfg = load_config(cfg, self.overrides)
        except ConfigError as exc:
            raise _named(exc, mapped) from None
        if cfg.agents.mode == "lora" and cfg.agents.models:
            raise ConfigError("config error: agents.mode=lora puts every agent on one base model; the agents given "
                              f"are different models ({', '.join(cfg.agents.models)})")
        return cfg

    def _output_dir(self, cfg: RunConfig, checkpoint_dir: str | Path | None) -> tuple[str, bool]:
        """Where the run writes, and whether that is a scratch folder: `checkpoint_dir`, an output_dir given in
        `overrides`, or (as 1.4.3 writes nothing without a checkpoint_dir) a temporary folder removed with the
        trainer or at exit, whatever `train()` did; `save_model` writes the held weights there when asked."""
        if checkpoint_dir is not None:
            return str(checkpoint_dir), False
        if any(o.split("=", 1)[0].strip() == "training.output_dir" for o in self.overrides):
            return cfg.training.output_dir, False
        folder = tempfile.mkdtemp(prefix=f"comlrl-{self.algorithm_name.lower()}-run-")
        self._scratch = weakref.finalize(self, shutil.rmtree, folder, True)
        return folder, True

    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int = 1, checkpoint_total_limit: int | None = None, **kwargs: Any) -> None:
        """Train as 1.4.3's `train` does, by this engine's run (`comlrl.api.train`); `trainer.result` holds its
        metrics and paths. checkpoint_dir: the run's output_dir (checkpoints every checkpoint_interval epochs);
        resume_from_checkpoint: a run directory this engine wrote."""
        if kwargs:
            raise ConfigError(f"config error: train: {', '.join(sorted(kwargs))}: generation keywords are not "
                              "passed on here (sampling comes from the config's temperature, top_p, top_k)")
        if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int) or checkpoint_interval < 1:
            raise ConfigError(f"config error: train: checkpoint_interval={checkpoint_interval!r} is not allowed; "
                              "expected a positive integer")
        if self.run_config is None or self.train_items is None:
            raise ConfigError("config error: train_dataset: training requires a train_dataset")
        cfg = load_config(self.run_config)
        cfg.training.save_total_limit = checkpoint_total_limit  # None: every checkpoint is kept, as in 1.4.3
        resume, scratch = resume_from_checkpoint is not None, False
        if resume:
            run = Path(resume_from_checkpoint)
            if not (run / "checkpoints").is_dir() or not (run / "dataset.jsonl").is_file():
                raise ConfigError(f"config error: train: resume_from_checkpoint={str(run)!r} is not a run directory "
                                  "this engine wrote (checkpoints/ and dataset.jsonl); CoMLRL's own checkpoints "
                                  "cannot be resumed here")
            cfg.training.output_dir, cfg.training.resume = str(run), True
            cfg.dataset.name, cfg.dataset.path = "hf", str(run / "dataset.jsonl")
        else:
            cfg.training.output_dir, scratch = self._output_dir(cfg, checkpoint_dir)
        epoch_steps = -(-len(self.train_items) // cfg.training.trees_per_step)
        if checkpoint_dir is not None or resume:
            cfg.training.save_every = checkpoint_interval * epoch_steps
        elif scratch:  # no checkpoint asked for: none written, as 1.4.3 writes none
            cfg.training.save_every, cfg.training.save_total_limit = 0, 0
            cfg.logging.tensorboard = False  # nobody reads a folder removed with the trainer
        self.output_dir = Path(cfg.training.output_dir)
        log.info("%s: training in %s", type(self).__name__, self.output_dir)
        rows = None if resume else task_rows(self.train_items, self.eval_items)
        self._final = None
        self.result = _train(cfg, {"dataset": rows}, (), report=not scratch,
                             hold_final=self._hold_final if scratch else None)

    def _hold_final(self, policies: Any) -> None:
        self._final = policies

    def save_model(self, output_dir: str | Path) -> None:
        """Each agent's trained model as a plain folder `output_dir/agent_<i>/` (weights and tokenizer, as 1.4.3
        writes them; LoRA adapters merged into their base), replacing an agent_<i>/ already there; an
        actor-critic's value heads (every agent's, one file) as `output_dir/value_heads.pt`."""
        if self.result is None:
            raise RuntimeError("save_model: call train() first (the agents are trained by this engine's run)")
        from comlrl.export.merge import merge_run, weights_dir
        from comlrl.policy.policies import VALUE_HEADS
        from comlrl.run.outputs import OUTPUTS

        if self._final is not None:  # a scratch run: its weights were held, written now that they are asked for
            self._final.save(self.result.output_dir / OUTPUTS["final"])
            self._final = None
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
        heads = weights_dir(Path(self.result.output_dir)) / VALUE_HEADS
        if heads.is_file():
            shutil.copyfile(heads, dest / VALUE_HEADS)
        log.info("%s: agents saved to %s", type(self).__name__, dest)
