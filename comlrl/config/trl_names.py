"""TRL's argument names in config overrides (`load_config`, `train`, `Trainer(args)`, `comlrl-train key=value`).

A TRL user writes `max_steps=20` or `{"learning_rate": 1e-5}`. A name whose meaning is this trainer's key's
(`ACCEPTED`) is read as that key; one whose meaning differs (`REFUSED`) stays an unknown key, and its config
error says which key to set instead, so the user does not get a bare "not in RunConfig" or, worse, a number
read with another meaning. Names are matched as top-level keys only (TRL's arguments are flat).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from comlrl.errors import ConfigError

# the same meaning: read as this trainer's key
ACCEPTED: dict[str, str] = {
    "max_steps": "training.steps",  # optimizer steps (one per training step here)
    "output_dir": "training.output_dir",
    "save_total_limit": "training.save_total_limit",  # keep the newest k checkpoints; null = all
    "save_steps": "training.save_every",
    "eval_steps": "training.eval_every",
    "seed": "training.seed",
    "learning_rate": "magrpo.learning_rate",
    "weight_decay": "magrpo.weight_decay",
    "max_grad_norm": "magrpo.max_grad_norm",
    "warmup_steps": "magrpo.warmup_steps",  # linear warm-up from 0, as transformers' schedulers
    "num_generations": "magrpo.num_generations",  # completions per prompt (per agent, per tree node)
    "beta": "magrpo.loss.kl_coef",  # the k3 KL to the reference (the base model)
    "epsilon": "magrpo.loss.clip_eps",
    "num_iterations": "magrpo.loss.inner_epochs",
    "max_completion_length": "model.max_new_tokens",  # per completion (one agent's turn)
    "temperature": "model.temperature",
    "top_p": "model.top_p",
}

# another meaning here: refused, naming the key to set instead and how it differs
REFUSED: dict[str, tuple[str, str]] = {
    "per_device_train_batch_size": ("training.trees_per_step", "problems per process per step, each a tree of "
                                    "magrpo.num_generations completions per agent per node; TRL counts completions"),
    "gradient_accumulation_steps": ("training.trees_per_step", "one optimizer step over all of a step's trees; "
                                    "magrpo.loss.micro_batch_size bounds memory"),
    "num_train_epochs": ("training.steps", "runs are counted in steps, not epochs"),
    "logging_steps": ("logging.tensorboard / logging.wandb", "every step is logged, to metrics.jsonl and the trackers"),
    "report_to": ("logging.tensorboard / logging.wandb", "or Trainer(report_to=...)"),
    "lr_scheduler_type": ("magrpo.lr_schedule", "constant, linear or cosine, each after magrpo.warmup_steps: "
                          "constant is TRL's constant_with_warmup"),
    "max_prompt_length": ("model.max_prompt_tokens", "long prompts are cut from the middle of the history"),
    "resume_from_checkpoint": ("training.resume / training.resume_from",
                               "or Trainer.train(resume_from_checkpoint=...)"),
    "loss_type": ("magrpo.loss.aggregation / magrpo.advantage.scale", "Dr.GRPO is seq_sum with scale none"),
    "scale_rewards": ("magrpo.advantage.scale", "group or none"),
}


def trl_hint(key: str) -> str | None:
    """The config error for an unknown key that is one of TRL's names, else None."""
    if key in ACCEPTED:  # only reached from a YAML file: overrides were renamed
        return f"config error: {key}: not a key here (TRL's name); did you mean {ACCEPTED[key]}?"
    if key in REFUSED:
        ours, why = REFUSED[key]
        return f"config error: {key}: not a key here (TRL's name, with another meaning); did you mean {ours}? ({why})"
    return None


def _leaves(layer: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in layer.items():
        yield from _leaves(value, f"{prefix}{key}.") if isinstance(value, Mapping) else (f"{prefix}{key}",)


def _renamed(key: str, given: set[str]) -> str:
    if key not in ACCEPTED:
        return key
    ours = ACCEPTED[key]
    if ours in given:
        raise ConfigError(f"config error: {key}: TRL's name for {ours}, which is given too; give one of them")
    return ours


def with_trl_names(overrides: Sequence[str] | Mapping[str, Any]) -> list[str] | dict[str, Any]:
    """`key=value` strings or a dict of overrides, with TRL's `ACCEPTED` names read as this trainer's keys."""
    if isinstance(overrides, Mapping):
        given = set(_leaves(overrides))
        return {_renamed(str(k), given): v for k, v in overrides.items()}
    given = {item.split("=", 1)[0] for item in overrides}
    return [f"{_renamed(item.split('=', 1)[0], given)}={item.split('=', 1)[1]}" if "=" in item else item
            for item in overrides]
