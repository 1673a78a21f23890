"""CoMLRL 1.4.3's `comlrl.trainers.reinforce` path: MAGRPO and its variants (docs/comlrl-compat.md)."""

from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
from comlrl.trainers.reinforce.mareinforce import MAREINFORCEConfig, MAREINFORCETrainer
from comlrl.trainers.reinforce.maremax import MAReMaxConfig, MAReMaxTrainer
from comlrl.trainers.reinforce.marloo import MARLOOConfig, MARLOOTrainer

__all__ = ["CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer", "MAGRPOConfig", "MAGRPOTrainer",
           "MAREINFORCEConfig", "MAREINFORCETrainer", "MAReMaxConfig", "MAReMaxTrainer", "MARLOOConfig",
           "MARLOOTrainer"]
