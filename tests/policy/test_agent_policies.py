"""AgentPolicies on the tiny random model (fast) and the embedded SmolLM2 (slow)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from policy_helpers import make_policies

from comlrl.config.schema import EMBEDDED_MODEL, AgentsConfig, ModelConfig
from comlrl.models import resolve_model_path
from comlrl.policy import AgentPolicies, Sample

torch.set_num_threads(1)

ATOL = 2e-4


@pytest.fixture(scope="module")
def pol() -> AgentPolicies:
    return make_policies()


def msgs(text: str, system: str | None = None) -> list[dict]:
    out = [{"role": "system", "content": system}] if system else []
    return out + [{"role": "user", "content": text}]


REQUESTS = [(0, msgs("Write a function add(a, b).")), (1, msgs("hi")),
            (1, msgs("Write a helper that squares x, please, and explain it.")), (0, msgs("ok"))]


def plain_peft(pol: AgentPolicies, agent: int):
    """The same weights as a plain peft model with one active adapter (no routing hooks of ours)."""
    pm = pol.module.peft
    pm.base_model.set_adapter(f"agent{agent}")
    return pm


def plain_logprobs(model, sample: Sample, temperature: float = 1.0) -> torch.Tensor:
    ids = torch.tensor([list(sample.prompt_ids) + list(sample.completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float() / temperature
    lp = logits.log_softmax(-1)[:-1].gather(-1, ids[0, 1:, None]).squeeze(-1)
    return lp[len(sample.prompt_ids) - 1:]


# ---- generation -------------------------------------------------------------------------------------------
def test_generate_shapes_and_sample_fields(pol: AgentPolicies) -> None:
    out = pol.generate(REQUESTS, num_samples=3)
    assert len(out) == len(REQUESTS) and all(len(r) == 3 for r in out)
    for (agent, _), row in zip(REQUESTS, out, strict=True):
        for s in row:
            assert s.agent == agent and not s.prompt_truncated
            assert 1 <= len(s.completion_ids) <= 8
            assert s.finished == (s.completion_ids[-1] in pol.eos_ids[agent])
            assert s.text == pol.tokenizers[agent].decode(list(s.completion_ids), skip_special_tokens=True)
    assert out[0][0].prompt_ids == tuple(pol.prompt_ids(0, REQUESTS[0][1])[0])
    assert pol.module.training  # generate restores the mode


def test_mixed_batch_generation_equals_per_adapter_generation(pol: AgentPolicies) -> None:
    mixed = pol.generate(REQUESTS, num_samples=2, greedy=True)
    for r, (agent, m) in enumerate(REQUESTS):
        alone = pol.generate([(agent, m)], num_samples=1, greedy=True)[0][0]
        assert mixed[r][0].completion_ids == mixed[r][1].completion_ids == alone.completion_ids
        # and plain peft (one active adapter, no padding) agrees
        model = plain_peft(pol, agent)
        ids = torch.tensor([list(alone.prompt_ids)])
        ref = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                             eos_token_id=pol.eos_ids[agent], pad_token_id=pol.tokenizers[agent].pad_token_id)
        assert tuple(ref[0, ids.shape[1]:].tolist()[:len(alone.completion_ids)]) == alone.completion_ids
    pol.module.all_adapters_trainable()
    # agents really differ, or this test would prove nothing
    assert mixed[0][0].completion_ids != pol.generate([(1, REQUESTS[0][1])], 1, greedy=True)[0][0].completion_ids


def test_one_count_per_request_gives_each_its_own_rows_in_one_call(pol: AgentPolicies) -> None:
    """Nodes of different G in one draw: request r gets counts[r] completions, every one its own prompt's
    (greedy rows equal the request alone), sampled rows as many; a count list of the wrong length is refused."""
    counts = [2, 1, 3, 1]
    mixed = pol.generate(REQUESTS, counts, greedy=True)
    assert [len(r) for r in mixed] == counts
    for r, (agent, m) in enumerate(REQUESTS):
        alone = pol.generate([(agent, m)], 1, greedy=True)[0][0]
        assert {s.completion_ids for s in mixed[r]} == {alone.completion_ids}
        assert all(s.agent == agent and s.prompt_ids == alone.prompt_ids for s in mixed[r])
    assert [len(r) for r in pol.generate(REQUESTS, counts)] == counts
    assert [len(r) for r in pol.generate(REQUESTS, [2, 2, 2, 2], greedy=True)] == [2] * 4  # one count: repeat
    with pytest.raises(ValueError, match="3 sample counts for 4 requests"):
        pol.generate(REQUESTS, counts[:3])


def test_generation_stops_at_eos_and_cuts_there(pol: AgentPolicies) -> None:
    first = pol.generate([REQUESTS[0]], 1, greedy=True)[0][0]
    stop = first.completion_ids[3]  # pretend this token is EOS: generation must stop right after it
    saved = pol.eos_ids[0]
    try:
        pol.eos_ids[0] = [stop]
        again = pol.generate([REQUESTS[0], REQUESTS[3]], 1, greedy=True)[0][0]
    finally:
        pol.eos_ids[0] = saved
    n = first.completion_ids.index(stop) + 1
    assert again.finished and again.completion_ids == first.completion_ids[:n]


def test_answer_prefix_is_continued_and_leads_the_text(pol: AgentPolicies) -> None:
    prefix = "```python\ndef aux("
    chat = [*REQUESTS[0][1], {"role": "assistant", "content": prefix}]
    tok = pol.tokenizers[0]
    ids, _ = pol.prompt_ids(0, chat)
    rendered = tok.decode(ids)
    assert rendered.endswith(prefix)  # the open assistant turn: no end-of-turn token after the prefix
    opened = tok.apply_chat_template(REQUESTS[0][1], tokenize=False, add_generation_prompt=True)
    assert rendered.startswith(opened) and rendered[len(opened):] == prefix
    s = pol.generate([(0, chat)], 1, greedy=True)[0][0]
    assert s.prompt_ids == tuple(ids)  # the prefix is prompt: trained on only through what follows it
    assert s.text == prefix + tok.decode(list(s.completion_ids), skip_special_tokens=True)


# ---- log-probs ---------------------------------------------------------------------------------------------
def test_module_logprobs_equal_plain_transformers(pol: AgentPolicies) -> None:
    samples = [s for row in pol.generate(REQUESTS, 2) for s in row]
    with torch.no_grad():
        logps, mask = pol.token_logprobs(samples)
    for i, s in enumerate(samples):
        n = len(s.completion_ids)
        assert mask[i, :n].eq(1).all() and mask[i, n:].eq(0).all()
        want = plain_logprobs(plain_peft(pol, s.agent), s)
        torch.testing.assert_close(logps[i, :n], want, atol=ATOL, rtol=0)
    pol.module.all_adapters_trainable()


def test_one_agent_batch_takes_the_plain_path_with_the_same_numbers_and_gradients(pol: AgentPolicies) -> None:
    samples = [s for row in pol.generate(REQUESTS, 2) for s in row]  # agents 0,0, 1,1, 1,1, 0,0
    mixed_lp, _ = pol.token_logprobs(samples)
    agent1 = [s for s in samples if s.agent == 1]
    calls: list[str] = []
    lora_linear = type(pol.module._layers[0])
    orig = lora_linear._mixed_batch_forward

    def spy(self, *a, **kw):
        calls.append("mixed")
        return orig(self, *a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lora_linear, "_mixed_batch_forward", spy)
        alone_lp, _ = pol.token_logprobs(agent1)
        assert calls == []  # one agent: no per-row routing
        pol.token_logprobs(samples[:3])
        assert calls  # two agents: per-row routing
    rows = [i for i, s in enumerate(samples) if s.agent == 1]
    torch.testing.assert_close(alone_lp, mixed_lp[rows, : alone_lp.shape[1]], atol=ATOL, rtol=0)
    pol.module.zero_grad(set_to_none=True)
    alone_lp.sum().backward()  # gradients reach agent 1's adapter only, all adapters stay trainable
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in pol.agent_parameters(0))
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in pol.agent_parameters(1))
    assert all(p.requires_grad for p in pol.agent_parameters(0) + pol.agent_parameters(1))
    pol.module.zero_grad(set_to_none=True)
    assert {str(m._active_adapter) for m in pol.module._layers} == {str(a) for a in pol.module._peft_active}


def test_reference_logprobs_are_the_base_model_and_need_no_grad(pol: AgentPolicies) -> None:
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny-random"))
    samples = [s for row in pol.generate(REQUESTS[:2], 1) for s in row]
    ref, _ = pol.token_logprobs(samples, reference=True)
    pol_lp, _ = pol.token_logprobs(samples)
    assert not ref.requires_grad and pol_lp.requires_grad
    for i, s in enumerate(samples):
        n = len(s.completion_ids)
        torch.testing.assert_close(ref[i, :n], plain_logprobs(base, s), atol=ATOL, rtol=0)
        assert (ref[i, :n] - pol_lp[i, :n]).abs().max() > 1e-3  # adapters matter
    assert all(p.requires_grad for p in pol.agent_parameters(0) + pol.agent_parameters(1))


def test_temperature_scales_logits(pol: AgentPolicies) -> None:
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny-random"))
    s = pol.generate(REQUESTS[:1], 1)[0][0]
    old = pol.cfg.temperature
    try:
        pol.cfg.temperature = 0.7
        ref, _ = pol.token_logprobs([s], reference=True)
    finally:
        pol.cfg.temperature = old
    torch.testing.assert_close(ref[0, :len(s.completion_ids)], plain_logprobs(base, s, 0.7), atol=ATOL, rtol=0)


def test_mask_excludes_padding_and_everything_after_eos(pol: AgentPolicies) -> None:
    eos = pol.eos_ids[0][0]
    p = tuple(pol.prompt_ids(0, msgs("x"))[0])
    samples = [
        Sample(0, p, (11, 12, eos, 13, 14), "", True),  # junk after EOS (e.g. hand-made): masked
        Sample(1, p[:-2], (21,), "", False),
        Sample(0, p, (), "", False),  # empty completion: all masked
    ]
    logps, mask = pol.token_logprobs(samples)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
    assert torch.isfinite(logps).all()
    # a row's log-probs do not depend on the padding that other rows force on it
    alone, _ = pol.token_logprobs(samples[1:2])
    torch.testing.assert_close(logps[1, :1], alone[0, :1], atol=ATOL, rtol=0)


def test_greedy_tokens_are_the_argmax_of_the_logprobs(pol: AgentPolicies) -> None:
    """Positions skip left padding exactly as generate does, so scoring sees what sampling saw."""
    samples = [row[0] for row in pol.generate(REQUESTS, 1, greedy=True)]
    b = pol.pack(samples)
    with torch.no_grad():
        m = pol.module
        with m.routed([f"agent{a}" for a in b.row_agents.tolist()]):
            logits = m.base(input_ids=b.input_ids, attention_mask=b.attention, position_ids=b.position_ids).logits
    flat = logits.reshape(-1, logits.shape[-1])
    for i, s in enumerate(samples):
        n = len(s.completion_ids)
        assert flat[b.pred_index[i, :n]].argmax(-1).tolist() == list(s.completion_ids)


# ---- gradients ---------------------------------------------------------------------------------------------
def _grads(pol: AgentPolicies, agent: int) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                      for p in pol.agent_parameters(agent)])


def _backward(pol: AgentPolicies, samples: list[Sample], weights: list[float]) -> list[torch.Tensor]:
    pol.module.zero_grad(set_to_none=True)
    logps, mask = pol.token_logprobs(samples)
    (torch.tensor(weights)[:, None] * logps * mask).sum().backward()
    return [_grads(pol, a) for a in range(pol.num_agents)]


@pytest.fixture(scope="module")
def mixed_samples(pol: AgentPolicies) -> list[Sample]:
    return [row[0] for row in pol.generate(REQUESTS, 1)]  # agents 0, 1, 1, 0


def test_one_backward_reaches_every_adapter_from_its_own_rows_only(pol: AgentPolicies,
                                                                   mixed_samples: list[Sample]) -> None:
    both = _backward(pol, mixed_samples, [1, 1, 1, 1])
    assert both[0].abs().sum() > 0 and both[1].abs().sum() > 0
    only0 = _backward(pol, mixed_samples, [1, 0, 0, 1])  # agent-1 rows present but carry no loss
    assert only0[1].abs().sum() == 0
    torch.testing.assert_close(only0[0], both[0], atol=1e-6, rtol=1e-5)
    alone0 = _backward(pol, [mixed_samples[0], mixed_samples[3]], [1, 1])  # rows of agent 0 by themselves
    torch.testing.assert_close(alone0[0], both[0], atol=1e-5, rtol=1e-4)
    alone1 = _backward(pol, mixed_samples[1:3], [1, 1])
    torch.testing.assert_close(alone1[1], both[1], atol=1e-5, rtol=1e-4)
    base = [p for n, p in pol.module.named_parameters() if "lora_" not in n]
    assert all(not p.requires_grad and p.grad is None for p in base)
    pol.module.zero_grad(set_to_none=True)


def test_gradient_checkpointing_replays_each_rows_adapter(pol: AgentPolicies, mixed_samples: list[Sample],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """HF's own checkpoint function would replay LoRA layers without the per-row routing."""
    from comlrl import policy

    calls: list[int] = []
    orig = policy.LoraAgentsModule.checkpoint_fn
    monkeypatch.setattr(policy.LoraAgentsModule, "checkpoint_fn",
                        lambda self, fn, *a, **k: calls.append(1) or orig(self, fn, *a, **k))
    want = _backward(pol, mixed_samples, [1, 2, -1, 0.5])
    ckpt = make_policies(gradient_checkpointing=True)
    ckpt.module.load_state_dict(pol.module.state_dict())
    got = _backward(ckpt, mixed_samples, [1, 2, -1, 0.5])
    assert len(calls) == 2  # one per decoder layer: checkpointing really ran
    for a in range(2):
        torch.testing.assert_close(got[a], want[a], atol=1e-5, rtol=1e-4)
    pol.module.zero_grad(set_to_none=True)


