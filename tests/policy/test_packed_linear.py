"""Generation's float32 CPU matmuls on oneDNN-packed weights (`comlrl.policy.packed_linear`): the same products as
torch's own linear up to the order of the sums, only inside generation and only without autograd, a changed
weight packed again, and the copies dropped when the rollout ends (the hf engine's `idle`). Also: generation in a
lane thread runs without autograd (grad mode is per thread); 2-3 rows run padded to the rows the weight was packed
for, with the same bits."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from policy_helpers import make_policies
from torch import nn

from comlrl.policy import FullAgentsModule
from comlrl.policy.packed_linear import PACK_MIN_ELEMENTS, PACK_ROWS, PackedLinears, packable, packing_available

needs_onednn = pytest.mark.skipif(not packing_available(), reason="this torch has no oneDNN packed linear")
BIG = (1024, 512)  # 2^19 elements: packed


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal up to float32 sums taken in another order (relative to the outputs' size)."""
    assert (a - b).abs().max().item() <= 1e-5 * b.abs().max().item() + 1e-6


def test_packable_takes_big_float32_cpu_linears_only() -> None:
    assert packable(nn.Linear(BIG[1], BIG[0]))
    assert packable(nn.Linear(1 << 9, 1 << 9))  # exactly PACK_MIN_ELEMENTS
    assert (1 << 9) * (1 << 9) == PACK_MIN_ELEMENTS
    assert not packable(nn.Linear(511, 512))  # one row short: it sits in cache, MKL is as fast
    assert not packable(nn.Linear(BIG[1], BIG[0]).to(torch.bfloat16))  # torch runs bfloat16 on oneDNN already

    class Sharded(nn.Linear):  # a subclass may quantize or shard its weight: its own forward stays
        pass

    assert not packable(Sharded(BIG[1], BIG[0]))
    assert not packable(nn.Conv1d(512, 1024, 1))
    hooked = nn.Linear(BIG[1], BIG[0])
    hooked.forward = lambda x: x  # what accelerate's offload hooks do: their forward on the instance stays
    assert not packable(hooked)


@needs_onednn
def test_serving_gives_torchs_products_and_leaves_the_class_forward_after() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(BIG[1], BIG[0]), nn.ReLU(), nn.Linear(BIG[0], BIG[1], bias=False),
                          nn.Linear(BIG[1], 8))  # the last one is small: torch's own path
    x = torch.randn(4, 3, BIG[1])
    inputs = (x[:, :1], x[:1, :1], x.reshape(12, BIG[1]))  # a decode step of 4 rows, of one row, a prefill's rows
    packs = PackedLinears(model)
    with torch.no_grad():
        expected = [model(rows) for rows in inputs]
        with packs.serving():
            assert "forward" in vars(model[0]) and "forward" not in vars(model[3])
            got = [model(rows) for rows in inputs]
    for g, e in zip(got, expected, strict=True):
        _close(g, e)
    assert packs.held() == 2
    assert all("forward" not in vars(layer) for layer in model)


@needs_onednn
def test_a_forward_with_autograd_on_takes_torchs_own_path_and_packs_nothing() -> None:
    layer = nn.Linear(BIG[1], BIG[0])
    x = torch.randn(2, BIG[1])
    packs = PackedLinears(layer)
    with packs.serving():
        y = layer(x)
    assert torch.equal(y, F.linear(x, layer.weight, layer.bias))  # the same kernel, bit for bit
    y.sum().backward()
    assert layer.weight.grad is not None and packs.held() == 0


