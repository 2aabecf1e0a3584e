"""Hand-computed checks of the SPADE reward functions (spec sections 3.4 and 4)."""

from __future__ import annotations

import math

import pytest

from spade.core.rewards import (EMAState, calibration_band_reward, designer_reward, ema_update, episode_return,
                           floored_regret, half_life, invalid_penalty, is_win, learnable, learning_potential,
                           plateau, regret, window_regret_reward)


def test_episode_return_terminated_truncated_and_clipped():
    assert episode_return(0.7, True) == pytest.approx(0.7)
    assert episode_return(0.7, False) == 0.0  # not terminated -> 0
    assert episode_return(3.0, True) == 1.0  # clipped to 1
    assert episode_return(-2.5, True) == -1.0  # clipped to -1


def test_episode_return_rejects_nan():
    with pytest.raises(ValueError, match="final_reward"):
        episode_return(float("nan"), True)


def test_is_win_threshold():
    assert is_win(1.0, True)
    assert is_win(1.0 - 1e-7, True)  # within 1e-6 of 1
    assert not is_win(0.999, True)
    assert not is_win(1.0, False)  # truncated episodes never win
    assert is_win(0.5, True, threshold=0.5)
    with pytest.raises(ValueError, match="threshold"):
        is_win(1.0, True, threshold=float("inf"))


def test_regret_paired_is_mean_of_differences():
    # diffs: 1-0, 1-1, 0.5-0, 0-0.5 = 1, 0, 0.5, -0.5 -> mean 1/4 = 0.25
    assert regret([1, 1, 0.5, 0], [0, 1, 0, 0.5]) == pytest.approx(0.25)
    # same as the difference of means: 2.5/4 - 1.5/4 = 0.25
    assert regret([1, 1, 0.5, 0], [0, 1, 0, 0.5], paired=False) == pytest.approx(0.25)


def test_regret_unpaired_allows_unequal_lengths():
    # mean(1, 0) - mean(0, 0, 0.6) = 0.5 - 0.2 = 0.3
    assert regret([1, 0], [0, 0, 0.6], paired=False) == pytest.approx(0.3)


def test_regret_invalid_inputs():
    with pytest.raises(ValueError, match="equal lengths"):
        regret([1, 0], [0, 0, 0.6])
    with pytest.raises(ValueError, match="returns_with_hint must not be empty"):
        regret([], [])
    with pytest.raises(ValueError, match="returns_without_hint must not be empty"):
        regret([1.0], [], paired=False)
    with pytest.raises(ValueError, match=r"returns_without_hint\[1\]"):
        regret([1.0, 0.0], [0.0, float("nan")])


def test_floored_regret():
    assert floored_regret(0.075) == pytest.approx(0.5)  # 0.075 / 0.15
    assert floored_regret(-0.3) == 0.0  # floored at 0
    assert floored_regret(0.6) == 1.0  # 0.6 / 0.15 = 4 -> clipped to 1
    assert floored_regret(0.1, scale=0.2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="scale must be > 0"):
        floored_regret(0.1, scale=0.0)


def test_plateau_values():
    assert plateau(0.5) == 1.0  # inside [0.4, 0.6]
    assert plateau(0.4) == 1.0 and plateau(0.6) == 1.0  # band edges
    assert plateau(0.3) == pytest.approx(0.6)  # 1 - (0.4 - 0.3) / 0.25 = 1 - 0.4
    assert plateau(0.8) == pytest.approx(0.2)  # 1 - (0.8 - 0.6) / 0.25 = 1 - 0.8
    assert plateau(0.1) == 0.0  # beyond the ramp: 0.1 < 0.4 - 0.25 = 0.15
    assert plateau(0.95) == 0.0  # beyond 0.6 + 0.25 = 0.85
    assert plateau(0.3, low=0.2, high=0.4, ramp=0.1) == 1.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(win_rate=1.2), "win_rate must lie in"),
    (dict(win_rate=0.5, low=0.7, high=0.6), "low must not exceed high"),
    (dict(win_rate=0.5, high=1.5), "high must lie in"),
    (dict(win_rate=0.5, ramp=0.0), "ramp must be > 0"),
    (dict(win_rate=float("nan")), "win_rate must be a finite number"),
])
def test_plateau_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plateau(**kwargs)


def test_designer_reward():
    assert designer_reward(0.075, 0.5) == pytest.approx(0.8)  # 0.4 * 0.5 + 0.6 * 1
    assert designer_reward(0.3, 0.3) == pytest.approx(0.76)  # 0.4 * 1 + 0.6 * 0.6
    assert designer_reward(-0.2, 0.1) == 0.0  # 0.4 * 0 + 0.6 * 0
    # custom weights: 1.0 * 0.5 + 0.0 * 1
    assert designer_reward(0.075, 0.5, regret_weight=1.0, plateau_weight=0.0) == pytest.approx(0.5)


def test_calibration_band_reward():
    assert calibration_band_reward(False, None, 0.4, 0.6) == -1.0
    assert calibration_band_reward(True, 0.9, 0.4, 0.6) == -0.25
    assert calibration_band_reward(True, 0.5, 0.4, 0.6) == 1.0
    with pytest.raises(ValueError, match="win_rate is required"):
        calibration_band_reward(True, None, 0.4, 0.6)


