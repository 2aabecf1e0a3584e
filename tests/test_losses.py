"""Hand-computed checks of the SPADE GRPO loss pieces (spec section 6, paper Eq. 2)."""

from __future__ import annotations

import math

import pytest
import torch

from spade.core.losses import grpo_loss, kl_k3, tis_weights, token_logprobs

LN2 = math.log(2.0)


def one_token(ratio: float, adv: float):
    """A [1, 1] batch whose single token has the given ratio pi/pi_old; lp is a leaf for autograd."""
    lp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    return lp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1)


def test_token_logprobs_with_temperature():
    # logits [0, 2 ln2] / T=2 -> [0, ln2] -> softmax [1/3, 2/3]
    logits = torch.tensor([[[0.0, 2 * LN2], [0.0, 2 * LN2]]], dtype=torch.float64)
    out = token_logprobs(logits, torch.tensor([[1, 0]]), temperature=2.0)
    assert out.dtype == torch.float32 and out.shape == (1, 2)
    assert out.tolist()[0] == pytest.approx([math.log(2 / 3), math.log(1 / 3)])


def test_token_logprobs_invalid():
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_logprobs(torch.zeros(1, 1, 3), torch.zeros(1, 1, dtype=torch.long), 0.0)
    with pytest.raises(ValueError, match="target_ids must have shape"):
        token_logprobs(torch.zeros(1, 2, 3), torch.zeros(1, 1, dtype=torch.long), 1.0)


def test_tis_weights_capped_and_detached():
    old = torch.tensor([[math.log(3.0), math.log(1.5), 0.0]], requires_grad=True)
    w = tis_weights(old, torch.zeros(1, 3))
    # exp(ln 3) = 3 -> capped at 2; exp(ln 1.5) = 1.5; exp(0) = 1
    assert w.tolist()[0] == pytest.approx([2.0, 1.5, 1.0])
    assert not w.requires_grad
    with pytest.raises(ValueError, match="cap must be > 0"):
        tis_weights(old, torch.zeros(1, 3), cap=0.0)


def test_kl_k3_value():
    # d = ln 0.5 - 0: exp(d) - d - 1 = 0.5 + ln2 - 1 = 0.19314718
    k = kl_k3(torch.zeros(1, 2), torch.tensor([[math.log(0.5), 0.0]]))
    assert k.tolist()[0] == pytest.approx([LN2 - 0.5, 0.0])
    with pytest.raises(ValueError, match="ref_logprobs must have shape"):
        kl_k3(torch.zeros(1, 2), torch.zeros(2, 1))


@pytest.mark.parametrize("ratio,adv,loss,grad,clipped", [
    (1.1, 1.0, -1.1, -1.1, 0.0),  # inside the range: -ratio*A, d/dlp = -ratio*A
    (1.25, 1.0, -1.25, -1.25, 0.0),  # inside 1 + eps_high = 1.28 (would be clipped at a symmetric 1.2)
    (1.5, 1.0, -1.28, 0.0, 1.0),  # A > 0 above 1.28: -min(1.5, 1.28) = -1.28, no gradient
    (0.5, 1.0, -0.5, -0.5, 0.0),  # A > 0 below 0.8: -min(0.5, 0.8) = -0.5, unclipped branch
    (0.5, -1.0, 0.8, 0.0, 1.0),  # A < 0 below 0.8: -min(-0.5, -0.8) = 0.8, no gradient
    (1.5, -1.0, 1.5, 1.5, 0.0),  # A < 0 above 1.28: -min(-1.5, -1.28) = 1.5, unclipped, d/dlp = 1.5
])
def test_grpo_loss_clip_branches_and_gradients(ratio, adv, loss, grad, clipped):
    lp, old, a, mask = one_token(ratio, adv)
    out, stats = grpo_loss(lp, old, a, mask)
    out.backward()
    assert out.item() == pytest.approx(loss, rel=1e-6)
    assert lp.grad.item() == pytest.approx(grad, rel=1e-6, abs=1e-9)
    assert stats["clip_frac"] == clipped
    assert stats["ratio_mean"] == pytest.approx(ratio, rel=1e-6)
    assert stats["num_tokens"] == 1


def test_grpo_loss_mask_and_token_mean():
    # row 0 tokens 0,1 and row 1 token 0 count (3 tokens); masked slots hold -inf / NaN padding.
    lp = torch.tensor([[math.log(1.1), 0.0, -math.inf], [0.0, math.nan, -math.inf]], requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, -math.inf]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    out, stats = grpo_loss(lp, old, torch.tensor([1.0, -2.0]), mask)
    out.backward()
    # per token: -1.1, -1, +2 -> sum -0.1 over 3 tokens
    assert out.item() == pytest.approx(-0.1 / 3, rel=1e-5)
    assert stats["num_tokens"] == 3
    assert stats["ratio_mean"] == pytest.approx(3.1 / 3, rel=1e-6)
    # d/dlp = -ratio * A / 3 on unmasked tokens, exactly 0 (no NaN) on masked ones
    assert lp.grad.flatten().tolist() == pytest.approx([-1.1 / 3, -1 / 3, 0.0, 2 / 3, 0.0, 0.0], rel=1e-5)


