"""CoMLRL 1.4.3's `comlrl.trainers.preference.madpo`: importable, refused on construction (`refused.MADPO` says
why)."""

from comlrl.trainers.preference.refused import MADPO, refused

__all__ = ["AgentPreferenceTensors", "MADPOConfig", "MADPOTrainer", "PreferencePair"]

MADPOConfig = refused("MADPOConfig", MADPO, __name__)
MADPOTrainer = refused("MADPOTrainer", MADPO, __name__)
PreferencePair = refused("PreferencePair", MADPO, __name__)
AgentPreferenceTensors = refused("AgentPreferenceTensors", MADPO, __name__)
