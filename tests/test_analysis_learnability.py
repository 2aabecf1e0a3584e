"""Hand-computed checks of learnable share, reward levels and win-rate trends (spec section 9)."""

from __future__ import annotations

import json

import pytest

from spade.analysis import read_env_sets
from spade.analysis.learnability import (
    distinct_reward_levels, early_late_gain, ema, learnable_count, learnable_share, learnable_share_from_sets,
    phase_mean, reward_level_rows, set_step, slot_win_rates, strictly_partial_levels, windowed_learnable_share,
)


def _row(step, valid=True, wins=0, episodes=0, rewards=(), win_rate="auto"):
    row = {"env_id": f"s{step}-x", "skill": "logic", "step": step, "valid": valid, "wins": wins, "episodes": episodes,
           "distinct_rewards": list(rewards)}
    row["win_rate"] = (wins / episodes if episodes else None) if win_rate == "auto" else win_rate
    return row


def test_learnable_share_band_is_inclusive_and_empty_slots_count_zero():
    rates = [0.2, 0.8, 0.5, 0.1, 0.9, None]  # 0.2, 0.8, 0.5 learnable; None = empty slot
    assert learnable_count(rates) == 3
    assert learnable_share(rates) == pytest.approx(3 / 6)
    assert learnable_share(rates, capacity=8) == pytest.approx(3 / 8)  # two more slots, never filled


def test_learnable_share_rejects_bad_input():
    with pytest.raises(ValueError, match="win_rate"):
        learnable_share([0.5, 1.5])
    with pytest.raises(ValueError, match="capacity"):
        learnable_share([0.5, 0.5, 0.5], capacity=2)
    with pytest.raises(ValueError, match="empty"):
        learnable_share([])


def test_windowed_share_is_weighted_by_valid_environments():
    # Set A (step 0): 4 slots, 2 valid, both learnable -> share among valid 1.0.
    # Set B (step 4): 4 slots, 4 valid, 1 learnable  -> share among valid 0.25.
    # Valid-weighted mean (2 * 1.0 + 4 * 0.25) / 6 = 0.5, times fill rate 6/8 -> 0.375 = 3/8.
    out = windowed_learnable_share([0, 4], [[0.5, 0.3, None, None], [0.5, 0.0, 1.0, 0.95]])
    assert out == [{"window_start": 0, "window_end": 16, "share": pytest.approx(0.375), "learnable": 3, "slots": 8,
                    "sets": 2}]


def test_windowed_share_windows_by_regeneration_step():
    steps = [0, 4, 8, 12, 16, 36]
    rates = [[0.5, 0.0], [0.5, 0.5], [0.0, 0.0], [None, 0.5], [1.0, 0.5], [0.4, 0.6]]
    out = windowed_learnable_share(steps, rates)
    assert [(w["window_start"], w["learnable"], w["slots"], w["sets"]) for w in out] == [(0, 4, 8, 4), (16, 1, 2, 1),
                                                                                       (32, 2, 2, 1)]
    assert [w["share"] for w in out] == pytest.approx([0.5, 0.5, 1.0])
    assert windowed_learnable_share([3, 5], [[0.5], [0.5]], window=4)[1]["window_start"] == 4


def test_windowed_share_rejects_bad_input():
    with pytest.raises(ValueError, match="window"):
        windowed_learnable_share([0], [[0.5]], window=0)
    with pytest.raises(ValueError, match="equal length"):
        windowed_learnable_share([0, 4], [[0.5]])
    with pytest.raises(ValueError, match="set_steps"):
        windowed_learnable_share([-4], [[0.5]])


def test_slot_win_rates_and_shares_from_archives(tmp_path):
    set0 = {"environments": [_row(0, wins=4, episodes=8), _row(0, valid=False), _row(0, wins=0, episodes=8),
                             _row(0, wins=6, episodes=8, win_rate=None)]}  # win_rate missing: wins / episodes
    set4 = {"environments": [_row(4, wins=2, episodes=8), _row(4, wins=8, episodes=8)]}
    assert slot_win_rates(set0) == [0.5, None, 0.0, 0.75]
    assert set_step(set4) == 4
    (tmp_path / "envs").mkdir()
    for step, data in ((4, set4), (0, set0)):
        (tmp_path / "envs" / f"set_{step:05d}.json").write_text(json.dumps(data))
    sets = read_env_sets(tmp_path)
    assert [set_step(s) for s in sets] == [0, 4]  # step order
    # learnable: 0.5 and 0.75 of set 0, 0.25 of set 4 -> 3 of 6 slots
    assert learnable_share_from_sets(sets) == [{"window_start": 0, "window_end": 16, "share": pytest.approx(0.5),
                                                "learnable": 3, "slots": 6, "sets": 2}]
    assert read_env_sets(tmp_path / "missing") == []
    (tmp_path / "envs" / "set_00008.json").write_text("{}")
    with pytest.raises(ValueError, match="set_00008"):
        read_env_sets(tmp_path)


def test_set_step_needs_one_step():
    with pytest.raises(ValueError, match="share one 'step'"):
        set_step({"environments": [_row(0), _row(4)]})


def test_reward_levels_count_distinct_rounded_values():
    rewards = [0.0, 0.5, 0.5, 1.0, 0.3333333333, 1 / 3, -0.0]
    assert distinct_reward_levels(rewards) == 4  # 0, 1/3, 0.5, 1 (-0.0 is 0; 1/3 equal to 6 places)
    assert strictly_partial_levels(rewards) == 2  # 1/3 and 0.5
    assert distinct_reward_levels([]) == 0
    assert distinct_reward_levels([0.1, 0.1000001], decimals=3) == 1
    with pytest.raises(ValueError, match="rewards"):
        distinct_reward_levels([0.5, float("nan")])
    with pytest.raises(ValueError, match="decimals"):
        distinct_reward_levels([0.5], decimals=-1)


def test_reward_level_rows_skip_invalid_and_unplayed():
    sets = [{"environments": [_row(0, episodes=8, rewards=[0.0, 0.25, 1.0]), _row(0, valid=False),
                              _row(0, episodes=0, rewards=[])]},
            {"environments": [_row(4, episodes=8, rewards=[0.5])]}]
    rows = reward_level_rows(sets)
    assert [(r["step"], r["levels"], r["partial_levels"]) for r in rows] == [(0, 3, 1), (4, 1, 1)]


def test_phase_mean_ema_and_gain():
    assert phase_mean([0, 100, 130, 200, 300], [1.0, 2.0, 3.0, 10.0, 5.0], 0, 130) == pytest.approx(2.0)
    assert phase_mean([0, 100], [1.0, 2.0], 261, 396) is None
    with pytest.raises(ValueError, match="start"):
        phase_mean([0], [1.0], 10, 5)
    assert ema([0.0, 1.0, 1.0], 0.5) == pytest.approx([0.0, 0.5, 0.75])
    with pytest.raises(ValueError, match="alpha"):
        ema([1.0], 0.0)
    # 8 values, 25% -> 2 each end: mean(2, 2) - mean(0, 0) = 2
    assert early_late_gain([0, 0, 1, 1, 1, 1, 2, 2]) == pytest.approx(2.0)
    assert early_late_gain([0.2, 0.5, 0.4]) == pytest.approx(0.2)  # 25% of 3 -> 1 value each end
    with pytest.raises(ValueError, match="values"):
        early_late_gain([1.0])
