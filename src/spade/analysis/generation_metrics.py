"""Cost and usefulness of generated environments (issue 7, item 2d; metrics adopted from AutoEnvScaling).

* valid-environment rate with a Wilson interval: :func:`spade.analysis.rates.valid_env_rate` (reused here);
* generated tokens per valid environment: designer completion tokens spent on design attempts, divided by
  the attempts that passed validation (hint calls are not counted; backfilled slots are neither tokens
  nor valid environments);
* useful-group rate: the share of agent groups (one environment's G no-hint episodes of one step) whose
  returns are not all equal. A group whose returns all match gets zero GRPO advantage everywhere and so
  teaches nothing.

Inputs are what a run writes: ``metrics.jsonl`` records (one per training step) and environment-set
archives ``envs/set_*.json``. Keys these functions need that older runs lack (``design_generated_tokens``,
``agent_groups``, ``useful_groups`` in the metrics; ``generated_tokens`` in each archived validation report)
raise a ``ValueError`` that names the key. Pure functions; bad input raises ``ValueError`` naming the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from spade.analysis.rates import RateEstimate, rate_estimate, valid_env_rate

__all__ = [
    "TokenCost", "generation_summary", "is_useful_group", "tokens_per_valid_env", "tokens_per_valid_env_from_sets",
    "useful_group_rate", "useful_group_rate_from_groups", "useful_group_rate_from_sets",
]


@dataclass(frozen=True)
class TokenCost:
    """``tokens`` generated for design attempts of which ``valid`` passed validation; ``per_valid`` is
    their ratio, None when no attempt was valid (the cost is then unbounded)."""

    tokens: int
    valid: int
    attempts: int
    per_valid: float | None


def _count(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x) or x < 0:
        raise ValueError(f"{name} must be a non-negative whole number, got {x!r}")
    return int(x)


def _cost(tokens: int, valid: int, attempts: int) -> TokenCost:
    return TokenCost(tokens, valid, attempts, tokens / valid if valid else None)


def _regeneration_records(records: Iterable[Mapping]) -> list:
    chosen = []
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"records[{i}] must be a mapping, got {type(record).__name__}")
        if record.get("regenerated"):
            chosen.append((i, record))
    return chosen


def _needed(record: Mapping, key: str, index: int, where: str) -> int:
    if key not in record:
        raise ValueError(f"{where}[{index}] (step {record.get('step')!r}) has no {key!r}: the run was written "
                         f"before {key!r} was logged, so this metric cannot be computed from it")
    return _count(f"{where}[{index}][{key!r}]", record[key])


def tokens_per_valid_env(records: Iterable[Mapping]) -> TokenCost:
    """Designer tokens per valid environment from ``metrics.jsonl`` records: over the regeneration records
    (``regenerated`` true), the sum of ``design_generated_tokens`` over the sum of ``designer_valid``."""
    tokens = valid = attempts = 0
    for i, record in _regeneration_records(records):
        tokens += _needed(record, "design_generated_tokens", i, "records")
        valid += _count(f"records[{i}]['designer_valid']", record.get("designer_valid", 0))
        attempts += _count(f"records[{i}]['design_attempts']", record.get("design_attempts", 0))
    if attempts == 0:
        raise ValueError("records hold no design attempts (no regeneration record with design_attempts > 0)")
    return _cost(tokens, valid, attempts)


def tokens_per_valid_env_from_sets(env_sets: Iterable[Mapping]) -> TokenCost:
    """The same cost from environment-set archives: every validation report of a designer attempt (the
    ``reports`` of each slot) contributes its ``generated_tokens``; a report with ``valid`` true is one
    valid environment."""
    tokens = valid = attempts = 0
    for i, env_set in enumerate(env_sets):
        environments = env_set.get("environments") if isinstance(env_set, Mapping) else None
        if not isinstance(environments, list):
            raise ValueError(f"env_sets[{i}] must be a mapping with an 'environments' list")
        for j, row in enumerate(environments):
            for report in row.get("reports") or []:
                tokens += _needed(report, "generated_tokens", j, f"env_sets[{i}].environments")
                attempts += 1
                valid += bool(report.get("valid"))
    if attempts == 0:
        raise ValueError("env_sets hold no validation reports")
    return _cost(tokens, valid, attempts)


def is_useful_group(returns: Sequence[float], tolerance: float = 0.0) -> bool:
    """A group is useful when its returns are not all equal: max - min > ``tolerance`` (a group of one
    episode never is)."""
    values = []
    for i, value in enumerate(returns):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"returns[{i}] must be a finite number, got {value!r}")
        values.append(float(value))
    if not values:
        raise ValueError("a group needs at least one return, got an empty list")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ValueError(f"tolerance must be a number >= 0, got {tolerance!r}")
    return max(values) - min(values) > tolerance


def useful_group_rate_from_groups(groups: Iterable[Sequence[float]], confidence: float = 0.95,
                                  tolerance: float = 0.0) -> RateEstimate:
    """Useful-group rate (with its Wilson interval) of groups given as lists of episode returns."""
    flags = [is_useful_group(group, tolerance) for group in groups]
    if not flags:
        raise ValueError("no groups given")
    return rate_estimate(sum(flags), len(flags), confidence)


def useful_group_rate(records: Iterable[Mapping], confidence: float = 0.95) -> RateEstimate:
    """Useful-group rate over a run from ``metrics.jsonl``: sum of ``useful_groups`` over sum of
    ``agent_groups``, over every step that played episodes."""
    useful = groups = 0
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"records[{i}] must be a mapping, got {type(record).__name__}")
        if not record.get("episodes"):
            continue
        groups += _needed(record, "agent_groups", i, "records")
        useful += _needed(record, "useful_groups", i, "records")
    if groups == 0:
        raise ValueError("records hold no agent groups (no step with episodes > 0)")
    if useful > groups:
        raise ValueError(f"useful_groups ({useful}) exceed agent_groups ({groups})")
    return rate_estimate(useful, groups, confidence)


def useful_group_rate_from_sets(env_sets: Iterable[Mapping], confidence: float = 0.95,
                                tolerance: float = 0.0) -> RateEstimate:
    """Useful-group rate from environment-set archives. An archive keeps one group per environment: the
    no-hint returns at the regeneration step (``paired_returns``), so this rate covers the first step of
    every window only; the per-step rate needs the ``metrics.jsonl`` keys (:func:`useful_group_rate`)."""
    groups = []
    for i, env_set in enumerate(env_sets):
        environments = env_set.get("environments") if isinstance(env_set, Mapping) else None
        if not isinstance(environments, list):
            raise ValueError(f"env_sets[{i}] must be a mapping with an 'environments' list")
        groups += [row["paired_returns"] for row in environments if row.get("valid") and row.get("paired_returns")]
    if not groups:
        raise ValueError("env_sets hold no played environment (no valid row with paired_returns)")
    return useful_group_rate_from_groups(groups, confidence, tolerance)


def generation_summary(records: Sequence[Mapping], env_sets: Sequence[Mapping] = (),
                       confidence: float = 0.95) -> dict:
    """The three generation metrics of a run as plain data, for tables: each entry is the metric or None,
    and ``unavailable`` maps a metric to the reason it could not be computed (e.g. a key the run did not
    log). The useful-group rate falls back to the archives when the metrics lack the per-step counts."""
    summary: dict = {"valid_env_rate": None, "tokens_per_valid_env": None, "useful_group_rate": None,
                     "useful_group_source": None, "unavailable": {}}
    attempts = [
        ("valid_env_rate", "metrics.jsonl", lambda: _rate_dict(valid_env_rate(records, confidence))),
        ("tokens_per_valid_env", "metrics.jsonl", lambda: _cost_dict(tokens_per_valid_env(records))),
        ("useful_group_rate", "metrics.jsonl", lambda: _rate_dict(useful_group_rate(records, confidence))),
        ("useful_group_rate", "envs/set_*.json (regeneration steps only)",
         lambda: _rate_dict(useful_group_rate_from_sets(env_sets, confidence))),
    ]
    for name, source, compute in attempts:
        if summary[name] is not None:
            continue
        try:
            summary[name] = compute()
        except ValueError as exc:
            summary["unavailable"].setdefault(name, []).append(f"{source}: {exc}")
            continue
        summary["unavailable"].pop(name, None)
        if name == "useful_group_rate":
            summary["useful_group_source"] = source
    return summary


def _rate_dict(rate: RateEstimate) -> dict:
    return {"successes": rate.successes, "trials": rate.trials, "rate": rate.rate, "low": rate.low,
            "high": rate.high, "confidence": rate.confidence}


def _cost_dict(cost: TokenCost) -> dict:
    return {"tokens": cost.tokens, "valid": cost.valid, "attempts": cost.attempts, "per_valid": cost.per_valid}
