"""Hint sampling follows the reference code: temperature 0.3 and its own token limit; designs keep theirs."""

from __future__ import annotations

import pytest

from spade.config import load_config
from scripted_backend import RoleBackend



def first_rollout(pool, tiny_model, designer: dict) -> RoleBackend:
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator
    from spade.core.selfplay import SelfPlay

    _, tokenizer = tiny_model
    design = "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
    config = load_config(overrides={"model_card": "tiny-random", "selfplay": {
        "active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "backfill": False},
        "agent": {"max_turns": 2}, "corpus": {"enabled": False}, "designer": designer})
    backend = RoleBackend(tokenizer, design)
    core = SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None)
    core.rollout(0)
    assert all(slot.hint == "Count carefully." for slot in core._envs())
    return backend


def test_hints_sample_at_hint_temperature_and_hint_token_limit(pool, tiny_model):
    backend = first_rollout(pool, tiny_model, {"temperature": 0.6, "max_new_tokens": 300, "hint_max_new_tokens": 17})
    assert backend.of("hint") == [(0.3, 17), (0.3, 17)]  # default hint_temperature 0.3 (reference code)
    assert backend.of("design") == [(0.6, 300), (0.6, 300)]  # designs keep the designer temperature


def test_hint_temperature_can_restore_the_previous_behaviour(pool, tiny_model):
    backend = first_rollout(pool, tiny_model, {"temperature": 0.6, "max_new_tokens": 300,
                                               "hint_max_new_tokens": 9, "hint_temperature": 0.6})
    assert backend.of("hint") == [(0.6, 9), (0.6, 9)]
    assert backend.of("design") == [(0.6, 300), (0.6, 300)]


def test_hint_defaults_follow_the_reference_code():
    games = load_config(overrides={"model_card": "tiny-random", "recipe": "games"}).designer
    tool_use = load_config(overrides={"model_card": "tiny-random", "recipe": "tool_use"}).designer
    assert (games.hint_temperature, games.hint_max_new_tokens) == (0.3, 4096)
    assert (tool_use.hint_temperature, tool_use.hint_max_new_tokens) == (0.3, 2048)
    assert games.temperature == tool_use.temperature == 0.6


def test_hint_temperature_rejects_negative_values():
    from spade.config import ConfigError

    with pytest.raises(ConfigError, match="hint_temperature"):
        load_config(overrides={"model_card": "tiny-random", "designer": {"hint_temperature": -0.1}})
