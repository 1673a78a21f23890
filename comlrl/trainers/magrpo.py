"""The path CoMLRL's releases before 1.4 used (`from comlrl.trainers.magrpo import MAGRPOTrainer, MAGRPOConfig`):
the same classes as `comlrl.trainers.reinforce.magrpo` (docs/comlrl-compat.md)."""

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]
