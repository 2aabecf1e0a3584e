"""Hand-computed checks of the SPADE advantages (spec section 6)."""

from __future__ import annotations

import pytest
import torch

from spade.core.advantages import designer_advantages, designer_upweight, grpo_advantages


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


# Values that binary floating point cannot hold exactly; in float32 their group std rounds to ~1e-8,
# the size of the epsilon, so a float32 z-score gave equal returns advantages of order 1.
NON_DYADIC = [0.1, 0.3, 0.7, 0.9, 1 / 3, 0.15, 2 / 3, 0.45, 0.55, 0.35]


@pytest.mark.parametrize("value", NON_DYADIC)
def test_grpo_constant_non_dyadic_groups_are_zero(value):
    for g in range(2, 33):
        a = grpo_advantages([value] * g, [0] * g)
        assert a.dtype == torch.float32
        assert a.abs().max().item() <= 1e-6, (value, g, a.tolist())
        assert a.tolist() == [0.0] * g  # the constant-group rule gives exactly 0


def test_grpo_constant_float32_tensor_group_is_zero():
    # a float32 input tensor (as a trainer may hold returns) is read in float64: still exactly 0
    for g in range(2, 33):
        assert grpo_advantages(torch.full((g,), 0.9, dtype=torch.float32), [7] * g).tolist() == [0.0] * g


def test_grpo_non_constant_matches_float64_by_hand():
    # [0.1, 0.3, 0.3, 0.9]: mean 0.4, deviations -0.3, -0.1, -0.1, 0.5, population var (0.09 + 0.01 + 0.01
    # + 0.25) / 4 = 0.09, std 0.3 -> -1, -1/3, -1/3, 5/3 (the epsilon moves them by ~3e-8 relative)
    returns = [0.1, 0.3, 0.3, 0.9]
    a = grpo_advantages(returns, ["e"] * 4)
    assert a.tolist() == pytest.approx([-1.0, -1 / 3, -1 / 3, 5 / 3], rel=1e-6)
    mean = sum(returns) / 4
    std = (sum((r - mean) ** 2 for r in returns) / 4) ** 0.5
    assert a.tolist() == pytest.approx([(r - mean) / (std + 1e-8) for r in returns], rel=1e-6)


def test_grpo_mixed_constant_and_varying_groups_in_one_call():
    # group 0: 6 x 0.9 (constant) -> 0; group 1: [0.1, 0.7] mean 0.4 std 0.3 -> -1, +1;
    # group 2: 7 x 0.3 (constant) -> 0; group 3: a singleton -> 0
    returns = [0.9] * 6 + [0.1, 0.7] + [0.3] * 7 + [0.15]
    groups = [0] * 6 + [1, 1] + [2] * 7 + [3]
    a = grpo_advantages(returns, groups).tolist()
    assert a[:6] == [0.0] * 6
    assert a[6:8] == pytest.approx([-1.0, 1.0], rel=1e-6)
    assert a[8:] == [0.0] * 8


def test_designer_advantages_constant_non_dyadic_skill_is_zero():
    for value in NON_DYADIC:
        for m in range(2, 33):
            a = designer_advantages([value] * m, ["math"] * m)
            assert a.dtype == torch.float32
            assert a.abs().max().item() <= 1e-6, (value, m)
