"""designer.hint_timeout_s and validation.screen_timeout_s (issue 40): the reference gives a hint request and the
tool-use screen's request 120 s each; a hint is asked up to 3 times, then its environment goes without a hint (no
hint arm, no regret); a screen past its limit fails the design. The backends turn SamplingParams.timeout_s into a
Generation with finish_reason 'timeout': OpenRLHF's engines per request, the HF backend for the whole call."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from spade.config import load_config
from spade.inference.generation import SamplingParams, timed_out
from scripted_backend import RoleBackend, role_of


class LateBackend(RoleBackend):
    """RoleBackend whose first ``late[role]`` requests of a role time out; records each role's timeout_s."""

    def __init__(self, *args, late: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.late, self.limits = dict(late), {}

    def generate(self, prompts, params, seed):
        out = super().generate(prompts, params, seed)
        for i, prompt in enumerate(prompts):
            role = role_of(self.tokenizer.decode(prompt))
            self.limits.setdefault(role, set()).add(params.timeout_s)
            if self.late.get(role, 0) > 0:
                self.late[role] -= 1
                out[i] = timed_out()
        return out


def regeneration(pool, tiny_model, late: dict, recipe: str = "games", **overrides):
    """Step 0 of a 2-slot run (one skill) whose candidate is a library environment; returns (core, backend, metrics)."""
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    _, tokenizer = tiny_model
    env = "bank_account_ops" if recipe == "tool_use" else "knapsack_selection"
    config = load_config(overrides={
        "model_card": "tiny-random", "recipe": recipe, "corpus": {"enabled": False},
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "design_attempts": 1,
                     "backfill": False}, "agent": {"max_turns": 2}, **overrides})
    backend = LateBackend(tokenizer, f"```python\n{get_env(env).source()}```\n", late=late)
    core = SelfPlay(config, backend, Validator(pool, config.validation), EnvironmentMemory(config.memory), None)
    _, metrics, _ = core.rollout(0)
    return core, backend, metrics


def test_a_timed_out_screen_fails_the_design(pool, tiny_model):
    """Tool-use recipe: screen_timeout_s 120 reaches the screen's request; the timed-out verdict rejects the candidate
    (reason screen_timeout, stage gates), the other slot's verdict passes."""
    from spade.core.selfplay import SelfPlay
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    _, tokenizer = tiny_model
    config = load_config(overrides={
        "model_card": "tiny-random", "recipe": "tool_use", "corpus": {"enabled": False},
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "design_attempts": 1, "backfill": False}})
    assert config.validation.screen_timeout_s == 120 and config.designer.hint_timeout_s == 120  # the recipe
    backend = LateBackend(tokenizer, f"```python\n{get_env('bank_account_ops').source()}```\n", late={"screen": 1})
    core = SelfPlay(config, backend, Validator(pool, config.validation), EnvironmentMemory(config.memory), None)
    core.clock.start_step()
    slots, _ = core.design(0)
    assert backend.limits["screen"] == {120.0}
    assert [slot.valid for slot in slots] == [False, True]
    (report,) = slots[0].reports
    assert (report["reason"], report["stage"], report["screen_verdict"]) == ("screen_timeout", "gates", "timeout")


@pytest.mark.parametrize("late, failed, timeouts", [(1, [False, False], 1), (5, [True, False], 5)])
def test_a_hint_is_asked_three_times_then_its_environment_has_none(pool, tiny_model, late, failed, timeouts):
    """Games recipe, hint_timeout_s 120: one late hint request is asked again and succeeds; five late requests (both
    slots' first and second tries, the first slot's third) leave the first slot without a hint, its hint arm
    unplayed and its regret unmeasured; the second slot's third try succeeds."""
    core, backend, metrics = regeneration(pool, tiny_model, {"hint": late})
    slots = core._envs()
    assert backend.limits["hint"] == {120.0}
    assert [slot.hint_failed for slot in slots] == failed
    assert [slot.hint for slot in slots] == ["" if f else "Count carefully." for f in failed]
    assert [bool(slot.hint_returns) for slot in slots] == [not f for f in failed]
    assert [slot.regret is None for slot in slots] == failed
    assert metrics["hint_timeouts"] == timeouts


def test_the_toy_has_no_time_limits():
    toy = load_config("configs/default.yaml")
    assert toy.designer.hint_timeout_s == 0 and toy.designer.hint_params().timeout_s == 0


# ----- the backends -------------------------------------------------------------------------------------------
@dataclass
class Params:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 4
    seed: int = 0
    logprobs: int = 1


class SlowEngine:
    """An engine stand-in: a prompt starting with token 9 answers after 5 s, any other at once (token 7)."""

    async def generate(self, prompt_ids, params, multi_modal_data=None):
        from types import SimpleNamespace

        await asyncio.sleep(5.0 if prompt_ids[0] == 9 else 0.0)
        out = SimpleNamespace(token_ids=[7], text="x", finish_reason="stop", logprobs=[{7: SimpleNamespace(logprob=-1.0)}])
        return SimpleNamespace(outputs=[out])


def test_engine_backend_gives_up_on_a_request_past_its_limit(tiny_model):
    from spade.rlhf.engine import EngineBackend

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        backend = EngineBackend(tiny_model[1])
        backend.add_engine(SlowEngine())
        backend.bind(loop, Params())
        slow_and_fast = [[9, 1], [3, 1]]
        limited = backend.generate(slow_and_fast, SamplingParams(1.0, 1.0, 4, timeout_s=0.3), 0)
        assert [g.finish_reason for g in limited] == ["timeout", "stop"] and limited[0].completion_ids == []
        assert backend.generate([[3, 1]], SamplingParams(1.0, 1.0, 4), 0)[0].completion_ids == [7]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


def test_hf_backend_returns_timeouts_past_the_deadline(tiny_model):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    backend = HFBackend(model, tokenizer)
    prompts = [[1, 5, 9], [1, 4]]
    plain = backend.generate(prompts, SamplingParams(1.0, 1.0, 6), 3)
    roomy = backend.generate(prompts, SamplingParams(1.0, 1.0, 6, timeout_s=600), 3)
    assert [g.completion_ids for g in roomy] == [g.completion_ids for g in plain]
    late = backend.generate(prompts, SamplingParams(1.0, 1.0, 6, timeout_s=1e-9), 3)
    assert [(g.finish_reason, g.completion_ids) for g in late] == [("timeout", [])] * 2
