"""Shared-prefix update: log-probs and gradients equal the unshared layout's on tiny-random (fp32).

Tolerance: 1e-5 absolute on log-probs and 1e-5 relative (of the gradient's max magnitude) on gradients;
the two layouts sum the same terms in a different order, nothing is approximated.
"""

from __future__ import annotations

import pytest
import torch
from policy_helpers import make_policies

from comlrl.policy import AgentPolicies, Sample

PROMPTS = ["say hello", "count to three"]


def _node_samples(pol: AgentPolicies, g: int = 4) -> list[Sample]:
    """Samples as the trainer orders them: per node, per agent, G siblings sharing one prompt."""
    reqs = [(a, [{"role": "user", "content": p}]) for p in PROMPTS for a in range(pol.num_agents)]
    torch.manual_seed(0)
    return [s for row in pol.generate(reqs, g) for s in row]


def _loss_and_grads(pol: AgentPolicies, samples: list[Sample], share: bool, reference: bool = False):
    pol.module.zero_grad(set_to_none=True)
    logps, mask = pol.token_logprobs(samples, share_prefix=share, reference=reference)
    if reference:
        return logps, mask, []
    weights = torch.linspace(-1.0, 1.0, len(samples))[:, None]
    (weights * logps * mask).sum().backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in pol.trainable_parameters()]
    return logps.detach(), mask, grads


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_shared_prefix_equals_unshared_logprobs_and_gradients(mode: str) -> None:
    pol = make_policies(mode)
    samples = _node_samples(pol)
    assert len({s.prompt_ids for s in samples[:4]}) == 1  # a node's G siblings share their prompt
    shared_batch = pol.pack(samples)
    assert shared_batch.tokens < pol.pack(samples, share_prefix=False).tokens
    lp_s, mask_s, g_s = _loss_and_grads(pol, samples, share=True)
    lp_u, mask_u, g_u = _loss_and_grads(pol, samples, share=False)
    assert torch.equal(mask_s, mask_u)
    torch.testing.assert_close(lp_s * mask_s, lp_u * mask_u, atol=1e-5, rtol=0)
    assert any(g.abs().sum() > 0 for g in g_s)
    for a, b in zip(g_s, g_u, strict=True):
        scale = max(float(b.abs().max()), 1e-12)
        torch.testing.assert_close(a / scale, b / scale, atol=1e-5, rtol=0)


def test_shared_prefix_reference_logprobs_equal_unshared() -> None:
    pol = make_policies("lora")
    samples = _node_samples(pol)
    lp_s, mask, _ = _loss_and_grads(pol, samples, share=True, reference=True)
    lp_u, _, _ = _loss_and_grads(pol, samples, share=False, reference=True)
    torch.testing.assert_close(lp_s * mask, lp_u * mask, atol=1e-5, rtol=0)


def test_shared_prefix_with_gradient_checkpointing_matches() -> None:
    pol = make_policies("lora", gradient_checkpointing=True)
    samples = _node_samples(pol)
    _, _, g_s = _loss_and_grads(pol, samples, share=True)
    _, _, g_u = _loss_and_grads(pol, samples, share=False)
    for a, b in zip(g_s, g_u, strict=True):
        scale = max(float(b.abs().max()), 1e-12)
        torch.testing.assert_close(a / scale, b / scale, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_groups_sharing_a_trunk_equal_unshared_logprobs_and_gradients(mode: str) -> None:
    """A later turn's prompt repeats the first's start (system, problem): one agent's groups of both turns share
    that trunk in one row, and nothing moves against each sample in a row of its own."""
    pol = make_policies(mode)
    first = [{"role": "user", "content": PROMPTS[0]}]
    later = [*first, {"role": "assistant", "content": "hi"}, {"role": "user", "content": PROMPTS[1]}]
    torch.manual_seed(0)
    rows = pol.generate([(0, first), (0, later), (1, first), (1, later)], 2)
    samples = [s for row in rows for s in row]
    batch = pol.pack(samples)
    assert batch.input_ids.shape[0] == 2  # one row per agent, each holding both of its groups
    assert batch.tokens < sum(len(s.prompt_ids) for s in samples[::2]) + sum(len(s.completion_ids) for s in samples)
    lp_s, mask_s, g_s = _loss_and_grads(pol, samples, share=True)
    lp_u, mask_u, g_u = _loss_and_grads(pol, samples, share=False)
    torch.testing.assert_close(lp_s * mask_s, lp_u * mask_u, atol=1e-5, rtol=0)
    for a, b in zip(g_s, g_u, strict=True):
        scale = max(float(b.abs().max()), 1e-12)
        torch.testing.assert_close(a / scale, b / scale, atol=1e-5, rtol=0)
