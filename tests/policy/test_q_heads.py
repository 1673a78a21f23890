"""Q heads read the state after each sample's action (`attach_value_heads(at_action=True)`), V heads the
prompt's end: on the tiny random model, for both agent shapes (LoRA adapters on one base, full models)."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import make_policies


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_a_q_head_tells_actions_apart_where_a_v_head_sees_one_state(mode: str) -> None:
    pol = make_policies(mode)
    msgs = [{"role": "user", "content": "Write add(a, b)."}]
    samples = [pol.sample_of(0, msgs, "return a + b"), pol.sample_of(0, msgs, "pass"),
               pol.sample_of(1, msgs, "return a + b")]
    for at_action in (False, True):
        pol.module.attach_value_heads(at_action=at_action)
        with torch.no_grad():
            for head in pol.module.value_heads:
                head.weight.copy_(torch.randn(head.weight.shape, generator=torch.Generator().manual_seed(1)))
            _, _, v = pol.logprobs_and_values(samples)
        if at_action:  # Q(s, a): the same state, two actions, two values
            assert abs(float(v[0] - v[1])) > 1e-4
        else:  # V(s): one state, one value, whatever the agent went on to write
            assert float(v[0]) == pytest.approx(float(v[1]), abs=1e-5)