def test_invalid_penalty_switch():
    assert invalid_penalty() is None  # paper: discarded, no sample
    assert invalid_penalty("penalty") == -1.0
    assert invalid_penalty("penalty", penalty=-0.5) == -0.5
    with pytest.raises(ValueError, match="mode must be one of"):
        invalid_penalty("ignore")


def test_ema_update_initialises_then_moves():
    s0 = ema_update(EMAState(), {"math": 0.4, "logic": 0.8})
    assert s0.fast == {"math": 0.4, "logic": 0.8} and s0.slow == {"math": 0.4, "logic": 0.8}
    s1 = ema_update(s0, {"math": 1.0})
    # defaults 0.98 / 0.85 (reference code): fast 0.02 * 0.4 + 0.98 * 1.0 = 0.988; slow 0.15 * 0.4 + 0.85 = 0.91
    assert s1.fast["math"] == pytest.approx(0.988)
    assert s1.slow["math"] == pytest.approx(0.91)
    assert s1.fast["logic"] == 0.8 and s1.slow["logic"] == 0.8  # unseen this round: unchanged
    assert s0.fast["math"] == 0.4  # the old state is not modified
    # the previous defaults, set explicitly: fast 0.5 * 0.4 + 0.5 * 1.0 = 0.7; slow 0.9 * 0.4 + 0.1 * 1.0 = 0.46
    old = ema_update(s0, {"math": 1.0}, g_fast=0.5, g_slow=0.1)
    assert old.fast["math"] == pytest.approx(0.7)
    assert old.slow["math"] == pytest.approx(0.46)


def test_ema_update_reference_rates_two_updates():
    # first observation 0.2 initialises both EMAs; then 1.0 with the new-value weights 0.98 / 0.85:
    # fast = 0.02 * 0.2 + 0.98 * 1.0 = 0.984; slow = 0.15 * 0.2 + 0.85 * 1.0 = 0.88
    s0 = ema_update(EMAState(), {"math": 0.2}, g_fast=0.98, g_slow=0.85)
    assert s0.fast == {"math": 0.2} and s0.slow == {"math": 0.2}
    s1 = ema_update(s0, {"math": 1.0}, g_fast=0.98, g_slow=0.85)
    assert s1.fast["math"] == pytest.approx(0.984)
    assert s1.slow["math"] == pytest.approx(0.88)
    assert ema_update(s0, {"math": 1.0}) == s1  # the defaults are the reference's rates


def test_ema_update_rejects_bad_rates():
    with pytest.raises(ValueError, match="g_fast must exceed g_slow"):
        ema_update(EMAState(), {"a": 0.1}, g_fast=0.1, g_slow=0.2)
    with pytest.raises(ValueError, match="g_slow must lie in"):
        ema_update(EMAState(), {"a": 0.1}, g_fast=0.5, g_slow=0.0)


def test_half_life():
    assert half_life(0.5) == pytest.approx(1.0)  # log 0.5 / log 0.5
    assert half_life(0.1) == pytest.approx(math.log(0.5) / math.log(0.9))  # = 6.5788...
    assert half_life(0.1) == pytest.approx(6.578813, rel=1e-6)
    assert half_life(0.85) == pytest.approx(math.log(0.5) / math.log(0.15))  # = 0.36537 (reference slow rate)
    assert half_life(0.85) == pytest.approx(0.365368, rel=1e-5)
    assert half_life(0.98) == pytest.approx(math.log(0.5) / math.log(0.02))  # = 0.17718 (reference fast rate)
    with pytest.raises(ValueError, match="g must lie in"):
        half_life(1.0)


def test_learning_potential_two_skills():
    slow = {"math": 0.5, "logic": 0.2}
    returns = [0.9, 0.5, 0.2, 0.6, 0.0]
    skills = ["math", "math", "math", "logic", "logic"]
    # rho: |0.9-0.5|=0.4, |0.5-0.5|=0, |0.2-0.5|=0.3 (math, mean 0.7/3); |0.6-0.2|=0.4, |0-0.2|=0.2 (logic, mean 0.3)
    expected = [0.4 - 0.7 / 3, 0.0 - 0.7 / 3, 0.3 - 0.7 / 3, 0.1, -0.1]
    assert learning_potential(returns, skills, slow) == pytest.approx(expected)


def test_learning_potential_invalid_inputs():
    with pytest.raises(ValueError, match="equal length"):
        learning_potential([0.1], ["a", "b"], {"a": 0.0, "b": 0.0})
    with pytest.raises(ValueError, match="no EMA for skill 'b'"):
        learning_potential([0.1, 0.2], ["a", "b"], {"a": 0.0})


def test_learnable():
    assert learnable(0.5)
    assert learnable(0.2) and learnable(0.8)  # inclusive bounds
    assert not learnable(0.1) and not learnable(0.9)
    with pytest.raises(ValueError, match="win_rate must lie in"):
        learnable(-0.1)


def test_window_regret_reward():
    """The reference's regret_based reward: max(0, hinted mean - window mean); no hinted return counts as 0."""
    assert window_regret_reward([1.0, 0.5], 0.25) == pytest.approx(0.5)
    assert window_regret_reward([0.0, 0.5], 0.5) == 0.0
    assert window_regret_reward([], 0.0) == 0.0
    with pytest.raises(ValueError, match="window_mean_return"):
        window_regret_reward([1.0], float("nan"))