def test_one_optimizer_step_moves_every_agent(mixed_samples: list[Sample]) -> None:
    p = make_policies(seed=1)
    opt = torch.optim.AdamW(p.trainable_parameters(), lr=1e-2)
    before = [torch.cat([q.detach().flatten().clone() for q in p.agent_parameters(a)]) for a in range(2)]
    _backward(p, mixed_samples, [1, 1, 1, 1])
    opt.step()
    after = [torch.cat([q.detach().flatten() for q in p.agent_parameters(a)]) for a in range(2)]
    assert all(not torch.equal(b, a) for b, a in zip(before, after, strict=True))


def test_accelerate_prepared_module_gives_the_same_logprobs(pol: AgentPolicies,
                                                            mixed_samples: list[Sample]) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    try:
        wrapped = Accelerator(cpu=True).prepare(pol.module)
        with torch.no_grad():
            a, _ = pol.token_logprobs(mixed_samples, module=wrapped)
            b, _ = pol.token_logprobs(mixed_samples)
        torch.testing.assert_close(a, b)
    finally:  # accelerate's state is process-global: leave none behind for other tests
        AcceleratorState._reset_state(reset_partial_state=True)


# ---- truncation --------------------------------------------------------------------------------------------
def test_long_history_is_cut_in_the_middle_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    p = make_policies(max_prompt_tokens=80)
    history = [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "PROBLEM: write add(a, b)."},
        {"role": "assistant", "content": "def add(a, b): return a - b  " + "filler " * 60},
        {"role": "user", "content": "FEEDBACK one: wrong sign. " + "more " * 30},
        {"role": "assistant", "content": "def add(a, b): return a + b + 0"},
        {"role": "user", "content": "LATEST: revise it."},
    ]
    with caplog.at_level(logging.WARNING, logger="comlrl.policy"):
        out = p.generate([(0, history), (1, msgs("short"))], num_samples=2)
        assert not caplog.records  # one line per report (a training step), not one per prompt
        p.report_truncations("step 1")
    [line] = [r.getMessage() for r in caplog.records]
    assert p.prompt_truncations == 1
    assert line.startswith("step 1: cut 1 of 2 prompts to model.max_prompt_tokens=80 (longest ")
    assert ": 1 by dropping 2 middle messages; 1 cut so far" in line
    s = out[0][0]
    assert s.prompt_truncated and out[0][1].prompt_truncated and not out[1][0].prompt_truncated
    assert len(s.prompt_ids) <= 80
    text = p.tokenizers[0].decode(list(s.prompt_ids))
    assert "PROBLEM" in text and "LATEST" in text and "You write Python" in text
    assert "filler" not in text and "FEEDBACK one" not in text
    assert text.endswith("<|im_start|>assistant\n")


