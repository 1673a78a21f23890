"""CoMLRL 1.4.3's `MAREINFORCETrainer` / `MAREINFORCEConfig`: MAGRPO whose advantage_mode defaults to
"raw" (the plain return, no baseline).

Trained by `magrpo` with the baseline `comlrl.trainers.mapping` maps advantage_mode to: with 1.4.3's default
advantage_normalization=True every mode gives the same (R - mean) / std there, so it trains as MAGRPO does; with
advantage_normalization=False the baseline is this mode's (docs/comlrl-compat.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["MAREINFORCEConfig", "MAREINFORCETrainer"]


@dataclass
class MAREINFORCEConfig(MAGRPOConfig):
    """MAGRPOConfig with 1.4.3's default advantage_mode for MAREINFORCE."""

    advantage_mode: str = "raw"


class MAREINFORCETrainer(MAGRPOTrainer):
    """MAGRPOTrainer whose default config is `MAREINFORCEConfig`, as in 1.4.3."""

    default_config_cls = MAREINFORCEConfig
    algorithm_name = "MAREINFORCE"
