"""CoMLRL 1.4.3's trainer interface on this engine: `from comlrl.trainers.reinforce.magrpo import MAGRPOTrainer,
MAGRPOConfig` (or `comlrl.trainers.magrpo`, the older path, or this package) runs a script written for that library
unchanged, trained by this project's tree rollout and update (docs/comlrl-compat.md)."""

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]
