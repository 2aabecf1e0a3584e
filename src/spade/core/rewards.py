"""Reward definitions of SPADE as small pure functions on plain floats (spec sections 3.4 and 4).

No torch, no state, no I/O: every function maps numbers to a number and raises ``ValueError``
(naming the bad argument) on invalid input. Symbols follow the paper: R_A is the Reasoning Agent's
episode return, r_D the designer's hint regret, g1/g2 (``g_fast``/``g_slow``) the EMA rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

WIN_THRESHOLD = 1.0 - 1e-6  # spec 4: a "win" is a terminated episode with final reward >= 1 - 1e-6


def _finite(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return float(x)


def _unit(name: str, x) -> float:
    x = _finite(name, x)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {x!r}")
    return x


def _band(low, high) -> tuple[float, float]:
    low, high = _unit("low", low), _unit("high", high)
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low!r} high={high!r}")
    return low, high


def _positive(name: str, x) -> float:
    x = _finite(name, x)
    if x <= 0:
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return x


def _mean(name: str, xs: Sequence[float]) -> float:
    if len(xs) == 0:
        raise ValueError(f"{name} must not be empty")
    return sum(_finite(f"{name}[{i}]", x) for i, x in enumerate(xs)) / len(xs)


def episode_return(final_reward: float, terminated: bool) -> float:
    """Spec 3.4: R_A = final-step reward if the episode terminated, else 0; clipped to [-1, 1]."""
    r = _finite("final_reward", final_reward)
    return min(1.0, max(-1.0, r)) if terminated else 0.0


def is_win(final_reward: float, terminated: bool, threshold: float = WIN_THRESHOLD) -> bool:
    """Spec 4: a win is a terminated episode whose final reward is >= ``threshold``."""
    r, t = _finite("final_reward", final_reward), _finite("threshold", threshold)
    return bool(terminated) and r >= t


def regret(returns_with_hint: Sequence[float], returns_without_hint: Sequence[float], paired: bool = True) -> float:
    """Eq. 3: r_D(e) = mean_G(R_A | e, hint) - mean_G(R_A | e).

    ``paired=True`` (our deviation, spec 3.3): both arms were played on the same G seeds, so the lists
    must have equal length and the result is the mean of the per-seed differences (equal to the
    difference of the means). ``paired=False`` (the official code) allows unequal lengths.
    """
    if paired and len(returns_with_hint) != len(returns_without_hint):
        raise ValueError(
            f"paired regret needs equal lengths, got returns_with_hint={len(returns_with_hint)} "
            f"and returns_without_hint={len(returns_without_hint)}")
    with_hint = _mean("returns_with_hint", returns_with_hint)
    without_hint = _mean("returns_without_hint", returns_without_hint)
    if paired:
        return sum(a - b for a, b in zip(returns_with_hint, returns_without_hint)) / len(returns_with_hint)
    return with_hint - without_hint


def floored_regret(r_d: float, scale: float = 0.15) -> float:
    """Spec 4: reg = clip(max(0, r_D) / scale, 0, 1), scale 0.15 in the paper."""
    r_d, scale = _finite("r_d", r_d), _positive("scale", scale)
    return min(1.0, max(0.0, r_d) / scale)


def plateau(win_rate: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """Spec 4 difficulty anchor: 1 on [low, high], linear down to 0 over ``ramp`` on each side, 0 beyond."""
    w = _unit("win_rate", win_rate)
    low, high = _band(low, high)
    ramp = _positive("ramp", ramp)
    distance = max(low - w, w - high, 0.0)  # how far outside the band
    return max(0.0, 1.0 - distance / ramp)


def designer_reward(r_d: float, win_rate: float, regret_weight: float = 0.4, plateau_weight: float = 0.6,
                    scale: float = 0.15, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """Spec 4 deployed ED reward: r = regret_weight * reg(r_D) + plateau_weight * plateau(win rate)."""
    a, b = _finite("regret_weight", regret_weight), _finite("plateau_weight", plateau_weight)
    return a * floored_regret(r_d, scale) + b * plateau(win_rate, low, high, ramp)


def window_regret_reward(returns_with_hint: Sequence[float], window_mean_return: float) -> float:
    """The reference's ``regret_based`` designer reward (delayed_env_rewards.py:304-366, the tool-use 4B script):
    max(0, mean of the hinted returns - the mean no-hint return over the whole k-step window), with no scale, no cap
    and no plateau term. No hinted return (the hint failed) counts as a hinted mean of 0, as there."""
    hinted = _mean("returns_with_hint", returns_with_hint) if len(returns_with_hint) else 0.0
    return max(0.0, hinted - _finite("window_mean_return", window_mean_return))


def calibration_band_reward(valid: bool, win_rate: float | None, low: float = 0.4, high: float = 0.6) -> float:
    """Spec 4 alternative scheme (AutoEnvScaling-style): -1 invalid, -0.25 valid but win rate outside
    [low, high], +1 valid and inside. ``win_rate`` may be None only for an invalid candidate."""
    low, high = _band(low, high)
    if not valid:
        return -1.0
    if win_rate is None:
        raise ValueError("win_rate is required for a valid candidate, got None")
    return 1.0 if low <= _unit("win_rate", win_rate) <= high else -0.25


INVALID_MODES = ("discard", "penalty")


def invalid_penalty(mode: str = "discard", penalty: float = -1.0) -> float | None:
    """Spec 4 switch for an invalid candidate: "discard" (paper) -> None, i.e. no ED sample;
    "penalty" -> an ED sample with the fixed reward ``penalty`` (default -1.0)."""
    if mode not in INVALID_MODES:
        raise ValueError(f"mode must be one of {INVALID_MODES}, got {mode!r}")
    penalty = _finite("penalty", penalty)
    return None if mode == "discard" else penalty


def invalid_candidate_reward(designer) -> float | None:
    """The reward of an invalid candidate under a run's ``designer`` config, None when it makes no sample: the
    calibration band trains every attempt (-1 when invalid, AutoEnvScaling); otherwise ``invalid_penalty``."""
    if designer.reward == "calibration":
        return -1.0
    return invalid_penalty(designer.invalid, designer.invalid_penalty)


@dataclass(frozen=True)
class EMAState:
    """Per-skill EMAs of the skill's mean R_A (Eqs. 4-5): mu_fast (logged only) and mu_slow."""

    fast: dict[str, float] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)


