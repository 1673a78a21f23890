"""What one checkpoint costs (issue 36, defect 3): seconds to write `checkpoints/step-<k>/` and its size on disk,
for the embedded model's LoRA agents and full-weight agents, after one optimizer step (so AdamW holds its state).

    python benchmarks/checkpoint_cost.py            # writes benchmarks/results/checkpoint_cost.json

The figure to compare with is a training step of the same run (docs/results.md): a checkpoint every step
is cheap when its seconds are a small fraction of the step's.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import RESULTS, machine, setup


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(mode: str, repeats: int) -> dict:
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.checkpoint import save_checkpoint
    from comlrl.run.components import build

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "align_T2_G4.yaml",
                      [f"agents.mode={mode}", "rollout.engine=hf", "training.torch_threads=1"])
    comp = build(cfg)
    learner = comp.trained()
    for group in learner.optimizer.param_groups:  # one step, so the optimizer's moments exist as in a run
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    learner.optimizer.step()
    seconds, size = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(repeats):
            t0 = time.perf_counter()
            path = save_checkpoint(learner, k + 1, Path(tmp))
            seconds.append(time.perf_counter() - t0)
            size = _bytes(path)
    comp.engine.close()
    if comp.sandbox is not None:
        comp.sandbox.close()
    trainable = sum(p.numel() for g in learner.optimizer.param_groups for p in g["params"])
    return {"agents.mode": mode, "agents": cfg.magrpo.num_agents, "trainable_parameters": trainable,
            "seconds": seconds, "median_seconds": statistics.median(seconds), "megabytes": size / 2**20}


def main() -> int:
    setup(1)
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows = [measure(mode, repeats) for mode in ("lora", "full")]
    out = {"machine": machine(1), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    import json

    (RESULTS / "checkpoint_cost.json").write_text(json.dumps(out, indent=1))
    for r in rows:
        print(f"{r['agents.mode']}: {r['trainable_parameters'] / 1e6:.1f} M trainable, "
              f"{r['median_seconds']:.2f} s per checkpoint (median of {len(r['seconds'])}), {r['megabytes']:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
