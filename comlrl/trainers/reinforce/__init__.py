"""CoMLRL 1.4.3's `comlrl.trainers.reinforce` path: the MAGRPO trainer (docs/comlrl-compat.md)."""

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]
