"""designer.enable_thinking / agent.enable_thinking: the chat template's thinking switch per role (issue 40).

The reference's Qwen3-8B runs render designs, hints and the tool-use screen with the adapter's default
``enable_thinking: false`` and only the actor with ``true``. The template here is written for the test: it prints
which value it was given, so every rendered prompt says what reached it."""

from __future__ import annotations

import copy

import pytest

from spade.config import load_config
from scripted_backend import RoleBackend, role_of

# ChatML with a visible record of the enable_thinking variable after the generation prompt
MARKING_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is not defined %}{{ '[think:default]' }}{% elif enable_thinking %}{{ '[think:on]' }}"
    "{% else %}{{ '[think:off]' }}{% endif %}{% endif %}"
)
MARKS = ("[think:default]", "[think:on]", "[think:off]")


class PromptRecorder(RoleBackend):
    """RoleBackend that keeps (role, decoded prompt) of every prompt."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prompts: list = []

    def generate(self, prompts, params, seed):
        self.prompts += [(role_of(text), text) for text in map(self.tokenizer.decode, prompts)]
        return super().generate(prompts, params, seed)


def marks_by_role(pool, tiny_model, designer: dict, agent: dict) -> dict:
    """Every role's thinking marks over one tool-use regeneration step (design, screen, hint, both arms)."""
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    _, tokenizer = tiny_model
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = MARKING_TEMPLATE
    config = load_config(overrides={
        "model_card": "tiny-random", "recipe": "tool_use", "corpus": {"enabled": False},
        "validation": {"llm_screen": True}, "designer": designer, "agent": {"max_turns": 2, **agent},
        "selfplay": {"active_skills": 1, "envs_per_skill": 1, "group_size": 2, "design_attempts": 1,
                     "backfill": False}})
    backend = PromptRecorder(tokenizer, f"```python\n{get_env('bank_account_ops').source()}```\n")
    core = SelfPlay(config, backend, Validator(pool, config.validation), EnvironmentMemory(config.memory), None)
    core.rollout(0)
    found: dict = {}
    for role, text in backend.prompts:
        found.setdefault(role, set()).update(mark for mark in MARKS if mark in text)
    return found


def test_only_the_agent_thinks_with_the_reference_8b_setting(pool, tiny_model):
    """designer.enable_thinking false reaches designs, the screen and hints; agent.enable_thinking true every agent
    prompt (both arms, later turns included)."""
    found = marks_by_role(pool, tiny_model, {"enable_thinking": False}, {"enable_thinking": True})
    assert found == {"design": {"[think:off]"}, "screen": {"[think:off]"}, "hint": {"[think:off]"},
                     "agent": {"[think:on]"}}


def test_null_leaves_the_template_default_for_every_role(pool, tiny_model):
    found = marks_by_role(pool, tiny_model, {}, {})
    assert set(found) == {"design", "screen", "hint", "agent"}
    assert all(marks == {"[think:default]"} for marks in found.values())


def test_thinking_defaults_per_paper_run():
    """The Qwen3-8B paper runs: only the agent thinks; the other backbones' templates get no variable."""
    from spade.config import CONFIG_DIR

    for name in ("spade_games_8b", "spade_tool_use_8b", "fixed_env_grpo_8b"):
        config = load_config(CONFIG_DIR / "paper" / f"{name}.yaml")
        assert (config.designer.enable_thinking, config.agent.enable_thinking) == (False, True), name
    rlve = load_config(CONFIG_DIR / "paper" / "fixed_env_rlve_8b.yaml")
    assert (rlve.designer.enable_thinking, rlve.agent.enable_thinking) == (None, True)
    games_30b = load_config(CONFIG_DIR / "paper" / "spade_games_30b.yaml")
    assert (games_30b.designer.enable_thinking, games_30b.agent.enable_thinking) == (None, None)


def test_a_bad_thinking_value_names_the_key_and_the_values():
    from spade.configtools import ConfigError

    with pytest.raises(ConfigError, match=r"designer\.enable_thinking.*'no'.*None, True, False"):
        load_config(overrides={"designer": {"enable_thinking": "no"}})
    with pytest.raises(ConfigError, match=r"agent\.enable_thinking.*'yes'.*None, True, False"):
        load_config(overrides={"agent": {"enable_thinking": "yes"}})
