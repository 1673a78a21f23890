"""CoMLRL 1.4.3's trainer interface on this engine: `from comlrl.trainers.reinforce.magrpo import MAGRPOTrainer,
MAGRPOConfig` (or `comlrl.trainers.magrpo`, the older path, or this package) runs a script written for that library
unchanged, trained by this project's tree rollout and update; so do the MAGRPO variants and the actor-critics
(IAC, MAAC). The preference trainers import and refuse on construction, saying why (docs/comlrl-compat.md)."""

from comlrl.trainers.actor_critic import ActorCriticTrainerBase, IACConfig, IACTrainer, MAACConfig, MAACTrainer
from comlrl.trainers.preference import (
    JointRewardModel,
    MADPOConfig,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFTrainer,
)
from comlrl.trainers.reinforce import (
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    MAReMaxConfig,
    MAReMaxTrainer,
    MARLOOConfig,
    MARLOOTrainer,
)

__all__ = ["ActorCriticTrainerBase", "IACConfig", "IACTrainer", "JointRewardModel", "MAACConfig", "MAACTrainer",
           "MADPOConfig", "MADPOTrainer", "MAGRPOConfig", "MAGRPOTrainer", "MAREINFORCEConfig", "MAREINFORCETrainer",
           "MARLHFConfig", "MARLHFTrainer", "MAReMaxConfig", "MAReMaxTrainer", "MARLOOConfig", "MARLOOTrainer"]
