"""Loss masking, aggregation and micro-batch equivalence, on hand-made tensors."""

from __future__ import annotations

import math

import pytest
import torch

from comlrl.learn.loss import aggregate, completion_mask, per_token_loss, step_normaliser


def test_mask_excludes_padding_after_eos():
    ids = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    mask = completion_mask(ids, torch.tensor([3, 2]))
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]


def test_on_policy_gradient_is_minus_advantage_times_grad_logp():
    logps = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], requires_grad=True)
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss = aggregate(per_token_loss(logps, adv), mask, "token_mean", 3.0)
    assert loss.item() == pytest.approx((-2 - 2 + 1) / 3)  # ratio 1 everywhere
    loss.backward()
    assert torch.allclose(logps.grad, torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]]))


def test_padding_never_contributes_even_when_huge():
    logps = torch.tensor([[-1.0, 1e6]], requires_grad=True)
    loss = aggregate(per_token_loss(logps, torch.tensor([1.0])), torch.tensor([[1.0, 0.0]]), "token_mean", 1.0)
    loss.backward()
    assert logps.grad[0, 1].item() == 0.0 and torch.isfinite(loss)


def test_seq_mean_weights_sequences_equally():
    tok = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    assert aggregate(tok, mask, "seq_mean", 2.0).item() == pytest.approx((1 + 4) / 2)
    assert aggregate(tok, mask, "token_mean", 5.0).item() == pytest.approx(8 / 5)
    assert aggregate(tok, mask, "seq_sum", 2.0).item() == pytest.approx((4 + 4) / 2)  # long sequences weigh more
    assert step_normaliser([4, 1], "seq_sum") == 2.0
    with pytest.raises(ValueError):
        aggregate(tok, mask, "sum", 1.0)


@pytest.mark.parametrize("how", ["token_mean", "seq_mean", "seq_sum"])
def test_micro_batches_sum_to_full_batch_gradient(how):
    torch.manual_seed(0)
    logps = torch.randn(6, 5).requires_grad_()
    adv = torch.randn(6)
    lengths = [5, 3, 1, 4, 2, 5]
    mask = completion_mask(torch.zeros(6, 5), torch.tensor(lengths))
    norm = step_normaliser(lengths, how)
    full = aggregate(per_token_loss(logps, adv), mask, how, norm)
    (g_full,) = torch.autograd.grad(full, logps)
    total = sum(aggregate(per_token_loss(logps[i:i + 2], adv[i:i + 2]), mask[i:i + 2], how, norm)
                for i in range(0, 6, 2))
    (g_micro,) = torch.autograd.grad(total, logps)
    assert torch.allclose(g_full, g_micro) and torch.allclose(full, total)


def test_clip_stops_gradient_beyond_the_trust_region():
    old = torch.tensor([[0.0, 0.0]])
    logps = torch.tensor([[0.5, -0.5]], requires_grad=True)  # ratios e^0.5 = 1.65 and e^-0.5 = 0.61
    loss = per_token_loss(logps, torch.tensor([1.0]), old_logps=old, clip_eps=0.2).sum()
    loss.backward()
    # positive advantage: ratio above 1+eps is clipped (no gradient); below 1-eps keeps its gradient
    assert logps.grad[0, 0].item() == 0.0
    assert logps.grad[0, 1].item() == pytest.approx(-torch.exp(torch.tensor(-0.5)).item())


def test_kl_is_zero_at_reference_and_positive_elsewhere():
    ref = torch.tensor([[-1.0, -2.0]])
    same = per_token_loss(ref.clone(), torch.tensor([0.0]), ref_logps=ref, kl_coef=0.5)
    assert torch.allclose(same, torch.zeros_like(same))
    other = per_token_loss(torch.tensor([[-0.2, -3.0]]), torch.tensor([0.0]), ref_logps=ref, kl_coef=0.5)
    assert (other > 0).all()
    with pytest.raises(ValueError):
        per_token_loss(ref, torch.tensor([0.0]), kl_coef=0.1)


