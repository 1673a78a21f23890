"""Full-weight agents' update in lanes side by side on CPU (`comlrl.learn.update.agent_lanes`, `Learner.
agents_side_by_side`): each agent's micro-batches forward and backward in a thread of one core, the same
update as one after the other. Tolerance 1e-5 relative on the moved weights: the threads change how a
matmul splits its sums, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_helpers import chat_sample

from comlrl.config.schema import load_config
from comlrl.learn import update
from comlrl.learn.units import Unit
from comlrl.run import trainer
from comlrl.tree.nodes import Node

ROOT = Path(__file__).resolve().parents[2]


def _comp(tmp_path: Path, name: str):
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [
        "model.name=tiny-random", "agents.mode=full", "training.torch_threads=2", "external.mode=plain",
        "rollout.engine=hf", "magrpo.learning_rate=1e-2", "magrpo.num_generations=2", "magrpo.loss.micro_batch_size=1",
        f"training.output_dir={tmp_path / name}",
    ])
    return trainer.build(cfg)


def _node(comp) -> Node:
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, bad), chat_sample(comp, 1, good)]
    return Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                joint=[(0, 0), (1, 1)], returns=[1.0, -1.0])


def test_lanes_split_units_by_agent_and_refuse_a_unit_over_several() -> None:
    a0, a1 = (chat_sample_stub(0), chat_sample_stub(1))
    units = [Unit((a0,)), Unit((a1,)), Unit((a0, a0))]
    assert update.agent_lanes(units) == [[units[0], units[2]], [units[1]]]
    assert update.agent_lanes([units[0], units[2]]) is None  # one agent: nothing to run beside it
    assert update.agent_lanes([*units, Unit((a0, a1))]) is None  # a team unit couples the agents' backward


def chat_sample_stub(agent: int):
    from comlrl.tree.nodes import Sample

    return Sample(agent=agent, prompt_ids=(1,), completion_ids=(2,), text="x", finished=True)


def test_side_by_side_update_equals_one_agent_after_the_other(tmp_path, monkeypatch) -> None:
    lanes, alone = _comp(tmp_path, "lanes"), _comp(tmp_path, "alone")
    before = [p.detach().clone() for p in alone.policies.module.parameters()]
    torch.set_num_threads(2)
    assert lanes.trained().agents_side_by_side
    ran: list[int] = []
    real = update.side_by_side
    monkeypatch.setattr(update, "side_by_side", lambda calls: ran.append(len(calls)) or real(calls))
    out_lanes = update.train_on_trees(lanes.trained(), lanes.algorithm, lanes.cfg, [_node(lanes)])
    torch.set_num_threads(1)  # no cores for lanes: the micro-batches run in turn
    try:
        assert not alone.trained().agents_side_by_side
        out_alone = update.train_on_trees(alone.trained(), alone.algorithm, alone.cfg, [_node(alone)])
    finally:
        torch.set_num_threads(2)
    assert ran == [2]  # one epoch, two lanes
    assert out_lanes.loss == pytest.approx(out_alone.loss, rel=1e-5)
    assert out_lanes.metrics == pytest.approx(out_alone.metrics, rel=1e-5)
    moved = 0
    with torch.no_grad():
        for (name, p), q, b in zip(lanes.policies.module.named_parameters(), alone.policies.module.parameters(),
                                   before, strict=True):
            scale = max(float(q.abs().max()), 1e-12)
            torch.testing.assert_close(p / scale, q / scale, atol=1e-5, rtol=0, msg=name)
            moved += int(not torch.equal(q, b))
    assert moved > 10  # both agents' weights moved, the same way
