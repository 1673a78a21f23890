"""One MAGRPO update, through the real trainer, moves each agent toward its positive-advantage completion.

The loss and advantage tests check each sign on its own; this checks the whole chain the trainer runs
(`train_on_trees`: accelerate, per-agent LoRA routing, masking, aggregation, AdamW) on the tiny random
model: log p(completion with advantage +1) rises, log p(completion with advantage -1) falls, and an agent
whose group carries no signal (advantages None) keeps its adapter bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_helpers import chat_sample, summed_logp

from comlrl.config.schema import load_config
from comlrl.learn.update import train_on_trees
from comlrl.policy import agent_name
from comlrl.run import trainer
from comlrl.tree.nodes import Node

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def comp(tmp_path_factory):
    out = tmp_path_factory.mktemp("direction")
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [
        "model.name=tiny-random", "training.torch_threads=1", "external.mode=plain", "rollout.engine=hf",
        "magrpo.learning_rate=1e-2", "magrpo.max_grad_norm=1000", "magrpo.num_generations=2",
        f"training.output_dir={out}",
    ])
    return trainer.build(cfg)


def _adapter(comp, agent: int) -> dict[str, torch.Tensor]:
    name = f".{agent_name(agent)}."
    return {n: p.detach().clone() for n, p in comp.policies.module.named_parameters() if name in n}


def test_update_follows_the_advantage_sign_per_agent(comp):
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
    # crossed joint actions: agent 0's completion 0 is in the joint actions returning 1, its completion 1 in
    # those returning -1 (advantages +1, -1); each of agent 1's completions is in one of each (tied: no signal)
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                joint=[(0, 0), (0, 1), (1, 0), (1, 1)], returns=[1.0, 1.0, -1.0, -1.0])
    before0, before1 = summed_logp(comp, s0), summed_logp(comp, s1)
    adapter1 = _adapter(comp, 1)
    assert adapter1, "agent 1's adapter parameters were not found by name"
    for _ in range(3):
        out = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
        assert out.samples == 2.0 and torch.isfinite(torch.tensor(out.loss))
        assert node.advantages[0] == pytest.approx([1.0, -1.0], abs=1e-5) and node.advantages[1] is None
    after0, after1 = summed_logp(comp, s0), summed_logp(comp, s1)
    assert after0[0] > before0[0] + 0.05, (before0, after0)  # the +1 completion became likelier
    assert after0[1] < before0[1] - 0.05, (before0, after0)  # the -1 completion less likely
    assert after1 == pytest.approx(before1, abs=1e-6)
    assert all(torch.equal(adapter1[n], p) for n, p in _adapter(comp, 1).items())


@pytest.fixture(scope="module")
def dpo_comp(tmp_path_factory):
    out = tmp_path_factory.mktemp("direction_dpo")
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [
        "model.name=tiny-random", "training.torch_threads=1", "external.mode=plain", "rollout.engine=hf",
        "algorithm.name=madpo", "algorithm.dpo.beta=1.0", "magrpo.learning_rate=1e-2", "magrpo.max_grad_norm=1000",
        "magrpo.num_generations=2", f"training.output_dir={out}",
    ])
    return trainer.build(cfg)


def test_dpo_update_raises_the_preferred_sibling_against_the_reference(dpo_comp):
    comp = dpo_comp
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                joint=[(0, 0), (0, 1), (1, 0), (1, 1)], returns=[1.0, 1.0, -1.0, -1.0])  # agent 1 tied: no pair
    before0, before1 = summed_logp(comp, s0), summed_logp(comp, s1)
    adapter1 = _adapter(comp, 1)
    first = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
    # one pair (agent 0: completion 0 over 1); at the start the policy is the reference: margin 0, loss log 2
    assert first.samples == 2.0 and (first.groups.groups, first.groups.skipped) == (2, 1)
    assert first.metrics["dpo/accuracy/n"] == 1.0 and first.metrics["dpo/margin"] == pytest.approx(0.0, abs=1e-6)
    assert first.metrics["dpo/loss"] == pytest.approx(0.693147, abs=1e-5)
    for _ in range(2):
        out = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
    after0, after1 = summed_logp(comp, s0), summed_logp(comp, s1)
    assert (after0[0] - after0[1]) > (before0[0] - before0[1]) + 0.1, (before0, after0)
    assert out.metrics["dpo/margin"] > 0.1 and out.metrics["dpo/accuracy"] == 1.0
    assert after1 == pytest.approx(before1, abs=1e-6)
    assert all(torch.equal(adapter1[n], p) for n, p in _adapter(comp, 1).items())


def _critic_comp(tmp_path_factory, algo: str, mode: str = "lora"):
    out = tmp_path_factory.mktemp(f"direction_{algo}")
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [f"agents.mode={mode}",
        "model.name=tiny-random", "training.torch_threads=1", "external.mode=plain", "rollout.engine=hf",
        f"algorithm.name={algo}", "magrpo.learning_rate=1e-2", "magrpo.max_grad_norm=1000",
        "magrpo.num_generations=2", "magrpo.advantage.scale=none", "algorithm.critic.learning_rate=3e-3",
        f"training.output_dir={out}",
    ])
    return trainer.build(cfg)


@pytest.mark.parametrize(("algo", "mode"), [("iac", "lora"), ("maac", "lora"), ("iac", "full")])
def test_actor_critic_update_follows_the_critics_advantage_and_fits_the_targets(tmp_path_factory, algo, mode):
    comp = _critic_comp(tmp_path_factory, algo, mode)
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
    before0, before1 = summed_logp(comp, s0), summed_logp(comp, s1)
    mse = []
    for _ in range(4):  # the same node each time: fixed targets [1, 0] for both agents
        node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1], joint=[(0, 0), (1, 1)],
                    rewards=[1.0, 0.0], returns=[1.0, 0.0])
        out = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
        mse.append(out.metrics["value/mse"] / out.metrics["value/mse/n"])
    # the heads start at 0: squared error 0.5 per sample; the best constant value 0.5 leaves 0.25
    assert mse[0] == pytest.approx(0.5) and min(mse[1:]) < 0.4, mse
    after0, after1 = summed_logp(comp, s0), summed_logp(comp, s1)
    for before, after in ((before0, after0), (before1, after1)):
        assert after[0] - after[1] > before[0] - before[1] + 0.1, (before, after)  # target 1 over target 0


def test_value_heads_are_saved_and_loaded_with_the_agents(tmp_path_factory, tmp_path):
    comp = _critic_comp(tmp_path_factory, "iac")
    heads = comp.policies.module.value_heads
    with torch.no_grad():
        heads[0].weight.fill_(0.5)
        heads[1].bias.fill_(-2.0)
    comp.policies.save(tmp_path / "w")
    with torch.no_grad():
        for p in heads.parameters():
            p.zero_()
    comp.policies.load(tmp_path / "w")
    assert float(heads[0].weight.min()) == 0.5 and float(heads[1].bias[0]) == -2.0
    (tmp_path / "w" / "value_heads.pt").unlink()
    with pytest.raises(ValueError, match="no value heads"):
        comp.policies.load(tmp_path / "w")


def test_centralized_update_raises_the_team_completion_whose_parts_scored_higher(tmp_path_factory):
    out = tmp_path_factory.mktemp("direction_centralized")
    cfg = load_config(ROOT / "configs/centralized_T1_G8.yaml", [
        "model.name=tiny-random", "training.torch_threads=1", "rollout.engine=hf", "magrpo.learning_rate=1e-2",
        "magrpo.max_grad_norm=1000", "magrpo.num_generations=2", f"training.output_dir={out}"])
    comp = trainer.build(cfg)
    assert comp.task.num_agents == 1 and comp.policies.num_agents == 1
    good = ("<agent_0>\ndef aux(a, b):\n    return a + b\n</agent_0>\n"
            "<agent_1>\ndef add(a, b):\n    return aux(a, b)\n</agent_1>")
    bad = "<agent_0>\nprint('hi')\n</agent_0>"
    team = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    before = summed_logp(comp, team)
    for _ in range(3):
        node = Node(id="r0", turn=1, root=0, messages=[[]], completions=[team], joint=[(0,), (1,)],
                    returns=[1.0, 0.0])
        train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
    after = summed_logp(comp, team)
    assert after[0] - after[1] > before[0] - before[1] + 0.1, (before, after)


def test_maac_team_value_moves_as_fast_as_an_iac_value(tmp_path_factory):
    """One update of zero-initialised heads towards the same targets: the team critic (mean of the heads)
    moves its value about as far as iac's per-agent critic. A sum of N heads moved it N times as far under
    Adam, whose step size ignores the gradient's scale (the maac run that overshot, docs/results.md)."""
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    moved = {}
    for algo in ("iac", "maac"):
        comp = _critic_comp(tmp_path_factory, algo)
        s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
        s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
        means = []
        for _ in range(2):
            node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1], joint=[(0, 0), (1, 1)],
                        rewards=[1.0, 1.0], returns=[1.0, 1.0])
            out = train_on_trees(comp.trained(), comp.algorithm, comp.cfg, [node])
            means.append(out.metrics["value/mean"] / out.metrics["value/mean/n"])
        assert means[0] == 0.0  # zero-initialised heads
        moved[algo] = means[1]
    assert moved["iac"] > 0 and 0.5 < moved["maac"] / moved["iac"] < 1.5, moved