def test_grpo_loss_sequence_mean_weighs_each_sample_once():
    # the reference's aggregation on uneven lengths: row 0 has 2 tokens (-1.1, -1), row 1 one token (+2), row 2 none
    lp = torch.tensor([[math.log(1.1), 0.0, -math.inf], [0.0, math.nan, -math.inf], [0.0, 0.0, 0.0]],
                      requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    out, stats = grpo_loss(lp, old, torch.tensor([1.0, -2.0, 5.0]), mask, aggregation="seq_mean_token_mean")
    out.backward()
    # sample means -1.05 and +2 (the empty row adds 0), summed, over 3 samples: 0.95 / 3; token mean: -0.1 / 3
    assert out.item() == pytest.approx(0.95 / 3, rel=1e-5)
    assert stats["num_tokens"] == 3 and stats["ratio_mean"] == pytest.approx(3.1 / 3, rel=1e-6)  # stats: token means
    # d/dlp = -ratio * A / (tokens of the row) / 3 samples
    assert lp.grad.flatten().tolist() == pytest.approx([-1.1 / 6, -1 / 6, 0.0, 2 / 3, 0.0, 0.0, 0.0, 0.0, 0.0],
                                                       rel=1e-5)
    # equal lengths: the two aggregations agree
    even = torch.ones(2, 3)
    a, _ = grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([1.0, -3.0]), even)
    b, _ = grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([1.0, -3.0]), even,
                     aggregation="seq_mean_token_mean")
    assert a.item() == pytest.approx(b.item())
    with pytest.raises(ValueError, match="aggregation must be one of"):
        grpo_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1), aggregation="sum")


def test_the_config_offers_the_aggregations_the_loss_implements():
    import dataclasses

    from spade.config import TrainConfig
    from spade.core.losses import LOSS_AGGREGATIONS

    (field,) = [f for f in dataclasses.fields(TrainConfig) if f.name == "loss_aggregation"]
    assert field.metadata["choices"] == LOSS_AGGREGATIONS and field.default == "seq_mean_token_mean"  # reference


def test_grpo_loss_empty_mask_gives_zero():
    lp = torch.zeros(2, 3, requires_grad=True)
    out, stats = grpo_loss(lp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3))
    out.backward()
    assert out.item() == 0.0 and not torch.isnan(out)
    assert stats["num_tokens"] == 0 and stats["ratio_mean"] == 0.0
    assert lp.grad.abs().sum().item() == 0.0


def test_grpo_loss_tis_and_sample_weights():
    lp = torch.zeros(2, 1, requires_grad=True)  # ratio 1, A = 1 -> pg = -1 per token
    tis = torch.tensor([[0.5], [2.0]])
    out, _ = grpo_loss(lp, torch.zeros(2, 1), torch.ones(2), torch.ones(2, 1),
                       tis=tis, sample_weights=torch.tensor([1.0, 3.0]))
    # (-1 * 0.5 * 1 + -1 * 2.0 * 3) / 2 = -6.5 / 2 = -3.25
    assert out.item() == pytest.approx(-3.25)
    out2, _ = grpo_loss(lp, torch.zeros(2, 1), torch.ones(2), torch.ones(2, 1), sample_weights=torch.tensor([1.0, 3.0]))
    assert out2.item() == pytest.approx(-2.0)  # (-1 - 3) / 2


def test_grpo_loss_kl_term():
    lp = torch.zeros(1, 1, requires_grad=True)
    ref = torch.tensor([[math.log(0.5)]])
    # A = 0 -> pg 0; loss = 0.1 * k3 = 0.1 * (ln2 - 0.5)
    out, stats = grpo_loss(lp, torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1), kl_coef=0.1, ref_logprobs=ref)
    assert out.item() == pytest.approx(0.1 * (LN2 - 0.5), rel=1e-6)
    assert stats["kl_mean"] == pytest.approx(LN2 - 0.5, rel=1e-6)
    out.backward()
    # d/dlp k3 = -exp(ref - lp) + 1 = 1 - 0.5 -> 0.1 * 0.5
    assert lp.grad.item() == pytest.approx(0.05, rel=1e-6)


def test_grpo_loss_invalid_inputs():
    lp, old, a, mask = one_token(1.0, 1.0)
    with pytest.raises(ValueError, match="ref_logprobs is required when kl_coef > 0"):
        grpo_loss(lp, old, a, mask, kl_coef=0.01)
    with pytest.raises(ValueError, match="advantages must have shape"):
        grpo_loss(lp, old, torch.ones(2), mask)
    with pytest.raises(ValueError, match="eps_low must be a number"):
        grpo_loss(lp, old, a, mask, eps_low=-0.1)
    with pytest.raises(ValueError, match="tis must have shape"):
        grpo_loss(lp, old, a, mask, tis=torch.ones(2, 2))
    with pytest.raises(ValueError, match="logprobs must be a"):
        grpo_loss(torch.zeros(3), old, a, mask)


def test_chunked_token_logprobs_equal_the_plain_ones_with_their_gradients():
    """The head in chunks of 3 positions (under checkpointing) gives the log-probs and the gradients of the whole
    [B, T, V] logits at once."""
    from spade.core.losses import chunked_token_logprobs

    torch.manual_seed(0)
    hidden = torch.randn(2, 7, 5, requires_grad=True)
    weight = torch.randn(11, 5, requires_grad=True)
    targets = torch.randint(0, 11, (2, 7))
    plain = token_logprobs(hidden @ weight.T, targets, 0.7)
    chunked = chunked_token_logprobs(hidden, weight, targets, 0.7, chunk=3)
    assert torch.allclose(plain, chunked, atol=1e-6)
    scale = torch.randn(2, 7)
    grads_plain = torch.autograd.grad((plain * scale).sum(), (hidden, weight))
    grads_chunked = torch.autograd.grad((chunked * scale).sum(), (hidden, weight))
    for a, b in zip(grads_plain, grads_chunked):
        assert torch.allclose(a, b, atol=1e-5)
    with torch.no_grad():  # no checkpointing without autograd
        assert torch.allclose(chunked_token_logprobs(hidden, weight, targets, 0.7, chunk=4), plain, atol=1e-6)
    with pytest.raises(ValueError, match="chunk"):
        chunked_token_logprobs(hidden, weight, targets, 0.7, chunk=0)
