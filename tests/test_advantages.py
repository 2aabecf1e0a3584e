"""Hand-computed checks of the SPADE advantages (spec section 6)."""

from __future__ import annotations

import pytest
import torch

from spade.advantages import designer_advantages, designer_upweight, grpo_advantages


def test_grpo_one_group():
    # mean 0.5, population std 0.5 -> (1 - 0.5) / 0.5 = 1, (0 - 0.5) / 0.5 = -1
    a = grpo_advantages([1.0, 0.0, 1.0, 0.0], [0, 0, 0, 0])
    assert a.dtype == torch.float32
    assert a.tolist() == pytest.approx([1, -1, 1, -1])


def test_grpo_two_groups_and_population_std():
    # group "a": [1, 0, 0] mean 1/3, population var (4/9 + 1/9 + 1/9)/3 = 2/9, std = sqrt(2)/3
    #   -> (2/3) / (sqrt(2)/3) = sqrt(2), (-1/3) / (sqrt(2)/3) = -1/sqrt(2)
    # group "b": [0.2, 0.6] mean 0.4, std 0.2 -> -1, +1
    a = grpo_advantages(torch.tensor([1.0, 0.2, 0.0, 0.6, 0.0]), ["a", "b", "a", "b", "a"])
    s = 2 ** 0.5
    assert a.tolist() == pytest.approx([s, -1, -1 / s, 1, -1 / s], rel=1e-5)


def test_grpo_singleton_and_constant_groups_are_zero():
    a = grpo_advantages([0.7, 1.0, 1.0], [5, 6, 6])
    assert a.tolist() == [0.0, 0.0, 0.0]


def test_grpo_invalid_inputs():
    with pytest.raises(ValueError, match="group_ids has 2 entries but the values have 3"):
        grpo_advantages([1.0, 0.0, 1.0], [0, 0])
    with pytest.raises(ValueError, match=r"returns must be 1-D"):
        grpo_advantages([[1.0, 0.0]], [0])
    with pytest.raises(ValueError, match="returns must contain only finite"):
        grpo_advantages([1.0, float("nan")], [0, 0])


def test_designer_advantages_per_skill():
    # math: [0.8, 0.2] mean 0.5 -> 0.3, -0.3; logic: [0.6, 0.0, 0.3] mean 0.3 -> 0.3, -0.3, 0 (no std)
    a = designer_advantages([0.8, 0.6, 0.2, 0.0, 0.3], ["math", "logic", "math", "logic", "logic"])
    assert a.dtype == torch.float32
    assert a.tolist() == pytest.approx([0.3, 0.3, -0.3, -0.3, 0.0], abs=1e-6)


def test_designer_advantages_invalid():
    with pytest.raises(ValueError, match="skills has 1 entries"):
        designer_advantages([0.1, 0.2], ["a"])


def test_designer_upweight():
    assert designer_upweight(384, 24, 2) == pytest.approx(32.0)  # 384 / 24 * 2 = 32 < 50
    assert designer_upweight(384, 24, 4) == 50.0  # 16 * 4 = 64 -> capped at 50
    assert designer_upweight(384, 24, 4, cap=100.0) == pytest.approx(64.0)
    with pytest.raises(ValueError, match="n_envs must be a finite number > 0"):
        designer_upweight(384, 0, 4)
    with pytest.raises(ValueError, match="cap must be"):
        designer_upweight(384, 24, 4, cap=-1)
