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

from comlrl import trainer
from comlrl.config import load_config
from comlrl.policy import Sample, agent_name
from comlrl.tree import Node
from comlrl.update import train_on_trees

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def comp(tmp_path_factory):
    out = tmp_path_factory.mktemp("direction")
    cfg = load_config(ROOT / "configs/align_T2_G4.yaml", [
        "model.name=tiny-random", "training.torch_threads=1", "external.mode=plain", "rollout.engine=hf",
        "magrpo.learning_rate=1e-2", "magrpo.max_grad_norm=1000", f"training.output_dir={out}",
    ])
    return trainer.build(cfg)


def _sample(comp, agent: int, text: str) -> Sample:
    pol = comp.policies
    prompt, _ = pol.prompt_ids(agent, [{"role": "user", "content": "Write add(a, b)."}])
    tok = pol.tokenizers[agent]
    ids = tuple(tok(text, add_special_tokens=False)["input_ids"]) + (tok.eos_token_id,)
    return Sample(agent=agent, prompt_ids=tuple(prompt), completion_ids=ids, text=text, finished=True)


def _logp(comp, samples: list[Sample]) -> list[float]:
    with torch.no_grad():
        logps, mask = comp.policies.token_logprobs(samples, module=comp.model)
    return (logps * mask).sum(dim=1).tolist()


def _adapter(comp, agent: int) -> dict[str, torch.Tensor]:
    name = f".{agent_name(agent)}."
    return {n: p.detach().clone() for n, p in comp.policies.module.named_parameters() if name in n}


def test_update_follows_the_advantage_sign_per_agent(comp):
    good, bad = "def add(a, b):\n    return a + b\n", "print('hello world')\n"
    s0 = [_sample(comp, 0, good), _sample(comp, 0, bad)]
    s1 = [_sample(comp, 1, good), _sample(comp, 1, bad)]
    node = Node(id="r0", turn=1, root=0, messages=[[], []], completions=[s0, s1],
                advantages=[[1.0, -1.0], None])  # agent 1's group tied: no signal
    before0, before1 = _logp(comp, s0), _logp(comp, s1)
    adapter1 = _adapter(comp, 1)
    assert adapter1, "agent 1's adapter parameters were not found by name"
    for _ in range(3):
        out = train_on_trees(comp, [node])
        assert out.samples == 2.0 and torch.isfinite(torch.tensor(out.loss))
    after0, after1 = _logp(comp, s0), _logp(comp, s1)
    assert after0[0] > before0[0] + 0.05, (before0, after0)  # the +1 completion became likelier
    assert after0[1] < before0[1] - 0.05, (before0, after0)  # the -1 completion less likely
    assert after1 == pytest.approx(before1, abs=1e-6)
    assert all(torch.equal(adapter1[n], p) for n, p in _adapter(comp, 1).items())
