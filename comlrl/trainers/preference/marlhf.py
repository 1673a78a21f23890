"""CoMLRL 1.4.3's `comlrl.trainers.preference.marlhf`: importable, refused on construction (`refused.MARLHF` says
why)."""

from comlrl.trainers.preference.refused import MARLHF, refused

__all__ = ["JointRewardModel", "MARLHFConfig", "MARLHFTrainer"]

MARLHFConfig = refused("MARLHFConfig", MARLHF, __name__)
MARLHFTrainer = refused("MARLHFTrainer", MARLHF, __name__)
JointRewardModel = refused("JointRewardModel", MARLHF, __name__)