def _rate(name: str, g) -> float:
    g = _finite(name, g)
    if not 0.0 < g < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {g!r}")
    return g


def ema_update(state: EMAState, skill_means: Mapping[str, float], g_fast: float = 0.98,
               g_slow: float = 0.85) -> EMAState:
    """Eqs. 4-5: mu <- (1 - g) * mu + g * mean R_A(skill) for each skill in ``skill_means``.

    g weights the new value, so a larger g follows faster. The paper does not state g1, g2; our defaults
    are the reference code's, g_fast = g1 = 0.98 (half-life ~0.18 rounds) and g_slow = g2 = 0.85
    (half-life ~0.37 rounds), in this same form; the earlier defaults 0.5 / 0.1 are still accepted.
    g_fast must exceed g_slow. A skill seen for the first time starts both EMAs at its mean; skills
    absent from ``skill_means`` keep their values.
    """
    g_fast, g_slow = _rate("g_fast", g_fast), _rate("g_slow", g_slow)
    if g_fast <= g_slow:
        raise ValueError(f"g_fast must exceed g_slow (g1 > g2), got g_fast={g_fast!r} g_slow={g_slow!r}")
    fast, slow = dict(state.fast), dict(state.slow)
    for skill, m in skill_means.items():
        m = _finite(f"skill_means[{skill!r}]", m)
        fast[skill] = (1 - g_fast) * fast[skill] + g_fast * m if skill in fast else m
        slow[skill] = (1 - g_slow) * slow[skill] + g_slow * m if skill in slow else m
    return EMAState(fast=fast, slow=slow)


def half_life(g: float) -> float:
    """Spec 4: rounds for an EMA of rate g to halve an old value: log 0.5 / log(1 - g)."""
    return math.log(0.5) / math.log(1.0 - _rate("g", g))


def learning_potential(env_mean_returns: Sequence[float], skills: Sequence[str], slow: Mapping[str, float]) -> list[float]:
    """Eq. 6: rho(e) = |mean R_A(e) - mu_slow(skill(e))|; r_LP(e) = rho(e) - mean of rho over this
    round's environments of the same skill. Inputs are [M] per environment; output [M].

    ``slow`` is the caller's choice of mu_slow; we pass the EMA *after* this round's ``ema_update``,
    so that a skill seen for the first time has a baseline.
    """
    if len(env_mean_returns) != len(skills):
        raise ValueError(f"env_mean_returns ({len(env_mean_returns)}) and skills ({len(skills)}) must have equal length")
    rho = []
    for i, (r, s) in enumerate(zip(env_mean_returns, skills)):
        if s not in slow:
            raise ValueError(f"slow has no EMA for skill {s!r} (skills[{i}])")
        rho.append(abs(_finite(f"env_mean_returns[{i}]", r) - _finite(f"slow[{s!r}]", slow[s])))
    by_skill: dict[str, list[float]] = {}
    for p, s in zip(rho, skills):
        by_skill.setdefault(s, []).append(p)
    return [p - sum(by_skill[s]) / len(by_skill[s]) for p, s in zip(rho, skills)]


def learnable(win_rate: float, low: float = 0.2, high: float = 0.8) -> bool:
    """Learnable-share analysis: an environment is learnable when low <= win rate <= high."""
    low, high = _band(low, high)
    return low <= _unit("win_rate", win_rate) <= high
