"""Designer and hint sampling follow the reference code: hints at temperature 0.3 with their own token limit and
top-p 0.9; designs and the agent at top-p 0.95 and top-k 20 (the recipes); each one switch away from untruncated."""

from __future__ import annotations

import pytest

from spade.config import load_config
from scripted_backend import RoleBackend



def first_rollout(pool, tiny_model, designer: dict, agent: dict | None = None) -> RoleBackend:
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator
    from spade.core.selfplay import SelfPlay

    _, tokenizer = tiny_model
    design = "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
    config = load_config(overrides={"model_card": "tiny-random", "selfplay": {
        "active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "backfill": False},
        "agent": {"max_turns": 2, **(agent or {})}, "corpus": {"enabled": False}, "designer": designer})
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


def test_sampling_truncation_follows_the_reference_code_for_every_role(pool, tiny_model):
    backend = first_rollout(pool, tiny_model, {"max_new_tokens": 300})
    by_role = {role: set() for role in ("design", "hint", "agent")}
    for role, top_p, top_k in backend.truncation:
        by_role[role].add((top_p, top_k))
    # the games recipe: --spade-env-top-p/top-k and --spade-actor-top-p/top-k defaults; hints: the call's top_p 0.9
    assert by_role == {"design": {(0.95, 20)}, "hint": {(0.9, 0)}, "agent": {(0.95, 20)}}
    plain = first_rollout(pool, tiny_model, {"max_new_tokens": 300, "top_p": 1.0, "top_k": 0, "hint_top_p": 1.0},
                          {"top_p": 1.0, "top_k": 0})
    assert {(top_p, top_k) for _, top_p, top_k in plain.truncation} == {(1.0, 0)}  # untruncated, one switch away


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
