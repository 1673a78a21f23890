"""A few MAGRPO steps on code_coop raise how often the team passes *with* the helper (real model).

Real embedded model, real sandbox, the shipped cooperation config (configs/coop_T1_G8.yaml) on four fixed
training problems, so each step trains on all four. `passed_with_helper` is measured by sampling the same
problems before and after from the same seeds: 4 problems x 16 samples x 2 seeded rounds = 128 joint
actions each. The margin: the rise must exceed 3 standard errors of the difference of two proportions
(each side's p(1-p)/128). Under "training changes nothing" a rise that large happens with probability
~0.1%, so chance cannot pass the test, and an update that ignores or punishes cooperation fails it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from comlrl.config.schema import load_config
from comlrl.run.trainer import build, training_step
from comlrl.tree.rollout import TreeShape

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = 4
STEPS = 6
MARGIN_SE = 3.0


def passed_with_helper(comp, problems: list, rounds: int = 2, samples: int = 16) -> list[float]:
    out: list[float] = []
    for r in range(rounds):
        torch.manual_seed(20_000 + r)
        roots = comp.rollout(problems).run(TreeShape(2, samples, 1, "align", None), tag=f"probe{r}.")
        out += [comp.task.outcome_counts(d)["passed_with_helper"] for root in roots for d in root.details]
    return out


def test_six_steps_raise_passing_with_the_helper(tmp_path: Path) -> None:
    cfg = load_config(ROOT / "configs" / "coop_T1_G8.yaml", [
        f"training.steps={STEPS}", f"training.trees_per_step={PROBLEMS}", "training.seed=0",
        "logging.progress_bar=false", f"training.output_dir={tmp_path}",
    ])
    comp = build(cfg)
    try:
        comp.train = comp.train[:PROBLEMS]
        before = passed_with_helper(comp, comp.train)
        for step in range(STEPS):
            training_step(comp, step)
        after = passed_with_helper(comp, comp.train)
    finally:
        comp.sandbox.close()
        comp.engine.close()
    pb, pa = sum(before) / len(before), sum(after) / len(after)
    se = math.sqrt(pb * (1 - pb) / len(before) + pa * (1 - pa) / len(after)) or 1.0 / len(after)
    print(f"passed_with_helper {pb:.3f} -> {pa:.3f}, diff {pa - pb:.3f}, se {se:.3f}")
    assert pa - pb > MARGIN_SE * se, (f"passed_with_helper {pb:.3f} -> {pa:.3f}: "
                                      f"diff {pa - pb:.3f} <= {MARGIN_SE} x se {se:.3f}")
