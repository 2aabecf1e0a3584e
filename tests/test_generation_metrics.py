"""Generation metrics: tokens per valid environment and useful-group rate (hand-computed expectations)."""

from __future__ import annotations

import pytest

from spade.analysis.generation_metrics import (
    TokenCost,
    generation_summary,
    is_useful_group,
    tokens_per_valid_env,
    tokens_per_valid_env_from_sets,
    useful_group_rate,
    useful_group_rate_from_groups,
    useful_group_rate_from_sets,
)

RECORDS = [
    {"step": 0, "regenerated": True, "design_attempts": 4, "designer_valid": 1, "design_generated_tokens": 1200,
     "episodes": 8, "agent_groups": 2, "useful_groups": 1},
    {"step": 1, "episodes": 8, "agent_groups": 2, "useful_groups": 2},  # not a regeneration: no design keys
    {"step": 2, "regenerated": True, "design_attempts": 5, "designer_valid": 3, "design_generated_tokens": 800,
     "episodes": 0},  # no play: skipped by the useful-group rate
]


def _set(*rows):
    return {"environments": list(rows)}


SETS = [
    _set({"valid": True, "paired_returns": [0.0, 0.0, 0.0, 0.0],
          "reports": [{"valid": False, "generated_tokens": 100}, {"valid": True, "generated_tokens": 300}]},
         {"valid": False, "paired_returns": [], "reports": [{"valid": False, "generated_tokens": 70}]}),
    _set({"valid": True, "paired_returns": [0.0, 1.0, 0.0, 0.0], "reports": [{"valid": True, "generated_tokens": 50}]},
         {"valid": True, "source": "backfill:x", "paired_returns": [1.0, 1.0, 1.0, 1.0], "reports": []}),
]


def test_tokens_per_valid_env_from_metrics():
    # (1200 + 800) tokens / (1 + 3) valid = 500; attempts 4 + 5 = 9.
    assert tokens_per_valid_env(RECORDS) == TokenCost(2000, 4, 9, 500.0)


def test_tokens_per_valid_env_without_valid_is_unbounded():
    record = {"regenerated": True, "design_attempts": 3, "designer_valid": 0, "design_generated_tokens": 90}
    assert tokens_per_valid_env([record]) == TokenCost(90, 0, 3, None)


def test_tokens_per_valid_env_names_missing_key():
    old = {key: value for key, value in RECORDS[0].items() if key != "design_generated_tokens"}
    with pytest.raises(ValueError, match="design_generated_tokens"):
        tokens_per_valid_env([old])
    with pytest.raises(ValueError, match="no design attempts"):
        tokens_per_valid_env([RECORDS[1]])
    with pytest.raises(ValueError, match="non-negative whole number"):
        tokens_per_valid_env([{**RECORDS[0], "design_generated_tokens": -5}])


def test_tokens_per_valid_env_from_sets():
    # Reports: 100 + 300 + 70 + 50 = 520 tokens, 2 valid of 4 -> 260 per valid environment.
    assert tokens_per_valid_env_from_sets(SETS) == TokenCost(520, 2, 4, 260.0)
    with pytest.raises(ValueError, match="generated_tokens"):
        tokens_per_valid_env_from_sets([_set({"reports": [{"valid": True}]})])


def test_is_useful_group():
    assert is_useful_group([0.0, 1.0, 0.0])
    assert not is_useful_group([1.0, 1.0, 1.0])
    assert not is_useful_group([0.5])
    assert is_useful_group([0.3, 0.3 + 1e-12])
    assert not is_useful_group([0.3, 0.3 + 1e-12], tolerance=1e-9)
    for bad in ([], [float("nan"), 1.0], [True, 0.0]):
        with pytest.raises(ValueError):
            is_useful_group(bad)


def test_useful_group_rate_from_groups_with_wilson_interval():
    # Useful: yes, no, no, yes -> 2 of 4. Wilson 95 %: centre 0.5, half-width
    # 1.96 / (1 + 3.8415/4) * sqrt(0.25/4 + 3.8415/64) = 0.34996.
    rate = useful_group_rate_from_groups([[0, 1, 0], [1, 1, 1], [0.5], [0, 0, 0.25]])
    assert (rate.successes, rate.trials, rate.rate) == (2, 4, 0.5)
    assert rate.low == pytest.approx(0.15004, abs=1e-4) and rate.high == pytest.approx(0.84996, abs=1e-4)


def test_useful_group_rate_from_metrics():
    rate = useful_group_rate(RECORDS)  # (1 + 2) useful of (2 + 2) groups; step 2 played nothing
    assert (rate.successes, rate.trials, rate.rate) == (3, 4, 0.75)
    with pytest.raises(ValueError, match="agent_groups"):
        useful_group_rate([{"step": 5, "episodes": 4}])
    with pytest.raises(ValueError, match="exceed"):
        useful_group_rate([{"episodes": 4, "agent_groups": 1, "useful_groups": 2}])


def test_useful_group_rate_from_sets():
    # Valid played rows: [0,0,0,0] no, [0,1,0,0] yes, [1,1,1,1] no -> 1 of 3.
    rate = useful_group_rate_from_sets(SETS)
    assert (rate.successes, rate.trials) == (1, 3)
    with pytest.raises(ValueError, match="no played environment"):
        useful_group_rate_from_sets([_set({"valid": False})])


def test_generation_summary_full_and_partial():
    full = generation_summary(RECORDS, SETS)
    assert full["valid_env_rate"]["successes"] == 4 and full["valid_env_rate"]["trials"] == 9
    assert full["tokens_per_valid_env"]["per_valid"] == 500.0
    assert full["useful_group_rate"]["rate"] == 0.75 and full["useful_group_source"] == "metrics.jsonl"
    assert full["unavailable"] == {}
    # A run written before the new keys: tokens unavailable, useful groups from the archives.
    old = [{k: v for k, v in r.items() if k not in ("design_generated_tokens", "agent_groups", "useful_groups")}
           for r in RECORDS]
    partial = generation_summary(old, SETS)
    assert partial["tokens_per_valid_env"] is None
    assert "design_generated_tokens" in partial["unavailable"]["tokens_per_valid_env"][0]
    assert partial["useful_group_rate"]["trials"] == 3
    assert partial["useful_group_source"].startswith("envs/set_")
    assert "useful_group_rate" not in partial["unavailable"]