def test_a_history_cut_keeps_the_task_given_head_of_messages() -> None:
    """Tasks with a demonstration before the problem (actions) keep all of it: the default head of two
    messages would keep the demonstration's first turn and drop the problem."""
    history = [
        {"role": "system", "content": "You act."},
        {"role": "user", "content": "DEMO question"},
        {"role": "assistant", "content": "DEMO answer"},
        {"role": "user", "content": "PROBLEM: fix hello.py"},
        {"role": "assistant", "content": "first try " + "filler " * 60},
        {"role": "user", "content": "RESULTS one " + "filler " * 20},
        {"role": "assistant", "content": "second try"},
        {"role": "user", "content": "LATEST: now finish."},
    ]
    default = make_policies(max_prompt_tokens=80)
    text = default.tokenizers[0].decode(default.prompt_ids(0, history)[0])
    assert "DEMO question" in text and "PROBLEM" not in text  # what the head count is for
    p = make_policies(max_prompt_tokens=80)
    p.head_messages = 4
    ids, cut = p.prompt_ids(0, history)
    text = p.tokenizers[0].decode(ids)
    assert cut and len(ids) <= 80
    assert all(k in text for k in ("You act.", "DEMO question", "DEMO answer", "PROBLEM", "second try", "LATEST"))
    assert "filler" not in text and "RESULTS one" not in text