# ---- engine / trainer mismatch: truncated importance sampling -------------------------------------------
def test_truncated_is_weights_are_the_capped_ratio_and_one_on_padding() -> None:
    from comlrl.learn.loss import truncated_is_weights

    train = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, 0.0]], requires_grad=True)
    engine = torch.tensor([[-1.5, -1.0, -0.5], [-0.1, -4.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    w = truncated_is_weights(train, engine, mask, cap=2.0)
    expected = torch.tensor([[math.exp(0.5), math.exp(-1.0), 1.0], [math.exp(-2.9), 2.0, 1.0]])
    torch.testing.assert_close(w, expected)
    assert not w.requires_grad  # a weight, not a path for gradients


def test_is_weights_scale_the_policy_gradient_term_only() -> None:
    from comlrl.learn.loss import per_token_loss

    logps = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.5]])
    w = torch.tensor([[0.5, 2.0]])
    plain = per_token_loss(logps, torch.tensor([1.0]), ref_logps=ref, kl_coef=0.1)
    weighted = per_token_loss(logps, torch.tensor([1.0]), ref_logps=ref, kl_coef=0.1, is_weights=w)
    kl = 0.1 * (torch.exp(ref - logps) - (ref - logps) - 1.0)
    torch.testing.assert_close(weighted, (plain - kl) * w + kl)


def test_logprob_gap_sums_abs_delta_and_k3_kl_over_unmasked_tokens() -> None:
    from comlrl.learn.loss import logprob_gap

    train = torch.tensor([[-1.0, -2.0, -7.0]])
    engine = torch.tensor([[-1.1, -1.8, 0.0]])
    gap = logprob_gap(train, engine, torch.tensor([[1.0, 1.0, 0.0]]))
    assert gap["tokens"] == 2.0
    assert gap["abs_gap_sum"] == pytest.approx(0.3)
    k3 = sum(math.exp(-d) + d - 1.0 for d in (-0.1, 0.2))
    assert gap["kl_sum"] == pytest.approx(k3, rel=1e-5)
    same = logprob_gap(train, train, torch.ones_like(train))
    assert same["abs_gap_sum"] == 0.0 and same["kl_sum"] == 0.0


# ---- DPO (comlrl.learn.loss.dpo_loss): hand-computed cases -------------------------------------------------------

def test_dpo_loss_is_minus_logsigmoid_of_beta_times_the_log_ratio_difference():
    import math

    import torch

    from comlrl.learn.loss import dpo_loss

    # policy and reference alike: margin 0, loss log 2
    loss, margin = dpo_loss(torch.tensor([-3.0]), torch.tensor([-5.0]), torch.tensor([-3.0]), torch.tensor([-5.0]), 0.1)
    assert float(margin[0]) == 0.0 and float(loss[0]) == pytest.approx(math.log(2.0))
    # chosen up by 2 nats against the reference, rejected down by 1: margin 0.1 * (2 - (-1)) = 0.3
    loss, margin = dpo_loss(torch.tensor([-1.0]), torch.tensor([-6.0]), torch.tensor([-3.0]), torch.tensor([-5.0]), 0.1)
    assert float(margin[0]) == pytest.approx(0.3)
    assert float(loss[0]) == pytest.approx(-math.log(1.0 / (1.0 + math.exp(-0.3))))  # 0.554355
    assert float(loss[0]) == pytest.approx(0.554355, abs=1e-6)
    # the reference library's reference-free case: beta 0.1, log-ratio difference 1 -> 0.644397
    loss, _ = dpo_loss(torch.tensor([0.0]), torch.tensor([-1.0]), torch.tensor([0.0]), torch.tensor([0.0]), 0.1)
    assert float(loss[0]) == pytest.approx(0.644397, abs=1e-6)


def test_dpo_gradient_raises_the_chosen_and_lowers_the_rejected():
    import torch

    from comlrl.learn.loss import dpo_loss

    c = torch.tensor([-2.0], requires_grad=True)
    r = torch.tensor([-2.0], requires_grad=True)
    loss, _ = dpo_loss(c, r, torch.tensor([-2.0]), torch.tensor([-2.0]), 0.5)
    loss.sum().backward()
    # d/dc = -beta * sigmoid(-margin) = -0.5 * 0.5 at margin 0; d/dr = +0.25
    assert float(c.grad[0]) == pytest.approx(-0.25) and float(r.grad[0]) == pytest.approx(0.25)


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    import torch

    from comlrl.learn.loss import k3_kl

    lp = torch.tensor([[-1.0, -2.0, -9.0]])
    ref = torch.tensor([[-1.5, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    kl = k3_kl(lp, ref, mask)
    # d = ref - lp = [-0.5, 1.0]: exp(d) - d - 1 = [0.106531, 0.718282]; the masked token counts 0
    assert kl[0].tolist() == pytest.approx([0.106531, 0.718282, 0.0], abs=1e-6)
    assert float(k3_kl(lp, lp, mask).abs().sum()) == 0.0
