"""A few MAGRPO steps with the embedded model raise the reward on the problems they trained on.

Real model, real sandbox, the shipped learning config (configs/learn_easy.yaml) with one turn and four
problems so that six steps visit each problem three times. The reward is measured by sampling the same
problems before and after (8 samples x 4 problems x 4 seeded rounds = 128 joint actions each), and the
test asks for a rise of more than 3 standard errors of the difference: under "training changes nothing"
that happens with probability ~0.1%, so the test cannot pass by chance (and a flipped advantage sign, which
lowers the reward, fails it).
"""

from __future__ import annotations

import math
import statistics
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


def sampled_rewards(comp, problems: list, rounds: int = 4, samples: int = 8) -> list[float]:
    """Turn-1 rewards of `samples` joint actions per problem, over `rounds` fixed seeds."""
    out: list[float] = []
    for r in range(rounds):
        torch.manual_seed(10_000 + r)
        roots = comp.rollout(problems).run(TreeShape(2, samples, 1, "align", None), tag=f"probe{r}.")
        out += [x for root in roots for x in root.rewards]
    return out


def test_six_steps_raise_the_reward_of_their_problems(tmp_path: Path) -> None:
    cfg = load_config(ROOT / "configs" / "learn_easy.yaml", [
        "magrpo.num_turns=1", f"training.steps={STEPS}", "training.trees_per_step=2", "training.seed=0",
        "logging.progress_bar=false", f"training.output_dir={tmp_path}",
    ])
    comp = build(cfg)
    try:
        comp.train = comp.train[:PROBLEMS]
        before = sampled_rewards(comp, comp.train)
        for step in range(STEPS):
            training_step(comp, step)
        after = sampled_rewards(comp, comp.train)
    finally:
        comp.sandbox.close()
        comp.engine.close()
    diff = statistics.fmean(after) - statistics.fmean(before)
    se = math.sqrt(statistics.variance(before) / len(before) + statistics.variance(after) / len(after))
    print(f"sampled reward {statistics.fmean(before):.3f} -> {statistics.fmean(after):.3f}, "
          f"diff {diff:.3f}, se {se:.3f}")
    assert diff > MARGIN_SE * se, f"reward {statistics.fmean(before):.3f} -> {statistics.fmean(after):.3f}, " \
                                  f"diff {diff:.3f} <= {MARGIN_SE} x se {se:.3f}"