def test_prompt_cuts_are_reported_as_one_line_with_the_count_and_how(caplog: pytest.LogCaptureFixture) -> None:
    from comlrl.policy.generation import encode_chat

    p = make_policies(max_prompt_tokens=80)
    long = [msgs("START " + "word " * n + " END") for n in (100, 200, 150)]
    with caplog.at_level(logging.WARNING, logger="comlrl.policy"):
        p.generate([(0, long[0]), (1, long[1]), (0, msgs("short")), (1, long[2])], num_samples=2)
        p.report_truncations("step 7")
        p.report_truncations("step 8")  # nothing cut since the last report: no line
    longest = len(encode_chat(p.tokenizers[1], long[1]))
    assert [r.getMessage() for r in caplog.records] == [
        f"step 7: cut 3 of 4 prompts to model.max_prompt_tokens=80 (longest {longest} tokens): 3 by cutting "
        "tokens inside a message; 3 cut so far"]
    assert p.prompt_truncations == 3


def test_a_single_huge_message_is_cut_by_tokens_keeping_both_ends() -> None:
    p = make_policies(max_prompt_tokens=80)
    ids, cut = p.prompt_ids(0, msgs("START " + "word " * 200 + " END"))
    text = p.tokenizers[0].decode(ids)
    assert cut and len(ids) == 80 and "START" in text and "END" in text
    assert text.endswith("<|im_start|>assistant\n") and p.prompt_truncations == 1


