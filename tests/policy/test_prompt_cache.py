"""Prefill reuse across calls (`comlrl.policy.generation.PromptCache`): a prompt that starts like one an earlier
call prefilled (a later turn repeats the system message, the problem and the history) prefills only the rest,
samples what a whole prefill samples, keeps agents apart, stays within its budget, and is forgotten when the
weights change or the rollout ends."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from policy_helpers import make_policies
from transformers import DynamicCache, LlamaConfig, MistralConfig

from comlrl.engines import HFEngine
from comlrl.policy import AgentPolicies
from comlrl.policy.generation import PromptCache

torch.set_num_threads(1)

G = 2
PROBLEM = "Write a function add(a, b) that returns their sum."
TURN_2 = PROBLEM + "\nYour previous answer:\ndef add(a, b): return a - b\nImprove it."
TURN_2B = PROBLEM + "\nYour previous answer:\nreturn 0\nImprove it, please."


def msgs(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def prefill_widths(pol: AgentPolicies, agent: int) -> list[int]:
    """The token count of every decoder forward of `agent`'s model during the next calls."""
    widths: list[int] = []
    pol.module.generation_model(agent).get_decoder().register_forward_pre_hook(
        lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    return widths


def common_start(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def tokens(out: list[list]) -> list[list[tuple[int, ...]]]:
    return [[s.completion_ids for s in row] for row in out]


def whole(pol: AgentPolicies, requests: list, greedy: bool = True) -> list[list[tuple[int, ...]]]:
    """What the same call samples with nothing kept (the policies' own cache emptied first and after)."""
    pol.prompt_cache.clear()
    out = tokens(pol.generate(requests, G, greedy=greedy))
    pol.prompt_cache.clear()
    return out


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_a_later_turn_prefills_only_what_the_earlier_one_did_not(mode: str) -> None:
    pol = make_policies(mode, seed=0)
    first, later = pol.prompt_ids(0, msgs(PROBLEM))[0], pol.prompt_ids(0, msgs(TURN_2))[0]
    shared = common_start(first[:-1], later[:-1])
    assert 10 < shared < len(later) - 1
    expected = whole(pol, [(0, msgs(TURN_2))])
    torch.manual_seed(3)
    expected_sampled = whole(pol, [(0, msgs(TURN_2B))], greedy=False)
    widths = prefill_widths(pol, 0)
    pol.generate([(0, msgs(PROBLEM))], G, greedy=True)
    assert widths[0] == len(first) - 1  # nothing kept yet: the whole prompt but its last token
    del widths[:]
    assert tokens(pol.generate([(0, msgs(TURN_2))], G, greedy=True)) == expected
    assert widths[0] == len(later) - 1 - shared  # only the tokens after the kept start
    torch.manual_seed(3)  # sampling: the same draws as after a whole prefill
    assert tokens(pol.generate([(0, msgs(TURN_2B))], G)) == expected_sampled


def test_rows_without_a_kept_start_prefill_whole_beside_rows_with_one() -> None:
    """LoRA puts both agents' rows in one call: agent 1 kept nothing, so the batch prefills from agent 1's first
    column (left padding), agent 0's row reusing the kept tokens left of it."""
    pol = make_policies("lora", seed=0)
    requests = [(0, msgs(TURN_2)), (1, msgs(PROBLEM + " Briefly."))]
    expected = whole(pol, requests)
    pol.generate([(0, msgs(PROBLEM))], G, greedy=True)
    widths = prefill_widths(pol, 0)
    assert tokens(pol.generate(requests, G, greedy=True)) == expected
    lengths = [len(pol.prompt_ids(a, m)[0]) for a, m in requests]
    assert lengths[0] > lengths[1]
    assert widths[0] == lengths[1] - 1  # from agent 1's first column: its whole prompt, agent 0's last part


def test_agents_do_not_share_kept_prompts() -> None:
    pol = make_policies("full", seed=0)
    pol.generate([(1, msgs(PROBLEM))], G, greedy=True)
    widths = prefill_widths(pol, 0)
    pol.generate([(0, msgs(TURN_2))], G, greedy=True)
    assert widths[0] == len(pol.prompt_ids(0, msgs(TURN_2))[0]) - 1  # agent 1's keys are not agent 0's


def test_the_hf_engine_forgets_kept_prompts_and_packs_when_weights_change_or_the_rollout_ends() -> None:
    pol = make_policies("full", seed=0)
    engine = HFEngine(pol)
    for forget in (engine.weights_changed, engine.idle):
        engine.generate([(0, msgs(PROBLEM)), (1, msgs(PROBLEM))], G)
        assert pol.prompt_cache.held() == 2
        assert any(packs.held() for packs in pol.module._generation_packs.values())
        forget()
        assert pol.prompt_cache.held() == 0
        assert not any(packs.held() for packs in pol.module._generation_packs.values())


def _cache_of(rows: int, length: int, layers: int = 2) -> DynamicCache:
    cache = DynamicCache()
    for layer in range(layers):
        cache.update(torch.randn(rows, 2, length, 4), torch.randn(rows, 2, length, 4), layer)
    return cache


def test_the_budget_drops_the_oldest_prompts() -> None:
    config = LlamaConfig(num_hidden_layers=2)
    one = 2 * 2 * (1 * 2 * 5 * 4) * 4  # bytes of one 6-token prompt's keys and values (5 tokens, 2 layers)
    cache = PromptCache(budget=2 * one)
    prompts = [[k, 1, 2, 3, 4, 9] for k in range(3)]
    for p in prompts:
        cache.keep([0], [p], len(p), _cache_of(1, len(p) - 1))
    assert cache.held() == 2
    assert cache.start([0], [prompts[0] + [7]], 7, config) is None  # dropped first
    start, reused = cache.start([0], [prompts[2] + [7]], 7, config)
    assert start == 5 and reused.get_seq_length() == 5


def test_models_with_sliding_windows_prefill_whole() -> None:
    cache = PromptCache()
    prompt = [5, 1, 2, 3, 4, 9]
    cache.keep([0], [prompt], len(prompt), _cache_of(1, len(prompt) - 1))
    assert cache.start([0], [prompt + [7]], 7, LlamaConfig(num_hidden_layers=2)) is not None
    assert cache.start([0], [prompt + [7]], 7, MistralConfig(num_hidden_layers=2, sliding_window=4)) is None


def test_a_cache_with_sliding_windows_is_not_kept() -> None:
    cache = PromptCache()
    sliding = DynamicCache(config=MistralConfig(num_hidden_layers=2, sliding_window=4))
    for layer in range(2):
        sliding.update(torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), layer)
    cache.keep([0], [[5, 1, 2, 3, 4, 9]], 6, sliding)
    assert cache.held() == 0
