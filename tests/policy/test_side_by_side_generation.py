"""Full-weight agents decoded side by side on CPU (`AgentPolicies.generate`, `side_by_side`) and the sampler that
keeps them reproducible (`SeededSampler`): the samples depend on torch's seed alone, not on the threads or on how
many there are, and the sampler draws from the distribution HF's own warpers make."""

from __future__ import annotations

import os
import threading

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from policy_helpers import make_policies

from comlrl.cores import side_by_side
from comlrl.models import ModelConfig
from comlrl.policy.generation import SeededSampler, warped_candidates

REQUESTS = [(0, [{"role": "user", "content": "Write a function add(a, b)."}]),
            (1, [{"role": "user", "content": "Say hi."}]),
            (0, [{"role": "user", "content": "ok"}])]


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _ids(out) -> list[list[list[int]]]:
    return [[s.completion_ids for s in row] for row in out]


def test_full_agents_sample_the_same_whether_side_by_side_or_one_after_the_other(threads) -> None:
    pol = make_policies(mode="full", max_new_tokens=6, top_k=0, top_p=1.0)
    assert len(pol.module.generation_groups([0, 1, 0])) == 2
    drawn = {}
    for n in (1, 2):  # one torch thread: the calls run in turn; two: in two threads at once
        torch.set_num_threads(n)
        torch.manual_seed(7)
        drawn[n] = _ids(pol.generate(REQUESTS, 3))
        assert torch.get_num_threads() == n  # restored after the threads ran
    assert drawn[1] == drawn[2]
    torch.manual_seed(8)
    assert _ids(pol.generate(REQUESTS, 3)) != drawn[1]  # another seed, other samples: the draw is not fixed
    assert len({tuple(c) for row in drawn[1] for c in row}) > 3  # siblings differ: it samples


def test_lora_agents_share_one_call_and_keep_hfs_sampling(threads) -> None:
    pol = make_policies(mode="lora", max_new_tokens=4)
    assert len(pol.module.generation_groups([0, 1, 0])) == 1  # one call, nothing to run side by side


def test_side_by_side_uses_threads_only_when_torch_has_cores_for_them(threads) -> None:
    seen: list[tuple[str, int]] = []

    def call(k: int):
        return lambda: seen.append((threading.current_thread().name, torch.get_num_threads())) or k

    torch.set_num_threads(1)
    assert side_by_side([call(0), call(1)]) == [0, 1]
    assert {name for name, _ in seen} == {threading.current_thread().name}  # one thread: in turn, here
    seen.clear()
    torch.set_num_threads(2)
    assert side_by_side([call(0), call(1), call(2)]) == [0, 1, 2]  # results in call order
    assert threading.current_thread().name not in {name for name, _ in seen}
    assert {n for _, n in seen} == {1} and torch.get_num_threads() == 2


def _sampler_counts(cfg: ModelConfig, logits: torch.Tensor, draws: int) -> torch.Tensor:
    sampler = SeededSampler(cfg, seed=0, device=torch.device("cpu"))
    counts = torch.zeros(logits.shape[-1])
    for _ in range(draws):
        out = sampler(torch.zeros(1, 1, dtype=torch.long), logits.clone())
        assert out.isfinite().sum() == 1 and out.max() == 0  # one-hot: greedy decoding keeps the drawn token
        counts[out.argmax()] += 1
    return counts


def test_the_sampler_draws_from_hfs_warped_distribution() -> None:
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    cfg = ModelConfig(name="tiny-random", temperature=0.7, top_k=4, top_p=0.9)
    warped = TopPLogitsWarper(0.9)(None, TopKLogitsWarper(4)(None, TemperatureLogitsWarper(0.7)(None, logits)))
    expected = torch.softmax(warped, -1)[0]
    draws = 4000
    freq = _sampler_counts(cfg, logits, draws) / draws
    assert (freq[expected == 0] == 0).all()  # cut tokens are never drawn
    assert torch.allclose(freq, expected, atol=0.03)  # ~4.5 standard errors at the largest probability


def test_the_sampler_is_its_seed_and_nothing_else() -> None:
    cfg = ModelConfig(name="tiny-random", temperature=1.0, top_k=0, top_p=1.0)
    logits = torch.zeros(1, 50)
    a = SeededSampler(cfg, 3, torch.device("cpu"))
    torch.manual_seed(0)
    first = [int(a(None, logits).argmax()) for _ in range(20)]
    b = SeededSampler(cfg, 3, torch.device("cpu"))
    torch.manual_seed(1)  # torch's global generator plays no part
    assert [int(b(None, logits).argmax()) for _ in range(20)] == first


@pytest.mark.parametrize("temperature", [1.0, 0.6])
@pytest.mark.parametrize("top_k", [None, 0, 1, 5, 50, 2000])
@pytest.mark.parametrize("top_p", [1.0, 0.95, 0.6, 0.05])
def test_the_candidates_carry_hfs_warped_distribution(temperature: float, top_k: int | None, top_p: float) -> None:
    """The sampler's top-k-only distribution equals HF's warpers over the whole vocabulary, token for token."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)] if temperature != 1.0 else [])
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    gen = torch.Generator().manual_seed(int(temperature * 10) + (top_k or 0) + int(top_p * 100))
    for scale in (0.1, 1.0, 4.0):  # flat to peaked distributions
        logits = torch.randn(3, 1000, generator=gen) * scale
        expected = torch.softmax(warpers(None, logits.clone()), dim=-1)
        probs, tokens = warped_candidates(logits, temperature, top_k, top_p)
        got = torch.zeros_like(expected).scatter_(1, tokens, probs)
        assert torch.equal(got > 0, expected > 0)  # the same tokens can be drawn
        assert torch.allclose(got, expected, atol=1e-6)
