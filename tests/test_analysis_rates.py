"""Hand-computed checks of the valid-environment rate and its Wilson interval (spec sections 5 and 9)."""

from __future__ import annotations

import pytest

from spade.analysis.rates import rate_estimate, valid_env_rate, valid_env_rate_from_sets, wilson_interval

# z = 1.959964 for 95%. 0/10: high = z^2 / (n + z^2) = 3.841459 / 13.841459 = 0.277533.
# 5/10: centre 0.5, half = z / (1 + z^2/10) * sqrt(0.025 + z^2/400) = 1.416010 * 0.186021 = 0.263407.


def test_wilson_known_values():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    assert wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert wilson_interval(10, 10) == pytest.approx((0.722467, 1.0), abs=1e-6)  # mirror of 0/10


def test_wilson_narrows_with_n_and_widens_with_confidence():
    low_small, high_small = wilson_interval(50, 100)
    low_big, high_big = wilson_interval(500, 1000)
    assert high_big - low_big < high_small - low_small
    low99, high99 = wilson_interval(50, 100, confidence=0.99)
    assert low99 < low_small and high99 > high_small


@pytest.mark.parametrize("args, name", [((1, 0), "trials"), ((3, 2), "successes"), ((-1, 5), "successes"),
                                        ((1.5, 5), "successes"), ((1, 5, 1.0), "confidence"), ((True, 5), "successes")])
def test_wilson_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        wilson_interval(*args)


def test_rate_estimate_fields():
    est = rate_estimate(5, 10)
    assert (est.successes, est.trials, est.rate, est.confidence) == (5, 10, 0.5, 0.95)
    assert (est.low, est.high) == pytest.approx((0.236593, 0.763407), abs=1e-6)


def test_valid_env_rate_sums_regeneration_records():
    records = [
        {"step": 0, "regenerated": True, "designer_valid": 3, "design_attempts": 10},
        {"step": 1, "designer_valid": 99, "design_attempts": 99},  # not a regeneration step: ignored
        {"step": 4, "regenerated": True, "designer_valid": 5, "design_attempts": 10},
    ]
    est = valid_env_rate(records)
    assert (est.successes, est.trials) == (8, 20)
    assert est.rate == pytest.approx(0.4)


def test_valid_env_rate_without_attempts_is_an_error():
    with pytest.raises(ValueError, match="no design attempts"):
        valid_env_rate([{"step": 0, "regenerated": True, "designer_valid": 0, "design_attempts": 0}])
    with pytest.raises(ValueError, match="designer_valid"):
        valid_env_rate([{"step": 0, "regenerated": True, "designer_valid": -1, "design_attempts": 4}])


def test_valid_env_rate_from_set_reports():
    sets = [{"environments": [
        {"reports": [{"valid": False}, {"valid": False}, {"valid": True}]},
        {"reports": [{"valid": True}]},
        {"reports": [], "source": "backfill:x"},  # a backfilled slot has no designer report
    ]}]
    est = valid_env_rate_from_sets(sets)
    assert (est.successes, est.trials) == (2, 4)
    with pytest.raises(ValueError, match="environments"):
        valid_env_rate_from_sets([{"envs": []}])