@needs_onednn
def test_autocast_keeps_torchs_own_path() -> None:
    layer = nn.Linear(BIG[1], BIG[0])
    x = torch.randn(4, BIG[1])
    packs = PackedLinears(layer)
    with torch.no_grad(), packs.serving(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert y.dtype == torch.bfloat16 and packs.held() == 0


@needs_onednn
def test_a_weight_changed_in_place_is_packed_again() -> None:
    layer = nn.Linear(BIG[1], BIG[0])
    x = torch.randn(4, BIG[1])
    packs = PackedLinears(layer)
    with torch.no_grad(), packs.serving():
        before = layer(x)
        layer.weight.mul_(-1.0)  # an optimizer step: the same storage, a new version
        after = layer(x)
    _close(after, F.linear(x, layer.weight, layer.bias))
    assert (after - before).abs().max() > 1.0


@needs_onednn
def test_the_forwards_stay_while_any_thread_serves_and_release_drops_the_copies() -> None:
    layer = nn.Linear(BIG[1], BIG[0])
    packs = PackedLinears(layer)
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with packs.serving():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    with torch.no_grad(), packs.serving():
        layer(torch.randn(2, BIG[1]))
    assert "forward" in vars(layer)  # the other thread still serves
    leave.set()
    thread.join()
    assert "forward" not in vars(layer) and packs.held() == 1
    packs.release()
    assert packs.held() == 0


@needs_onednn
def test_agents_generate_on_packed_weights_and_release_them() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=1,
                      num_attention_heads=8, num_key_value_heads=8)
    model = LlamaForCausalLM(cfg).eval()
    agents = FullAgentsModule([model], lambda _device: [])
    ids = torch.randint(0, 1024, (2, 5))
    with torch.no_grad():
        expected = model(ids).logits
        with agents.generating([0]):
            got = model(ids).logits
    _close(got, expected)
    packs = agents._generation_packs[model]
    assert packs.held() == 8  # q, k, v, o (512 x 512: just packed), gate, up, down and the lm_head
    agents.release_packs()  # the rollout ended (the hf engine's idle): the update gets the memory
    assert packs.held() == 0


def test_generation_in_a_lane_thread_runs_without_autograd() -> None:
    """`AgentPolicies.generate` is no_grad, but the lanes of `side_by_side` are new threads, where grad mode is
    on again: the shared prefill of the G siblings built an autograd graph there."""
    before = torch.get_num_threads()
    pol = make_policies(mode="full", max_new_tokens=3)
    modes: list[bool] = []
    for agent in range(2):
        pol.module.generation_model(agent).get_decoder().register_forward_pre_hook(
            lambda *_: modes.append(torch.is_grad_enabled()))
    torch.set_num_threads(2)  # two agents, two threads: the calls run in lanes
    try:
        pol.generate([(0, [{"role": "user", "content": "Write add(a, b)."}]),
                      (1, [{"role": "user", "content": "Say hi."}])], 2)
    finally:
        torch.set_num_threads(before)
    assert len(modes) >= 4 and not any(modes)  # each agent's prefill and decode steps


@needs_onednn
@pytest.mark.parametrize("rows", [2, 3])
def test_two_or_three_rows_run_padded_with_the_same_bits(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN's kernel for a weight packed for PACK_ROWS rows is slower at 2-3 rows (a decode step of SmolLM2-135M
    at 2 rows: 70-74 ms against 56-58 at 4): such inputs run padded with zero rows, and the real rows' products
    are the bits the kernel gives them unpadded."""
    torch.manual_seed(0)
    layer = nn.Linear(BIG[1], BIG[0])
    x = torch.randn(rows, 1, BIG[1])  # a decode step: [rows, 1 token, features]
    packs = PackedLinears(layer)
    kernel = torch.ops.mkldnn._linear_pointwise
    shapes: list[tuple[int, ...]] = []

    def recording(inputs: torch.Tensor, *rest: object) -> torch.Tensor:
        shapes.append(tuple(inputs.shape))
        return kernel(inputs, *rest)

    with torch.no_grad(), packs.serving():
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", recording)
        got = layer(x)
        monkeypatch.undo()
        alone = kernel(x.reshape(rows, BIG[1]), packs._packs[layer][1], layer.bias, "none", [], "")
    assert shapes == [(PACK_ROWS, BIG[1])]
    assert got.shape == (rows, 1, BIG[0])
    assert torch.equal(got.reshape(rows, BIG[0]), alone)
    _close(got, F.linear(x, layer.weight, layer.bias))
