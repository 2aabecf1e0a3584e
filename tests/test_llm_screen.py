"""The tool-use LLM screen (validation.llm_screen): after the sandbox checks pass, the policy judges every tool-use
candidate in one generate call at T 0.3; a 'no' rejects (screen_rejected), an empty or unparsable verdict passes
(reference code, screen_unclear 'pass') or rejects (the paper's reading, 'reject'); its time is the screen phase."""

from __future__ import annotations

import pytest

from spade.config import CONFIG_DIR, load_config
from spade.designer.prompts import screen_prompt, screen_verdict
from spade.envs.validate import ValidationReport, screened
from scripted_backend import RoleBackend


@pytest.mark.parametrize("reply, verdict", [
    ("All three checks hold for each criterion. \\boxed{yes}", "pass"),
    ("\\boxed{ Yes. }", "pass"),
    ("\\boxed{\\text{TRUE}}", "pass"),
    ("criterion 2 needs an id no tool returns. \\boxed{no}", "reject"),
    ("\\boxed{maybe}", "reject"),  # any other word in the box rejects, as the reference reads it
    ("first \\boxed{yes}, then on reflection \\boxed{no}", "reject"),  # the last box is the verdict
    ("<think>\\boxed{no}</think>Sound. \\boxed{yes}", "pass"),  # reasoning is not read
    ("", "empty"),
    ("  \n ", "empty"),
    ("<think>still thinking \\boxed{yes}", "empty"),  # cut inside its reasoning
    ("I think it is fine.", "garbage"),
    ("\\boxed{}", "garbage"),
    ("\\boxed{yes", "garbage"),
])
def test_screen_verdict(reply, verdict):
    assert screen_verdict(reply) == verdict


def test_screen_prompt_asks_the_three_questions_about_the_code():
    system, user = screen_prompt("class Env: pass")
    assert system["role"] == "system" and "class Env: pass" in user["content"]
    text = user["content"]
    assert all(word in text for word in ("Reachable", "Not done at the start", "Derivable", "\\boxed{yes}"))


@pytest.mark.parametrize("verdict, unclear, valid, reason", [
    ("pass", "pass", True, "ok"), ("pass", "reject", True, "ok"),
    ("reject", "pass", False, "screen_rejected"), ("reject", "reject", False, "screen_rejected"),
    ("empty", "pass", True, "ok"), ("empty", "reject", False, "screen_unclear"),
    ("garbage", "pass", True, "ok"), ("garbage", "reject", False, "screen_unclear"),
])
def test_screened_under_both_fail_modes(verdict, unclear, valid, reason):
    report = ValidationReport(True, "ok", "valid", "none", kind="tool_use", checks=("intake", "reset_gate"))
    out = screened(report, verdict, "my reply", unclear)
    assert (out.valid, out.reason, out.screen_verdict) == (valid, reason, verdict)
    assert out.checks == (("intake", "reset_gate", "llm_screen") if valid else report.checks)
    assert valid or out.message.endswith("my reply")


def test_screened_refuses_unknown_settings():
    report = ValidationReport(True, "ok", "valid", "none", kind="tool_use")
    with pytest.raises(ValueError, match="screen_unclear"):
        screened(report, "pass", "", "open")
    with pytest.raises(ValueError, match="unknown screen verdict"):
        screened(report, "maybe", "")


class CallCounter(RoleBackend):
    """RoleBackend that also records the roles of each generate call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list = []

    def generate(self, prompts, params, seed):
        before = len(self.calls)
        out = super().generate(prompts, params, seed)
        self.batches.append([role for role, _, _ in self.calls[before:]])
        return out


def designed(pool, tiny_model, screen_reply: str, validation: dict, recipe: str = "tool_use", env="bank_account_ops"):
    """One design round of 2 slots whose candidate is built-in environment ``env``; returns (core, backend, slots)."""
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    _, tokenizer = tiny_model
    config = load_config(overrides={
        "model_card": "tiny-random", "recipe": recipe, "validation": validation, "corpus": {"enabled": False},
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "design_attempts": 1, "backfill": False}})
    backend = CallCounter(tokenizer, f"```python\n{get_env(env).source()}```\n", screen=screen_reply)
    core = SelfPlay(config, backend, Validator(pool, config.validation), EnvironmentMemory(config.memory), None)
    core.clock.start_step()
    slots, _ = core.design(0)
    return core, backend, slots


@pytest.mark.parametrize("reply, unclear, valid, reason", [
    ("\\boxed{yes}", "pass", True, "ok"),
    ("\\boxed{no}", "pass", False, "screen_rejected"),
    ("\\boxed{no}", "reject", False, "screen_rejected"),
    ("", "pass", True, "ok"),
    ("", "reject", False, "screen_unclear"),
    ("looks fine to me", "pass", True, "ok"),
    ("looks fine to me", "reject", False, "screen_unclear"),
])
def test_the_screen_decides_a_tool_use_design(pool, tiny_model, reply, unclear, valid, reason):
    core, backend, slots = designed(pool, tiny_model, reply, {"llm_screen": True, "screen_unclear": unclear})
    assert [slot.valid for slot in slots] == [valid, valid]
    assert [slot.reports[-1]["reason"] for slot in slots] == [reason, reason]
    # both candidates in one generate call, after the design call; T 0.3, the reference's 16,384 tokens
    assert backend.batches == [["design", "design"], ["screen", "screen"]]
    assert backend.of("screen") == [(0.3, 16384), (0.3, 16384)]
    assert {(top_p, top_k) for role, top_p, top_k in backend.truncation if role == "screen"} == {(0.9, 0)}
    metrics = core._design_metrics(slots)
    assert metrics["reject_reasons"] == ({} if valid else {reason: 2})
    assert metrics["design_fail_stages"]["gates"] == (0 if valid else 2)
    assert metrics["screen_verdicts"] == {screen_verdict(reply): 2}
    assert core.clock.metrics()["phase_screen_seconds"] > 0  # the generate call's time is the screen phase


def test_the_screen_temperature_and_budget_are_config_keys(pool, tiny_model):
    _, backend, _ = designed(pool, tiny_model, "\\boxed{yes}",
                             {"llm_screen": True, "screen_temperature": 0.7, "screen_max_new_tokens": 99})
    assert backend.of("screen") == [(0.7, 99), (0.7, 99)]


def test_no_screen_when_off_or_for_games(pool, tiny_model):
    core, backend, slots = designed(pool, tiny_model, "\\boxed{no}", {"llm_screen": False})
    assert all(slot.valid for slot in slots) and "screen" not in backend.roles()
    assert "phase_screen_seconds" not in core.clock.metrics()
    _, backend, slots = designed(pool, tiny_model, "\\boxed{no}", {"llm_screen": True}, recipe="games",
                                 env="knapsack_selection")
    assert all(slot.valid for slot in slots) and "screen" not in backend.roles()


def test_the_screen_is_on_for_tool_use_only():
    tool_use = load_config(overrides={"model_card": "tiny-random", "recipe": "tool_use"})
    assert (tool_use.validation.llm_screen, tool_use.validation.screen_unclear) == (True, "pass")
    params = tool_use.designer.screen_params(tool_use.validation)
    assert (params.temperature, params.top_p, params.top_k, params.max_new_tokens) == (0.3, 0.9, 0, 16384)
    assert not load_config(overrides={"model_card": "tiny-random", "recipe": "games"}).validation.llm_screen
    for name in ("spade_tool_use_4b", "spade_tool_use_8b", "spade_tool_use_30b"):
        assert load_config(CONFIG_DIR / "paper" / f"{name}.yaml").validation.llm_screen
