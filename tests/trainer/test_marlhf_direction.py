"""marlhf through the real update on the tiny random model (`train_on_trees`: accelerate, LoRA routing, the
reward heads at each completion's end, AdamW): the reward heads come to rank the task's preferred joint
action higher, and then the policy moves toward what they prefer (the task reward is not in the policy's
reward: task_weight 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_helpers import chat_sample, summed_logp

from comlrl.config.schema import load_config
from comlrl.learn.marlhf import joint_rewards
from comlrl.learn.update import train_on_trees
from comlrl.run import trainer
from comlrl.tree.nodes import Node, backup_returns

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def comp(tmp_path_factory):
    out = tmp_path_factory.mktemp("marlhf_direction")
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [
        "model.name=tiny-random", "training.torch_threads=1", "external.mode=plain", "rollout.engine=hf",
        "algorithm.name=marlhf", "magrpo.learning_rate=1e-2", "algorithm.critic.learning_rate=5e-2",
        "magrpo.max_grad_norm=1000", "magrpo.num_generations=2", f"training.output_dir={out}"])
    return trainer.build(cfg)


def test_the_reward_heads_learn_the_preference_and_the_policy_follows_them(comp):
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1], joint=[(0, 0), (1, 1)],
                rewards=[1.0, 0.0])  # the task prefers joint action 0
    backup_returns(node, 1.0)
    learner = comp.trained()

    def learned() -> list[float]:
        return joint_rewards(learner.action_values([node])["r0"], node.joint)

    assert learned() == [0.0, 0.0]  # zero-initialised heads
    before = summed_logp(comp, s0 + s1)
    out = train_on_trees(learner, comp.algorithm, comp.cfg, [node])
    assert out.groups.skipped == 2  # step 1: the heads tie every joint action, only they train
    assert out.metrics["marlhf/pair_accuracy/n"] == 1.0 and out.metrics["marlhf/pair_accuracy"] == 0.0
    assert summed_logp(comp, s0 + s1) == pytest.approx(before, abs=1e-6)  # no policy signal yet: the adapters rest
    r = learned()
    assert r[0] > r[1], r  # the heads now rank the preferred joint action higher
    for _ in range(3):
        out = train_on_trees(learner, comp.algorithm, comp.cfg, [node])
        assert out.groups.skipped == 0 and out.metrics["marlhf/pair_accuracy"] == 1.0
    r2 = learned()
    assert r2[0] - r2[1] > r[0] - r[1]  # the margin grew
    after = summed_logp(comp, s0 + s1)
    assert after[0] > before[0] + 0.05 and after[2] > before[2] + 0.05, (before, after)  # toward joint action 0
    for good_i, bad_i in ((0, 1), (2, 3)):  # each agent: its preferred completion gained on the other
        assert after[good_i] - after[bad_i] > before[good_i] - before[bad_i] + 0.1, (before, after)
