"""CoMLRL 1.4.3's `comlrl.trainers.actor_critic`: IAC and MAAC on this engine's `iac` and `maac`
(docs/comlrl-compat.md)."""

from comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer, RolloutSample
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer

__all__ = ["ActorCriticTrainerBase", "IACConfig", "IACTrainer", "MAACConfig", "MAACTrainer", "RolloutSample"]