def test_a_weight_no_loss_reached_steps_on_a_zero_gradient_as_on_several_ranks(comp):
    """One process adds no zero term over every weight per micro-batch (a pass over every weight each time); the
    step gives such weights their zero gradient instead, so AdamW steps every weight, as when ranks reduce zeros."""
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [chat_sample(comp, 0, good), chat_sample(comp, 0, bad)]
    s1 = [chat_sample(comp, 1, good), chat_sample(comp, 1, bad)]
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                joint=[(0, 0), (0, 1), (1, 0), (1, 1)], returns=[1.0, 1.0, -1.0, -1.0])  # agent 1: no signal
    learner = comp.trained()
    train_on_trees(learner, comp.algorithm, comp.cfg, [node])
    state = learner.optimizer.optimizer.state  # accelerate's wrapper around torch's AdamW
    steps = {float(state[p]["step"]) for p in learner.trainable()}
    assert len(steps) == 1 and len(state) == len(learner.trainable()), steps
    # freed after the step (the next backward's gradients become the buffers; their memory serves generation till then)
    assert all(p.grad is None for p in learner.trainable())
    train_on_trees(learner, comp.algorithm, comp.cfg, [node])
    assert all(p.grad is None for p in learner.trainable())
    assert {float(state[p]["step"]) for p in learner.trainable()} == {steps.pop() + 1}  # every weight stepped again


