"""CoMLRL 1.4.3's `comlrl.trainers.preference`: the centralized adapters work here (they serve
`CentralizedMAGRPOTrainer`); the preference trainers import and refuse on construction, saying why
(`comlrl.trainers.preference.refused`; docs/comlrl-compat.md)."""

from comlrl.trainers.preference.centralized import (
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from comlrl.trainers.preference.iterative import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig, MARLHFIterTrainer
from comlrl.trainers.preference.madpo import MADPOConfig, MADPOTrainer
from comlrl.trainers.preference.marlhf import JointRewardModel, MARLHFConfig, MARLHFTrainer

__all__ = ["CentralizedComparatorAdapter", "CentralizedComparatorParseError", "JointRewardModel", "MADPOConfig",
           "MADPOIterConfig", "MADPOIterTrainer", "MADPOTrainer", "MARLHFConfig", "MARLHFIterConfig",
           "MARLHFIterTrainer", "MARLHFTrainer", "TaggedCentralizedComparatorAdapter"]