# ---- save / load -------------------------------------------------------------------------------------------
def test_save_loads_with_plain_peft_and_load_round_trips(pol: AgentPolicies, mixed_samples: list[Sample],
                                                         tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    pol.save(tmp_path)
    with torch.no_grad():
        want, _ = pol.token_logprobs(mixed_samples)
    for i, s in enumerate(mixed_samples):
        base = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny-random"))
        plain = PeftModel.from_pretrained(base, str(tmp_path / f"agent{s.agent}"))
        n = len(s.completion_ids)
        torch.testing.assert_close(want[i, :n], plain_logprobs(plain, s), atol=ATOL, rtol=0)
    fresh = make_policies(seed=7)
    with torch.no_grad():
        assert not torch.allclose(fresh.token_logprobs(mixed_samples)[0], want)
        params = fresh.trainable_parameters()
        fresh.load(tmp_path)
        got, _ = fresh.token_logprobs(mixed_samples)
    torch.testing.assert_close(got, want)
    assert all(a is b for a, b in zip(params, fresh.trainable_parameters(), strict=True))  # optimizer keeps refs


# ---- full mode ---------------------------------------------------------------------------------------------
def test_full_mode_generates_scores_trains_and_saves(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    p = make_policies(mode="full")
    out = p.generate(REQUESTS, 2, greedy=True)
    assert [len(r) for r in out] == [2] * 4 and out[0][0].completion_ids == out[0][1].completion_ids
    samples = [row[0] for row in out]
    for s in samples:
        lp, _ = p.token_logprobs([s])
        n = len(s.completion_ids)
        torch.testing.assert_close(lp[0, :n], plain_logprobs(p.module.models[s.agent], s), atol=ATOL, rtol=0)
    only1 = _backward(p, samples, [0, 1, 1, 0])
    assert only1[0].abs().sum() == 0 and only1[1].abs().sum() > 0
    ref, _ = p.token_logprobs(samples, reference=True)
    assert not ref.requires_grad and ref.shape[0] == 4
    p.save(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "agent1"))
    s = samples[1]
    torch.testing.assert_close(plain_logprobs(loaded, s), plain_logprobs(p.module.models[1], s))


def test_lora_mode_refuses_per_agent_model_names() -> None:
    with pytest.raises(ValueError, match="agents.mode=full"):
        AgentPolicies(ModelConfig(name="tiny-random"), AgentsConfig(mode="lora", models=["a", "b"]), 2)


# ---- the embedded model ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_model_mixed_generation_and_logprobs() -> None:
    p = make_policies(name=EMBEDDED_MODEL, max_new_tokens=24)
    reqs = [(0, msgs("Write a Python function that returns the sum of two numbers.")), (1, msgs("Say hello."))]
    mixed = p.generate(reqs, 2, greedy=True)
    for r, req in enumerate(reqs):
        alone = p.generate([req], 1, greedy=True)[0][0]
        assert mixed[r][0].completion_ids == alone.completion_ids
    samples = [row[0] for row in mixed]
    with torch.no_grad():
        logps, _ = p.token_logprobs(samples)
    for i, s in enumerate(samples):
        n = len(s.completion_ids)
        torch.testing.assert_close(logps[i, :n], plain_logprobs(plain_peft(p, s.agent), s), atol=1e-3, rtol=0)


@pytest.mark.slow
def test_embedded_model_answers_and_stops_at_eos() -> None:
    pol = AgentPolicies(ModelConfig(name=EMBEDDED_MODEL, max_new_tokens=64), AgentsConfig(), 1)
    s = pol.generate([(0, msgs("What is 2 + 2? Answer with one number."))], 1, greedy=True)[0][0]
    assert s.finished and s.completion_ids[-1] == pol.tokenizers[0].convert_tokens_to_ids("<|im_end|>")
    assert "4" in s.text and "<|im_end|>" not in s.text


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in sorted(folder.rglob("*"))}


