"""Token-level policy-gradient pieces of the SPADE GRPO update (spec section 6, paper Eq. 2).

Shapes: B sequences, T token positions, V vocabulary. All functions are pure; only ``grpo_loss``
returns a tensor meant for ``backward``.
"""

from __future__ import annotations

import math

import torch


def _check_shape(name: str, t, shape: tuple) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    return t


def _check_number(name: str, x, low: float, high: float = math.inf) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not low <= x <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {x!r}")
    return float(x)


def token_logprobs(logits: torch.Tensor, target_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """log pi(y_t | y_<t) of each target token under the sampling distribution softmax(logits / T).

    logits [B, T, V] (any float dtype; computed in float32), target_ids [B, T] (long) -> [B, T] float32.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        raise ValueError(f"logits must be a [B, T, V] tensor, got {getattr(logits, 'shape', type(logits))}")
    _check_shape("target_ids", target_ids, logits.shape[:2])
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)  # [B, T, V]
    return logp.gather(-1, target_ids.long().unsqueeze(-1)).squeeze(-1)  # [B, T]


def chunked_token_logprobs(hidden: torch.Tensor, head_weight: torch.Tensor, target_ids: torch.Tensor,
                           temperature: float, chunk: int = 512) -> torch.Tensor:
    """``token_logprobs(hidden @ head_weight.T, target_ids, temperature)`` without the whole [B, T, V] logits.

    hidden [B, T, D] (the decoder's last hidden states), head_weight [V, D] (the output projection), target_ids
    [B, T] -> [B, T] float32. The positions go through the head ``chunk`` at a time, each under activation
    checkpointing: the forward keeps only [B, T] log-probs and the backward recomputes one chunk's logits at a time,
    so the peak memory of the head is [B, chunk, V] instead of [B, T, V] (the vocabulary is the largest dimension of
    a small model's training step). Same numbers as the plain version up to float rounding.
    """
    from torch.utils.checkpoint import checkpoint

    _check_shape("target_ids", target_ids, hidden.shape[:2])
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")

    def piece(h, t):
        return token_logprobs(torch.nn.functional.linear(h, head_weight), t, temperature)

    parts = [checkpoint(piece, hidden[:, i:i + chunk], target_ids[:, i:i + chunk], use_reentrant=False)
             if torch.is_grad_enabled() else piece(hidden[:, i:i + chunk], target_ids[:, i:i + chunk])
             for i in range(0, hidden.shape[1], chunk)]
    return torch.cat(parts, dim=1)


def tis_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, cap: float = 2.0) -> torch.Tensor:
    """Spec 6 truncated importance sampling: w_t = min(pi_old / pi_rollout, C), detached; C = 2.0 (ours).

    old_logprobs [B, T], rollout_logprobs [B, T] -> [B, T].
    """
    _check_shape("rollout_logprobs", rollout_logprobs, old_logprobs.shape)
    cap = _check_number("cap", cap, 0.0)
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap!r}")
    return torch.exp(old_logprobs - rollout_logprobs).clamp(max=cap).detach()


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Spec 6 KL penalty, k3 estimator of KL(pi || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi.

    logprobs [B, T], ref_logprobs [B, T] -> [B, T] (>= 0).
    """
    _check_shape("ref_logprobs", ref_logprobs, logprobs.shape)
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1.0


LOSS_AGGREGATIONS = ("seq_mean_token_mean", "token_mean")


def grpo_loss(logprobs, old_logprobs, advantages, loss_mask, eps_low: float = 0.2, eps_high: float = 0.28,
              kl_coef: float = 0.0, ref_logprobs=None, tis=None, sample_weights=None,
              aggregation: str = "token_mean"):
    """Paper Eq. 2 / spec 6: token-level clipped policy gradient with asymmetric clipping.

    Per token: ratio = exp(lp - old); pg = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A),
    times the TIS weight (per token) and the sample weight (per sequence; designer up-weighting);
    plus kl_coef * k3(lp, ref) when kl_coef > 0 (the KL term is not reweighted). ``aggregation``:
    ``token_mean`` (the paper's wording): sum over the batch's masked tokens / their number (0 tokens -> loss 0);
    ``seq_mean_token_mean`` (the reference code): each sample's mean over its masked tokens, summed over the
    samples and divided by B, so a long sample weighs as much as a short one (a sample without tokens adds 0).

    Shapes: logprobs, old_logprobs, loss_mask, ref_logprobs, tis [B, T]; advantages, sample_weights [B].
    Returns (scalar loss, stats) with stats clip_frac, ratio_mean, kl_mean (floats) and num_tokens (int).
    """
    if not isinstance(logprobs, torch.Tensor) or logprobs.dim() != 2:
        raise ValueError(f"logprobs must be a [B, T] tensor, got {getattr(logprobs, 'shape', type(logprobs))}")
    B, T = logprobs.shape
    _check_shape("old_logprobs", old_logprobs, (B, T))
    _check_shape("advantages", advantages, (B,))
    _check_shape("loss_mask", loss_mask, (B, T))
    eps_low = _check_number("eps_low", eps_low, 0.0, 1.0)
    eps_high = _check_number("eps_high", eps_high, 0.0)
    kl_coef = _check_number("kl_coef", kl_coef, 0.0)
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("ref_logprobs is required when kl_coef > 0")
    if aggregation not in LOSS_AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {list(LOSS_AGGREGATIONS)}, got {aggregation!r}")
    mask = loss_mask.bool()  # [B, T]
    zero = torch.zeros((), dtype=logprobs.dtype)
    # Zero masked positions first so padding values (even -inf/NaN) cannot leak NaN into loss or grad.
    lp = torch.where(mask, logprobs, zero)
    old = torch.where(mask, old_logprobs.detach(), zero)
    adv = advantages.detach().to(lp.dtype).unsqueeze(1)  # [B, 1]
    ratio = torch.exp(lp - old)  # [B, T]
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)  # [B, T]
    if tis is not None:
        per_token = per_token * torch.where(mask, _check_shape("tis", tis, (B, T)).detach(), zero)
    if sample_weights is not None:
        per_token = per_token * _check_shape("sample_weights", sample_weights, (B,)).detach().unsqueeze(1)
    kl = None
    if ref_logprobs is not None:
        kl = kl_k3(lp, torch.where(mask, _check_shape("ref_logprobs", ref_logprobs, (B, T)).detach(), zero))
        if kl_coef > 0:
            per_token = per_token + kl_coef * kl
    n = int(mask.sum())
    denom = max(n, 1)
    masked = torch.where(mask, per_token, zero)  # [B, T]
    if aggregation == "token_mean":
        loss = masked.sum() / denom
    else:
        loss = (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum() / max(B, 1)

    def masked_mean(x: torch.Tensor) -> float:
        return float(torch.where(mask, x.detach().to(lp.dtype), zero).sum() / denom)

    stats = {
        "clip_frac": masked_mean((clipped < unclipped).float()),  # tokens where the clipped branch is active
        "ratio_mean": masked_mean(ratio),
        "kl_mean": masked_mean(kl) if kl is not None else 0.0,
        "num_tokens": n,
    }
    return loss, stats
