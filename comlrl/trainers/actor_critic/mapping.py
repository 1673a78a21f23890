"""What each field of CoMLRL 1.4.3's `IACConfig` / `MAACConfig` becomes here: a `RunConfig` key of this engine's
`iac` / `maac` (docs/algorithm.md, "IAC and MAAC"), or one warning line where it has no meaning, or one
`ConfigError` line where it would silently change training (docs/comlrl-compat.md, one row per field).

1.4.3's actor-critic, and how each part is reproduced:
- an agent buffers `rollout_buffer_size` samples (num_generations x num_turns per item) and then updates on them:
  here one step of `training.trees_per_step` = that many items (at most the data set's size), one optimizer step;
- value targets: the reward in the last turn, r + discount * V(next) before it (TD(0)): `algorithm.critic.
  gae_lambda=0`; advantage = target - V(state), whitened over the buffer with advantage_normalization (not
  when the buffer holds one sample): `magrpo.advantage.scale` group / none;
- loss: -A x (the completion's summed log-probs), mean over samples, + value_loss_coef x (V - target)^2: the
  policy loss `seq_sum` and `algorithm.critic.value_coef`; no gradient clipping.
The critic differs and says so: here a linear value head on each agent's own model (`maac`: the mean of the
agents' heads, a critic of the team's state), trained with the agent's weights; 1.4.3 trains a separate critic
model (IAC with use_separate_critic=True, always for MAAC) or a head on the agent (use_separate_critic=False).
Pure: no model, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from comlrl.trainers.mapping import COMPAT_KEYS, Mapped, evaluation, reference_kl, sampling, turns, unused

# 1.4.3's actor-critic update whatever the fields say (beside COMPAT_KEYS: CoMLRL's loss, no clipping, one path
# per item in evaluation): aligned joint actions, TD(0) value targets
AC_KEYS: dict[str, Any] = {**COMPAT_KEYS, "magrpo.joint_mode": "align", "algorithm.critic.gae_lambda": 0.0}
NO_MEANING = {
    "logging_steps": "metrics.jsonl and the trackers get every step's line",
    "parallel_training": "the devices come from accelerate (accelerate launch for several processes)",
    "agent_devices": "the devices come from accelerate",
    "critic_devices": "the critic is the value heads on the agents' models",
    "reference_devices": "the KL reference lives beside the agents",
    "eval_batch_size": "an evaluation generates every item of a turn in one batch",
}
HIDDEN_DIMS = ("value_head_hidden_dim", "critic_value_head_hidden_dim")


def items_per_update(args: Any, train_rows: int) -> int:
    """The items 1.4.3 collects before an update: the buffer's samples over the samples an item gives each agent
    (num_generations x num_turns, fewer where a path stops early), at most the data set (the buffer is flushed at
    the end of every epoch)."""
    per_item = max(1, int(args.num_generations) * int(args.num_turns))
    return max(1, min(-(-int(args.rollout_buffer_size) // per_item), max(1, train_rows)))


def _critic(args: Any, out: Mapped, separate: bool, head_options: Mapping[str, Any]) -> None:
    """critic_type, value_loss_coef and the heads' learning rate (a head on the agent trains at the agent's rate
    in 1.4.3); an MLP head is refused, a value clip that 1.4.3 would apply warns."""
    out.set("algorithm.critic.kind", str(args.critic_type or "v").lower(), "critic_type")
    out.set("algorithm.critic.value_coef", float(args.value_loss_coef), "value_loss_coef")
    rate = args.critic_learning_rate if separate else None
    out.set("algorithm.critic.learning_rate", None if rate is None else float(rate), "critic_learning_rate")
    for name in HIDDEN_DIMS:
        value = head_options.get(name)
        if value is not None:
            raise out.refuse(name, value, "None (the value heads here are one linear layer on the agent's final "
                             "hidden state; a hidden layer cannot be added)")
    clip = head_options.get("value_clip_range")
    if not separate and clip is not None:
        out.warn("value_clip_range", clip, "has no meaning here (the value loss is not clipped; 1.4.3 clips a head "
                 "on the agent to the old value +- this)")
    if not separate and args.critic_learning_rate != args.agent_learning_rate:
        out.warn("critic_learning_rate", args.critic_learning_rate, "has no meaning with use_separate_critic=False "
                 "(the head trains at agent_learning_rate, as in 1.4.3)")


def map_actor_critic(args: Any, *, algorithm: str, defaults: Any, separate: bool, train_rows: int,
                     evaluate: bool, head_options: Mapping[str, Any] | None = None) -> Mapped:
    """The RunConfig keys for `args` (an IACConfig or MAACConfig; `defaults` its class's defaults) trained by
    `algorithm` (iac or maac) with a `separate` critic in 1.4.3, on `train_rows` items, evaluating when
    `evaluate`; `head_options`: the critic options only its config has (IAC's HIDDEN_DIMS and value_clip_range)."""
    out = Mapped(type(args).__name__)
    for key, value in AC_KEYS.items():
        out.set(key, value, "")
    out.set("algorithm.name", algorithm, "")
    trees = items_per_update(args, train_rows)
    out.set("training.trees_per_step", trees, "rollout_buffer_size")
    out.set("training.steps", -(-int(args.num_train_epochs) * train_rows // trees), "num_train_epochs")
    out.set("magrpo.num_agents", int(args.num_agents), "num_agents")
    out.set("magrpo.learning_rate", float(args.agent_learning_rate), "agent_learning_rate")
    out.set("magrpo.num_generations", int(args.num_generations), "num_generations")
    sampling(args, out)
    turns(args, out)
    _critic(args, out, separate, head_options or {})
    whiten = bool(args.advantage_normalization) and trees * int(args.num_generations) > 1
    out.set("magrpo.advantage.scale", "group" if whiten else "none", "advantage_normalization")
    evaluation(args, out, evaluate, trees)
    reference_kl(args, out)
    unused(args, out, defaults, NO_MEANING)
    if args.train_batch_size < args.rollout_buffer_size:
        out.warn("train_batch_size", args.train_batch_size, "has no meaning here (one optimizer step per update of "
                 "rollout_buffer_size samples; 1.4.3 steps once per train_batch_size of them)")
    return out
