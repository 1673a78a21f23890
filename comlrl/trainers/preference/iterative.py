"""CoMLRL 1.4.3's `comlrl.trainers.preference.iterative`: importable, refused on construction
(`refused.ITERATIVE` says why)."""

from comlrl.trainers.preference.refused import ITERATIVE, refused

__all__ = ["MADPOIterConfig", "MADPOIterTrainer", "MARLHFIterConfig", "MARLHFIterTrainer", "PreferenceReplayShard"]

MADPOIterConfig = refused("MADPOIterConfig", ITERATIVE, __name__)
MADPOIterTrainer = refused("MADPOIterTrainer", ITERATIVE, __name__)
MARLHFIterConfig = refused("MARLHFIterConfig", ITERATIVE, __name__)
MARLHFIterTrainer = refused("MARLHFIterTrainer", ITERATIVE, __name__)
PreferenceReplayShard = refused("PreferenceReplayShard", ITERATIVE, __name__)
