"""Advantages for the two SPADE roles and the designer up-weighting factor (spec section 6).

Pure functions: inputs are 1-D torch tensors or Python lists, outputs float32 tensors. Group and
skill labels may be any hashable values (ints, strings); a label tensor is read element by element.

Group statistics are computed in float64, as the reference code does (numpy): in float32 a group of equal
returns that binary cannot hold exactly (16 x 0.1, 6 x 0.9) gets a rounding std of ~1e-8, the size of the
epsilon, and so a spurious advantage of order 1. Only the result is cast to float32.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

import torch

STD_EPS = 1e-8  # spec 6: (r - mean) / (std + 1e-8)
CONSTANT_RTOL = 1e-12  # a group whose spread max - min is below this (relative to max(1, max|r|)) is constant


def _values(name: str, x) -> torch.Tensor:
    """[N] float64 tensor from a list or tensor; rejects other ranks and non-finite entries."""
    t = torch.as_tensor(x, dtype=torch.float64).detach()
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D [N], got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must contain only finite values")
    return t


def _group_index(name: str, labels, n: int) -> tuple[torch.Tensor, int]:
    """[N] long index of each label's group (in order of first appearance) and the number of groups."""
    items: Sequence[Hashable] = labels.tolist() if isinstance(labels, torch.Tensor) else list(labels)
    if len(items) != n:
        raise ValueError(f"{name} has {len(items)} entries but the values have {n}")
    first_seen: dict[Hashable, int] = {}
    index = [first_seen.setdefault(label, len(first_seen)) for label in items]
    return torch.tensor(index, dtype=torch.long), len(first_seen)


def _group_mean(values: torch.Tensor, index: torch.Tensor, n_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-element group mean [N] and group size [N], in the dtype of ``values``."""
    sums = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, index, values)
    counts = torch.zeros(n_groups, dtype=values.dtype).index_add_(0, index, torch.ones_like(values))
    return (sums / counts)[index], counts[index]


def _group_is_constant(values: torch.Tensor, index: torch.Tensor, n_groups: int) -> torch.Tensor:
    """[N] bool: the element's group has spread max - min <= CONSTANT_RTOL * max(1, max |r| of the group)."""
    low = torch.full((n_groups,), math.inf, dtype=values.dtype).scatter_reduce(0, index, values, "amin")
    high = torch.full((n_groups,), -math.inf, dtype=values.dtype).scatter_reduce(0, index, values, "amax")
    scale = torch.maximum(high.abs(), low.abs()).clamp(min=1.0)
    return ((high - low) <= CONSTANT_RTOL * scale)[index]


def grpo_advantages(returns, group_ids) -> torch.Tensor:
    """Spec 6 RA advantage: A_i = (R_i - mean_g) / (std_g + 1e-8) within each group g (one environment's
    rollouts of this step). std is the *population* std (divide by the group size, unbiased=False),
    so a group of one, or a group of equal returns, gets advantage 0.

    Mean and variance are taken in float64 (reference code: numpy float64), and a group whose
    returns are equal up to CONSTANT_RTOL gets exactly 0, so float rounding never fakes a signal.

    returns [N], group_ids [N] -> [N] float32.
    """
    r = _values("returns", returns)
    index, n_groups = _group_index("group_ids", group_ids, len(r))
    if len(r) == 0:
        return r.to(torch.float32)
    mean, _ = _group_mean(r, index, n_groups)
    var, _ = _group_mean((r - mean) ** 2, index, n_groups)
    advantages = (r - mean) / (var.sqrt() + STD_EPS)
    advantages = torch.where(_group_is_constant(r, index, n_groups), torch.zeros_like(advantages), advantages)
    return advantages.to(torch.float32)


def designer_advantages(rewards, skills) -> torch.Tensor:
    """Spec 6 ED advantage: A_e = r_D(e) - mean of r_D over the environments of the same skill (no std).
    The mean is taken in float64; only the result is float32.

    rewards [M], skills [M] -> [M] float32.
    """
    r = _values("rewards", rewards)
    index, n_groups = _group_index("skills", skills, len(r))
    if len(r) == 0:
        return r.to(torch.float32)
    mean, _ = _group_mean(r, index, n_groups)
    return (r - mean).to(torch.float32)


def designer_upweight(n_agent_samples: float, n_envs: float, k: float, cap: float = 50.0) -> float:
    """Spec 6: loss weight of each (rare) ED sample, min(N_RA_samples / N_envs * k, cap); official cap 50."""
    for name, v in (("n_agent_samples", n_agent_samples), ("n_envs", n_envs), ("k", k), ("cap", cap)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(min(n_agent_samples / n_envs * k, cap))
