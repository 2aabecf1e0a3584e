"""Learnable share, reward levels and win-rate trends of the environment sets (spec section 9, figures 6,
16 and 17).

Inputs are the environment-set archives a run writes, ``results/runs/<run>/envs/set_<step>.json``
(``{"environments": [row, ...]}``; a row per slot of the set, including slots that never validated, with
``step`` = the regeneration step, ``valid``, ``wins``/``episodes`` over the set's k-step window, ``win_rate``
and ``distinct_rewards`` = the distinct final rewards observed), or plain lists taken from them. Pure
functions; bad input raises ``ValueError`` naming the bad value.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from spade.core.rewards import learnable

LEARNABLE_LOW, LEARNABLE_HIGH = 0.2, 0.8  # spec 9: learnable = RA win rate in [0.2, 0.8]
WINDOW_STEPS = 16  # spec 9 / figure 6: learnable share per 16-step window
LEVEL_DECIMALS = 6  # reward values equal to 6 decimals are one level


def _finite(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return float(x)


def _step(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ValueError(f"{name} must be a non-negative int, got {x!r}")
    return x


def _positive_int(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
        raise ValueError(f"{name} must be a positive int, got {x!r}")
    return x


def _environments(env_set, where: str) -> list:
    environments = env_set.get("environments") if isinstance(env_set, Mapping) else None
    if not isinstance(environments, list):
        raise ValueError(f"{where} must be a mapping with an 'environments' list, got {type(env_set).__name__}")
    return environments


# ----- learnable share (figure 6) -------------------------------------------------------------------
def slot_win_rates(env_set: Mapping) -> list[float | None]:
    """[B] window win rate of every slot of one archived set; None where the slot is empty (never
    validated) or was not played. ``win_rate`` of the row, else ``wins / episodes``."""
    rates = []
    for i, row in enumerate(_environments(env_set, "env_set")):
        if not row.get("valid"):
            rates.append(None)
            continue
        rate = row.get("win_rate")
        if rate is None and row.get("episodes"):
            rate = row.get("wins", 0) / row["episodes"]
        rates.append(None if rate is None else _finite(f"environments[{i}].win_rate", rate))
    return rates


def set_step(env_set: Mapping) -> int:
    """The regeneration step of an archived set (the ``step`` its rows share)."""
    steps = {row.get("step") for row in _environments(env_set, "env_set")}
    if len(steps) != 1:
        raise ValueError(f"env_set rows must share one 'step', got {sorted(steps, key=str)}")
    return _step("env_set step", steps.pop())


def learnable_count(win_rates: Sequence[float | None], low: float = LEARNABLE_LOW, high: float = LEARNABLE_HIGH) -> int:
    """Number of slots whose win rate lies in [low, high]; None (empty or unplayed slot) never counts."""
    return sum(learnable(_finite(f"win_rates[{i}]", w), low, high) for i, w in enumerate(win_rates) if w is not None)


def learnable_share(win_rates: Sequence[float | None], capacity: int | None = None, low: float = LEARNABLE_LOW,
                    high: float = LEARNABLE_HIGH) -> float:
    """Spec 9, one set: learnable slots / slot capacity. Unfilled slots count 0, i.e. stay in the denominator.

    ``win_rates`` [B] per slot (None = empty); ``capacity`` defaults to ``len(win_rates)`` and may exceed it
    (slots missing from the list are empty).
    """
    capacity = len(win_rates) if capacity is None else _positive_int("capacity", capacity)
    if capacity < len(win_rates):
        raise ValueError(f"capacity ({capacity}) is smaller than the number of slots given ({len(win_rates)})")
    if capacity == 0:
        raise ValueError("win_rates is empty and no capacity was given")
    return learnable_count(win_rates, low, high) / capacity


def windowed_learnable_share(set_steps: Sequence[int], set_win_rates: Sequence[Sequence[float | None]],
                             window: int = WINDOW_STEPS, capacity: int | None = None, low: float = LEARNABLE_LOW,
                             high: float = LEARNABLE_HIGH) -> list[dict]:
    """Spec 9 / figure 6: learnable share per ``window``-step window, weighted by valid environments.

    A set belongs to the window [w, w + window) holding its regeneration step. Per window:
    share = sum over its sets of learnable slots / sum of slot capacities. This is the mean of the per-set
    share among valid environments weighted by each set's valid count, times the fill rate (empty slots
    count 0): sum_s v_s (l_s / v_s) / sum_s v_s * sum_s v_s / sum_s c_s = sum_s l_s / sum_s c_s.

    ``set_steps`` [S] and ``set_win_rates`` [S][B] (None = empty slot); ``capacity`` per set defaults to the
    length of its list. Returns one dict per window that holds a set, by window start:
    ``{"window_start", "window_end", "share", "learnable", "slots", "sets"}``.
    """
    window = _positive_int("window", window)
    if len(set_steps) != len(set_win_rates):
        raise ValueError(f"set_steps ({len(set_steps)}) and set_win_rates ({len(set_win_rates)}) "
                         "must have equal length")
    totals: dict[int, list[int]] = {}  # window start -> [learnable, slots, sets]
    for i, (step, rates) in enumerate(zip(set_steps, set_win_rates)):
        start = _step(f"set_steps[{i}]", step) // window * window
        slots = len(rates) if capacity is None else _positive_int("capacity", capacity)
        if slots < len(rates):
            raise ValueError(f"capacity ({slots}) is smaller than set_win_rates[{i}] ({len(rates)} slots)")
        entry = totals.setdefault(start, [0, 0, 0])
        entry[0] += learnable_count(rates, low, high)
        entry[1] += slots
        entry[2] += 1
    return [{"window_start": start, "window_end": start + window, "share": n / slots if slots else 0.0,
             "learnable": n, "slots": slots, "sets": sets}
            for start, (n, slots, sets) in sorted(totals.items())]


def learnable_share_from_sets(env_sets: Iterable[Mapping], window: int = WINDOW_STEPS, capacity: int | None = None,
                              low: float = LEARNABLE_LOW, high: float = LEARNABLE_HIGH) -> list[dict]:
    """:func:`windowed_learnable_share` of archived sets (``envs/set_*.json`` contents)."""
    env_sets = list(env_sets)
    return windowed_learnable_share([set_step(s) for s in env_sets], [slot_win_rates(s) for s in env_sets], window,
                                    capacity, low, high)


# ----- reward levels (figure 16) --------------------------------------------------------------------
def _levels(rewards: Sequence[float], decimals: int) -> set[float]:
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative int, got {decimals!r}")
    # + 0.0 turns -0.0 into 0.0 so that the two are one level
    return {round(_finite(f"rewards[{i}]", r), decimals) + 0.0 for i, r in enumerate(rewards)}


def distinct_reward_levels(rewards: Sequence[float], decimals: int = LEVEL_DECIMALS) -> int:
    """Figure 16: number of distinct reward values an environment paid (values equal after rounding to
    ``decimals`` places are one level). ``rewards`` [N] observed final rewards."""
    return len(_levels(rewards, decimals))


def strictly_partial_levels(rewards: Sequence[float], decimals: int = LEVEL_DECIMALS) -> int:
    """Figure 16: number of distinct reward values strictly between 0 and 1 (partial credit)."""
    return sum(0.0 < r < 1.0 for r in _levels(rewards, decimals))


def reward_level_rows(env_sets: Iterable[Mapping], decimals: int = LEVEL_DECIMALS) -> list[dict]:
    """One row per valid, played environment of the archived sets:
    ``{"step", "env_id", "skill", "levels", "partial_levels"}`` from its ``distinct_rewards``."""
    rows = []
    for i, env_set in enumerate(env_sets):
        for j, env in enumerate(_environments(env_set, f"env_sets[{i}]")):
            if not env.get("valid") or not env.get("episodes"):
                continue
            rewards = env.get("distinct_rewards") or []
            rows.append({"step": _step(f"env_sets[{i}].environments[{j}].step", env.get("step")),
                         "env_id": env.get("env_id"), "skill": env.get("skill"),
                         "levels": distinct_reward_levels(rewards, decimals),
                         "partial_levels": strictly_partial_levels(rewards, decimals)})
    return rows


def phase_mean(steps: Sequence[int], values: Sequence[float], start: int, end: int) -> float | None:
    """Mean of ``values`` [N] whose step [N] lies in [start, end] (inclusive; figure 16b compares steps
    0-130 with 261-396); None when no value falls in the phase."""
    if len(steps) != len(values):
        raise ValueError(f"steps ({len(steps)}) and values ({len(values)}) must have equal length")
    start, end = _step("start", start), _step("end", end)
    if start > end:
        raise ValueError(f"start must not exceed end, got start={start} end={end}")
    picked = [_finite(f"values[{i}]", v) for i, (s, v) in enumerate(zip(steps, values)) if start <= s <= end]
    return sum(picked) / len(picked) if picked else None


# ----- win-rate trends (figures 12 right, 17) ---------------------------------------------------------
def ema(values: Sequence[float], alpha: float) -> list[float]:
    """Exponential moving average: m_0 = x_0, m_t = (1 - alpha) m_(t-1) + alpha x_t. [N] -> [N]."""
    alpha = _finite("alpha", alpha)
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
    out: list[float] = []
    for i, x in enumerate(values):
        x = _finite(f"values[{i}]", x)
        out.append(x if not out else (1.0 - alpha) * out[-1] + alpha * x)
    return out


def early_late_gain(values: Sequence[float], fraction: float = 0.25) -> float:
    """Figure 17b: mean of the last ``fraction`` of ``values`` [N] (in step order) minus the mean of the first
    ``fraction``; each part holds max(1, floor(fraction * N)) values."""
    fraction = _finite("fraction", fraction)
    if not 0.0 < fraction <= 0.5:
        raise ValueError(f"fraction must lie in (0, 0.5], got {fraction!r}")
    xs = [_finite(f"values[{i}]", v) for i, v in enumerate(values)]
    if len(xs) < 2:
        raise ValueError(f"values needs at least 2 entries, got {len(xs)}")
    k = max(1, int(fraction * len(xs)))
    return sum(xs[-k:]) / k - sum(xs[:k]) / k
