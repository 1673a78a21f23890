"""1.4.3's own checks of `IACConfig` and `MAACConfig` (their `__post_init__`), as one-line `ConfigError`s naming
the field (a `ValueError`, as 1.4.3 raises): the two configs check the same fields the same way."""

from __future__ import annotations

from typing import Any

from comlrl.trainers.config import check_field, parallel_mode


def check_actor_critic(cfg: Any, separate_critic: bool) -> None:
    """Check `cfg` in place as 1.4.3 does, filling in train_batch_size and parallel_training; `separate_critic`:
    1.4.3 trains a critic model of its own (then parallel_training='mp' needs critic_devices too)."""

    def check(ok: bool, name: str, value: Any, allowed: str) -> None:
        check_field(cfg, ok, name, value, allowed)

    check(cfg.rollout_buffer_size >= 1, "rollout_buffer_size", cfg.rollout_buffer_size, "an integer >= 1")
    if cfg.train_batch_size is None:
        cfg.train_batch_size = cfg.rollout_buffer_size
    check(cfg.train_batch_size >= 1, "train_batch_size", cfg.train_batch_size, "an integer >= 1 or None")
    check(cfg.num_agents >= 1, "num_agents", cfg.num_agents, "an integer >= 1")
    check(cfg.num_generations >= 1, "num_generations", cfg.num_generations, "an integer >= 1")
    check(cfg.num_turns >= 1, "num_turns", cfg.num_turns, "an integer >= 1")
    check(cfg.num_turns == 1 or cfg.num_generations == 1, "num_generations", cfg.num_generations,
          f"1 with num_turns={cfg.num_turns} (1.4.3's multi-turn actor-critics sample one path)")
    check(str(cfg.critic_type or "v").lower() in ("v", "q"), "critic_type", cfg.critic_type, "one of: v, q")
    check(cfg.eval_interval >= 0, "eval_interval", cfg.eval_interval, "an integer >= 0")
    check(cfg.eval_num_samples >= 0, "eval_num_samples", cfg.eval_num_samples, "an integer >= 0")
    check(cfg.eval_batch_size >= 1, "eval_batch_size", cfg.eval_batch_size, "an integer >= 1")
    check(cfg.logging_steps >= 1, "logging_steps", cfg.logging_steps, "an integer >= 1")
    mode = parallel_mode(cfg, cfg.parallel_training)
    check(mode != "mp" or cfg.agent_devices is not None, "parallel_training", cfg.parallel_training,
          "none unless agent_devices names a device per agent")
    check(mode != "mp" or not separate_critic or cfg.critic_devices is not None, "parallel_training",
          cfg.parallel_training, "none unless critic_devices names the critics' devices")
    cfg.parallel_training = mode
    check(cfg.reference_kl_coef >= 0, "reference_kl_coef", cfg.reference_kl_coef, "a number >= 0")