def test_saved_weights_name_their_base_carry_a_card_and_normal_file_modes(pol: AgentPolicies, tmp_path: Path) -> None:
    """Exported adapters named a folder of this machine's cache as their base, came with peft's empty card
    template and weights of mode 0600 (issue 36, item 10). The adapter names the base a user loads (the public
    id where there is one, else the folder the run used), README.md says what the weights are and how to load
    them, and every file has the modes the umask gives (0644 / 0755 under 022)."""
    import json

    old = os.umask(0o022)
    try:
        pol.save(tmp_path / "tiny")
    finally:
        os.umask(old)
    assert set(_modes(tmp_path / "tiny").values()) == {0o644, 0o755}
    assert _modes(tmp_path / "tiny")["agent0/adapter_model.safetensors"] == 0o644
    tiny = resolve_model_path("tiny-random")
    config = json.loads((tmp_path / "tiny" / "agent1" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == tiny  # built here: no public id, the folder it was built in
    card = (tmp_path / "tiny" / "README.md").read_text()
    assert "More Information Needed" not in card and "base_model:" not in card  # no hub id to point at
    assert f"`tiny-random` (no public id: built by comlrl, `comlrl.models.resolve_model_path(\"tiny-random\")`, " \
           f"here {tiny})" in card
    assert 'PeftModel.from_pretrained(base, "agent0")' in card and "2 agents" in card

    embedded = pol.model_names
    pol.model_names = [EMBEDDED_MODEL] * 2  # the default model's name; its weights need not be loaded to save
    try:
        pol.save(tmp_path / "embedded")
    finally:
        pol.model_names = embedded
    for agent in ("agent0", "agent1"):
        config = json.loads((tmp_path / "embedded" / agent / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    card = (tmp_path / "embedded" / "README.md").read_text()
    assert card.startswith("---\nbase_model: HuggingFaceTB/SmolLM2-135M-Instruct\nlibrary_name: peft\n")
    assert 'AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")' in card
    assert "Q4_1" in card  # the run's copy is the dequantised GGUF: say so