def test_a_step_without_samples_runs_no_forward_in_one_process(comp, monkeypatch):
    """Every group tied: one process runs no zero-weight forward and backward (ranks would, to line up their
    collectives); AdamW still steps every weight, on zero gradients."""
    s0 = [chat_sample(comp, 0, "x = 1\n"), chat_sample(comp, 0, "x = 2\n")]
    s1 = [chat_sample(comp, 1, "y = 1\n"), chat_sample(comp, 1, "y = 2\n")]
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                joint=[(0, 0), (1, 1)], returns=[0.5, 0.5])  # tied: no agent has a signal
    learner = comp.trained()
    assert not learner.in_lock_step
    state = learner.optimizer.optimizer.state
    before = {id(p): float(state[p]["step"]) if p in state else 0.0 for p in learner.trainable()}

    def no_forward(*args, **kwargs):
        raise AssertionError("a forward ran for a step without samples")

    monkeypatch.setattr(type(comp.policies), "token_logprobs", no_forward)
    monkeypatch.setattr(type(comp.policies), "logprobs_and_values", no_forward)
    out = train_on_trees(learner, comp.algorithm, comp.cfg, [node])
    assert out.samples == 0.0 and out.loss == 0.0 and out.grad_norm == 0.0
    assert all(float(state[p]["step"]) == before[id(p)] + 1 for p in learner.trainable())


def test_a_rank_short_of_micro_batches_runs_as_many_reference_forwards_as_the_others(comp, monkeypatch):
    """Ranks in lock step, simulated in one process (`in_lock_step` forced; the most micro-batches a rank has
    given as `n_micro`): a rank with fewer runs the missing reference forwards on the spare and drops them, as the
    update's loop runs zero-weight micro-batches; under ZeRO-3 a rank that skipped them would wait in the next
    gather of the others' forwards. Alone, a process runs its own only."""
    from dataclasses import replace

    from comlrl.learn.units import Unit
    from comlrl.learn.update import reference_logprobs

    unit = Unit((chat_sample(comp, 0, "x = 1\n"),))
    learner = comp.trained()
    calls: list[bool] = []
    real = learner.logprobs

    def counted(samples, reference=False):
        calls.append(reference)
        return real(samples, reference=reference)

    monkeypatch.setattr(learner, "logprobs", counted)
    with_kl = replace(comp.cfg.magrpo.loss, kl_coef=0.1)
    _, alone = reference_logprobs(learner, comp.algorithm, with_kl, [[unit]], 3, [unit])
    assert calls == [True] and len(alone) == 1
    calls.clear()
    monkeypatch.setattr(type(learner), "in_lock_step", property(lambda self: True))
    _, ranked = reference_logprobs(learner, comp.algorithm, with_kl, [[unit]], 3, [unit])
    assert calls == [True, True, True] and len(ranked) == 1 and torch.equal(ranked[0], alone[0])
