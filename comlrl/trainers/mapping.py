"""What each field of CoMLRL 1.4.3's `MAGRPOConfig` becomes on this engine: a `RunConfig` key it is honoured as,
or one warning line where it has no meaning here (docs/comlrl-compat.md, one row per field).

Pure: no model, no torch. `map_config` returns the keys to set (with the field each came from, so a value this
engine refuses is named by its field) and the warning lines; `COMPAT_KEYS` are the keys that give CoMLRL's
update whatever the fields say (configs/comlrl_compat.yaml and docs/algorithm.md explain each). The pieces the
actor-critics share (sampling, evaluation, reference KL, fields without meaning) are used by
`comlrl.trainers.actor_critic.mapping` too; the names before 1.4 are `_legacy`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from comlrl.errors import ConfigError, not_allowed
from comlrl.trainers.config import MAGRPOConfig
from comlrl.trainers.legacy import MAGRPO_RETIRED

# CoMLRL 1.4.3's MAGRPO update and evaluation, whatever the fields say (docs/comlrl-compat.md, "Fixed keys")
COMPAT_KEYS: dict[str, Any] = {
    "agents.mode": "full",  # 1.4.3 trains every parameter of one model per agent
    "magrpo.loss.aggregation": "seq_sum",  # -A * (sum of a completion's token log-probs), mean over completions
    "magrpo.max_grad_norm": 1e9,  # 1.4.3 does not clip gradients
    "training.trees_per_step": 1,  # one tree per data item, as 1.4.3 expands them
    "evaluation.greedy": False,  # 1.4.3 evaluates one path per item, sampled at the training temperature
    "evaluation.samples": 1,
    "evaluation.probe_problems": 0,  # 1.4.3 evaluates the eval set only
    "model.max_prompt_tokens": 2048,  # 1.4.3 cuts prompts only at the tokenizer's own limit
    "dataset.seed": 0,
}
JOINT_MODES = {"align": "align", "aligned": "align", "cross": "cross", "crossed": "cross"}
# advantage_mode without normalization -> (magrpo.advantage.baseline, scale); with it every mode gives the same
# (R - mean) / std, so it maps to (mean, group)
BASELINES = {"mean": "mean", "raw": "none", "max": "max", "rloo": "loo"}
# fields that only place work on devices, batch evaluation or pace W&B lines: a warning when set away from 1.4.3's
# default, with what this engine does instead
NO_MEANING = {
    "logging_steps": "metrics.jsonl and the trackers get every step's line",
    "parallel_training": "the devices come from accelerate (accelerate launch for several processes)",
    "agent_devices": "the devices come from accelerate",
    "reference_devices": "the KL reference lives beside the agents",
    "eval_batch_size": "an evaluation generates every item of a turn in one batch",
    "rollout_buffer_size": "one optimizer step per tree updates every agent on all its nodes",
    "train_batch_size": "one optimizer step per tree updates every agent on all its nodes",
}


# MAGRPOConfig's names before 1.4 that have no meaning here (comlrl.trainers.legacy): a warning when set
LEGACY_NO_MEANING = {
    "save_steps": "checkpoints come from train(checkpoint_dir=, checkpoint_interval=)",
    "dataloader_drop_last": "each step draws its item by the seeded draw",
    "dataloader_num_workers": "the items are held in memory",
    "output_dir": "the run writes to train(checkpoint_dir=) or a temporary folder; save_model(dir) takes its own",
}


@dataclass
class Mapped:
    """RunConfig keys to set, the config field each came from, and one warning line per field that has no
    meaning here or differs from 1.4.3's reading; `label` names the config class in them."""

    label: str = "MAGRPOConfig"
    keys: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def set(self, key: str, value: Any, source: str) -> None:
        self.keys[key] = value
        self.sources[key] = source

    def warn(self, name: str, value: Any, why: str) -> None:
        self.warnings.append(f"{self.label}.{name}={value!r}: {why}")

    def refuse(self, name: str, value: Any, allowed: str) -> ConfigError:
        return not_allowed(f"{self.label}.{name}", value, allowed)


def sampling(args: Any, out: Mapped) -> None:
    """The generation fields every 1.4.3 config has, as model.* keys."""
    out.set("model.max_new_tokens", int(args.max_new_tokens), "max_new_tokens")
    out.set("model.temperature", float(args.temperature), "temperature")
    out.set("model.top_p", float(args.top_p), "top_p")
    out.set("model.top_k", int(args.top_k or 0), "top_k")


def turns(args: Any, out: Mapped) -> None:
    """num_turns, discount and the early termination threshold, as magrpo.* keys."""
    out.set("magrpo.num_turns", int(args.num_turns), "num_turns")
    out.set("magrpo.discount", float(args.discount), "discount")
    thr = args.early_termination_threshold
    out.set("magrpo.early_termination_threshold", None if thr is None else float(thr), "early_termination_threshold")


def _advantage(args: MAGRPOConfig, out: Mapped) -> None:
    mode = str(args.advantage_mode).lower()
    if mode not in BASELINES:
        raise out.refuse("advantage_mode", args.advantage_mode, "one of: mean, raw, max, rloo")
    baseline, scale = ("mean", "group") if args.advantage_normalization else (BASELINES[mode], "none")
    out.set("magrpo.advantage.baseline", baseline, "advantage_mode")
    out.set("magrpo.advantage.scale", scale, "advantage_normalization")


