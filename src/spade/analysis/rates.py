"""Rates with confidence intervals: the valid-environment rate of the designer (spec sections 5 and 9).

A rate here is ``successes / trials`` reported with a Wilson score interval, which stays inside [0, 1] and
behaves at 0 and n successes, where the normal ("Wald") interval collapses to a point. Pure functions on
plain numbers; bad input raises ``ValueError`` naming the argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Iterable, Mapping


@dataclass(frozen=True)
class RateEstimate:
    """``successes`` of ``trials``: the rate and its two-sided Wilson interval at ``confidence``."""

    successes: int
    trials: int
    rate: float
    low: float
    high: float
    confidence: float


def _count(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x) or x < 0:
        raise ValueError(f"{name} must be a non-negative whole number, got {x!r}")
    return int(x)


def _confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return float(confidence)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion p = successes / trials.

    With z the two-sided normal quantile of ``confidence`` (1.95996 for 0.95):
    centre = (p + z^2 / 2n) / (1 + z^2 / n), half-width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2).
    """
    k, n, c = _count("successes", successes), _count("trials", trials), _confidence(confidence)
    if n == 0:
        raise ValueError("trials must be > 0, got 0")
    if k > n:
        raise ValueError(f"successes must not exceed trials, got successes={k} trials={n}")
    z = NormalDist().inv_cdf(0.5 + c / 2.0)
    p, z2 = k / n, z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_estimate(successes: int, trials: int, confidence: float = 0.95) -> RateEstimate:
    """The rate ``successes / trials`` with its Wilson interval (see :func:`wilson_interval`)."""
    low, high = wilson_interval(successes, trials, confidence)
    return RateEstimate(int(successes), int(trials), successes / trials, low, high, float(confidence))


def valid_env_rate(records: Iterable[Mapping], confidence: float = 0.95) -> RateEstimate:
    """Valid-environment rate of the designer over a run, from its ``metrics.jsonl`` records.

    Spec 5/9: the share of design attempts (designer generations) that passed validation. Summed over the
    regeneration records (``regenerated`` true): successes = ``designer_valid`` (slots filled by the designer;
    a slot stops being retried once valid, so this equals the number of valid attempts), trials =
    ``design_attempts``. Backfilled slots are not designer output and count in neither.
    """
    valid = attempts = 0
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"records[{i}] must be a mapping, got {type(record).__name__}")
        if not record.get("regenerated"):
            continue
        valid += _count(f"records[{i}]['designer_valid']", record.get("designer_valid", 0))
        attempts += _count(f"records[{i}]['design_attempts']", record.get("design_attempts", 0))
    if attempts == 0:
        raise ValueError("records hold no design attempts (no regeneration record with design_attempts > 0)")
    return rate_estimate(valid, attempts, confidence)


def valid_env_rate_from_sets(env_sets: Iterable[Mapping], confidence: float = 0.95) -> RateEstimate:
    """The same rate from environment-set archives (``envs/set_*.json``): every validation report of a
    designer attempt (``reports`` of each slot) is one trial, a report with ``valid`` true one success."""
    valid = attempts = 0
    for i, env_set in enumerate(env_sets):
        environments = env_set.get("environments") if isinstance(env_set, Mapping) else None
        if not isinstance(environments, list):
            raise ValueError(f"env_sets[{i}] must be a mapping with an 'environments' list")
        for row in environments:
            for report in row.get("reports") or []:
                attempts += 1
                valid += bool(report.get("valid"))
    if attempts == 0:
        raise ValueError("env_sets hold no validation reports")
    return rate_estimate(valid, attempts, confidence)


def bootstrap_mean_difference(before, after, resamples: int = 2000, seed: int = 0,
                              confidence: float = 0.95) -> tuple[float, float, float]:
    """mean(after) - mean(before) and its percentile bootstrap interval: each resample draws ``len(before)``
    values from ``before`` and ``len(after)`` from ``after`` with replacement (two independent samples)."""
    import random

    before, after = [float(x) for x in before], [float(x) for x in after]
    if not before or not after:
        raise ValueError(f"both samples need values, got {len(before)} and {len(after)}")
    rng = random.Random(seed)
    low, high = _percentile_interval(lambda: sum(rng.choices(after, k=len(after))) / len(after)
                                     - sum(rng.choices(before, k=len(before))) / len(before), resamples, confidence)
    return sum(after) / len(after) - sum(before) / len(before), low, high


def _percentile_interval(draw, resamples: int, confidence: float) -> tuple[float, float]:
    """The percentile interval at ``confidence`` of ``resamples`` bootstrap statistics, each one call of ``draw()``."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    c = _confidence(confidence)
    values = sorted(draw() for _ in range(resamples))
    return values[int(math.floor((1 - c) / 2 * (resamples - 1)))], values[int(math.ceil((1 + c) / 2 * (resamples - 1)))]


def paired_bootstrap_difference(pairs, resamples: int = 2000, seed: int = 0,
                                confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``after - before`` over ``pairs`` of (before, after) scores of the same items (e.g. one held-out
    instance played by the base model and by a checkpoint) and its percentile bootstrap interval: each resample
    draws ``len(pairs)`` items with replacement and keeps both of an item's scores together."""
    import random

    diffs = [float(after) - float(before) for before, after in pairs]
    if not diffs:
        raise ValueError("pairs needs at least one (before, after) pair, got none")
    rng = random.Random(seed)
    low, high = _percentile_interval(lambda: sum(rng.choices(diffs, k=len(diffs))) / len(diffs), resamples, confidence)
    return sum(diffs) / len(diffs), low, high
