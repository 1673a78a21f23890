"""The LR schedule is transformers' (get_scheduler), driven by magrpo.lr_schedule / warmup_steps: pure numbers."""

from __future__ import annotations

import math

import pytest
import torch

from comlrl.config.schema import load_config
from comlrl.run.components import make_scheduler


def _lrs(schedule: str, warmup: int, steps: int) -> list[float]:
    cfg = load_config(None, [f"magrpo.lr_schedule={schedule}", f"magrpo.warmup_steps={warmup}",
                             f"training.steps={steps}", "magrpo.learning_rate=1.0"])
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = make_scheduler(cfg, opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("schedule,warmup,steps,expected", [
    ("constant", 0, 4, [1.0, 1.0, 1.0, 1.0]),
    ("constant", 2, 4, [0.0, 0.5, 1.0, 1.0]),
    ("linear", 0, 4, [1.0, 0.75, 0.5, 0.25]),
    ("linear", 2, 6, [0.0, 0.5, 1.0, 0.75, 0.5, 0.25]),
    ("cosine", 0, 4, [1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5, 0.5 * (1 + math.cos(3 * math.pi / 4))]),
])
def test_schedule_values(schedule, warmup, steps, expected):
    assert _lrs(schedule, warmup, steps) == pytest.approx(expected, abs=1e-12)


def test_scheduler_state_round_trips_for_resume():
    cfg = load_config(None, ["magrpo.lr_schedule=linear", "magrpo.warmup_steps=1", "training.steps=5"])
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    first = make_scheduler(cfg, opt)
    for _ in range(3):
        opt.step()
        first.step()
    opt2 = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    second = make_scheduler(cfg, opt2)
    second.load_state_dict(first.state_dict())
    opt2.step()
    second.step()
    opt.step()
    first.step()
    assert second.get_last_lr() == first.get_last_lr()
