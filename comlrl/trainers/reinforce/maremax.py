"""CoMLRL 1.4.3's `MAReMaxTrainer` / `MAReMaxConfig`: MAGRPO whose advantage_mode defaults to
"max" (a max baseline: A = R - max R).

Trained by `magrpo` with the baseline `comlrl.trainers.mapping` maps advantage_mode to: with 1.4.3's default
advantage_normalization=True every mode gives the same (R - mean) / std there, so it trains as MAGRPO does; with
advantage_normalization=False the baseline is this mode's (docs/comlrl-compat.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["MAReMaxConfig", "MAReMaxTrainer"]


@dataclass
class MAReMaxConfig(MAGRPOConfig):
    """MAGRPOConfig with 1.4.3's default advantage_mode for MAReMax."""

    advantage_mode: str = "max"


class MAReMaxTrainer(MAGRPOTrainer):
    """MAGRPOTrainer whose default config is `MAReMaxConfig`, as in 1.4.3."""

    default_config_cls = MAReMaxConfig
    algorithm_name = "MAReMax"
