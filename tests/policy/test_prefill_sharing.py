"""Shared prompt prefill in AgentPolicies.generate: the G samples of a request prefill its prompt once.

The reference is the unshared path: the same request repeated G times with one sample each (every row
prefills its own copy of the prompt), which is what generate did before the prefill was shared.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from policy_helpers import make_policies

from comlrl.policy import AgentPolicies

torch.set_num_threads(1)

G = 3


def msgs(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# different prompt lengths (left padding) and both agents in one batch
REQUESTS = [(0, msgs("Write a function add(a, b).")), (1, msgs("hi")),
            (1, msgs("Write a helper that squares x, please, and explain it.")), (0, msgs("ok"))]


def unshared(pol: AgentPolicies, greedy: bool) -> list[list[tuple[int, ...]]]:
    out = pol.generate([r for r in REQUESTS for _ in range(G)], 1, greedy=greedy)
    return [[out[i * G + s][0].completion_ids for s in range(G)] for i in range(len(REQUESTS))]


def shared(pol: AgentPolicies, greedy: bool) -> list[list[tuple[int, ...]]]:
    return [[s.completion_ids for s in row] for row in pol.generate(REQUESTS, G, greedy=greedy)]


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_shared_prefill_gives_the_unshared_tokens(mode: str) -> None:
    pol = make_policies(mode, seed=0)
    greedy = shared(pol, True)
    assert greedy == unshared(pol, True)
    assert all(len(set(row)) == 1 for row in greedy)
    torch.manual_seed(5)  # same seed: the same samples, so the sampling distribution is unchanged
    sampled = shared(pol, False)
    torch.manual_seed(5)
    assert sampled == unshared(pol, False)
    assert any(len(set(row)) > 1 for row in sampled)  # siblings really are different samples
    assert pol.module.training


def test_each_prompt_is_prefilled_once() -> None:
    pol = make_policies("lora", seed=0)
    decoder = pol.module.base.get_decoder()
    calls: list[tuple[int, int]] = []
    hook = decoder.register_forward_pre_hook(
        lambda _m, _a, kw: calls.append(tuple(kw["input_ids"].shape)) if kw.get("input_ids") is not None else None,
        with_kwargs=True)
    try:
        out = pol.generate(REQUESTS, G, greedy=True)
    finally:
        hook.remove()
    width = max(len(row[0].prompt_ids) for row in out)
    assert calls[0] == (len(REQUESTS), width - 1)  # one prefill per request, not per sample
    assert calls[1] == (len(REQUESTS) * G, 1)  # then every row runs the last prompt token and decodes
    assert all(c[1] == 1 for c in calls[1:])