def _joint_mode(args: MAGRPOConfig, out: Mapped) -> None:
    mode = str(args.joint_mode).lower()
    if mode not in JOINT_MODES:
        raise out.refuse("joint_mode", args.joint_mode, "one of: aligned, crossed, align, cross")
    out.set("magrpo.joint_mode", JOINT_MODES[mode], "joint_mode")
    out.set("magrpo.advantage.credit", "sum", "joint_mode")  # 1.4.3 sums a completion's joint returns (cross)
    if mode == "crossed":
        out.warn("joint_mode", args.joint_mode, "trained as cross, each completion credited with the sum of its "
                 "joint actions' returns (1.4.3 spelled 'crossed' reads the first G joint returns as if aligned; "
                 "that is not reproduced)")


def evaluates(args: Any, has_eval_dataset: bool) -> bool:
    """1.4.3 evaluates only with an eval_dataset, eval_interval > 0 and eval_num_samples > 0."""
    return has_eval_dataset and args.eval_interval > 0 and args.eval_num_samples > 0


def evaluation(args: Any, out: Mapped, evaluate: bool, items_per_step: int = 1) -> None:
    """Every eval_interval items (steps of `items_per_step` trees, rounded up), on the first eval_num_samples eval
    items; without an evaluation no eval rows are written, so the run evaluates nothing (not even before and
    after)."""
    every = -(-int(args.eval_interval) // items_per_step)
    out.set("training.eval_every", every if evaluate else 0, "eval_interval")
    out.set("training.eval_size", int(args.eval_num_samples) if evaluate else None, "eval_num_samples")


def reference_kl(args: Any, out: Mapped) -> None:
    out.set("magrpo.loss.kl_coef", float(args.reference_kl_coef) if args.reference_kl_enabled else 0.0,
            "reference_kl_enabled")
    if args.reference_kl_enabled:
        out.warn("reference_kl_enabled", True, f"honoured as magrpo.loss.kl_coef={args.reference_kl_coef}: a k3 KL "
                 "to the initial model per token in the loss (1.4.3 subtracts coef x the completion's summed KL from "
                 "its return)")


def unused(args: Any, out: Mapped, defaults: Any, no_meaning: dict[str, str]) -> None:
    """One warning per field of `no_meaning` set away from its default (train_batch_size: rollout_buffer_size)."""
    for name, instead in no_meaning.items():
        value, default = vars(args)[name], vars(defaults)[name]
        if name == "train_batch_size":
            default = args.rollout_buffer_size  # 1.4.3's None means rollout_buffer_size
        if value != default:
            out.warn(name, value, f"has no meaning here ({instead})")


def _legacy(args: Any, out: Mapped) -> None:
    """The names before 1.4 without a 1.4.3 field (`comlrl.trainers.legacy`): weight_decay honoured, a batch size
    other than 1 refused (as 1.3.2 did), the rest a warning when given away from their old default."""
    old = args.legacy_fields if isinstance(args, MAGRPOConfig) else {}  # set by its metaclass on every instance
    if "weight_decay" in old:
        out.set("magrpo.weight_decay", float(old["weight_decay"]), "weight_decay")
    if old.get("per_device_train_batch_size", 1) != 1:
        raise out.refuse("per_device_train_batch_size", old["per_device_train_batch_size"],
                         "1 (as the releases before 1.4 required: one item per tree)")
    for name, instead in LEGACY_NO_MEANING.items():
        if name in old and old[name] != MAGRPO_RETIRED[name]:
            out.warn(name, old[name], f"a name before 1.4 with no meaning here ({instead})")


def _unused(args: MAGRPOConfig, out: Mapped, num_agents: int) -> None:
    unused(args, out, MAGRPOConfig(), NO_MEANING)
    if args.num_agents != num_agents:
        out.warn("num_agents", args.num_agents, f"the trainer's num_agents={num_agents} is used, as 1.4.3 does")
    if args.discount != 1.0:
        out.warn("discount", args.discount, "honoured as magrpo.discount (1.4.3's MAGRPOTrainer backs up "
                 "undiscounted returns whatever this says)")


def map_config(args: MAGRPOConfig, *, num_agents: int, train_rows: int, evaluate: bool,
               policies: int | None = None) -> Mapped:
    """The RunConfig keys for `args` (plus COMPAT_KEYS) for `num_agents` agents (`policies` trained models, when
    one writes every agent's part: centralized), `train_rows` training items (num_train_epochs passes over them,
    one tree each) and an evaluation when `evaluate`."""
    if not isinstance(args, MAGRPOConfig):
        raise ConfigError(f"config error: args: expected a comlrl.trainers.MAGRPOConfig, got {type(args).__name__}")
    out = Mapped(type(args).__name__)
    for key, value in COMPAT_KEYS.items():
        out.set(key, value, "")
    out.set("magrpo.num_agents", num_agents if policies is None else policies, "num_agents")
    out.set("training.steps", int(args.num_train_epochs) * train_rows, "num_train_epochs")
    out.set("magrpo.learning_rate", float(args.agent_learning_rate), "agent_learning_rate")
    out.set("magrpo.num_generations", int(args.num_generations), "num_generations")
    sampling(args, out)
    turns(args, out)
    _joint_mode(args, out)
    _advantage(args, out)
    evaluation(args, out, evaluate)
    reference_kl(args, out)
    _unused(args, out, num_agents)
    _legacy(args, out)
    return out


def field_names() -> list[str]:
    """Every MAGRPOConfig field, in 1.4.3's order (what docs/comlrl-compat.md lists)."""
    return [f.name for f in fields(MAGRPOConfig)]
