"""Issue 32: the reference's empty-slot top-up (``selfplay.top_up``), with a scripted designer.

Reference behaviour (orchestrator.py:2299-2301, spade_rollout.py:458, 487): at a step between regenerations,
whenever fewer environments exist than slots, the designer generates the missing ones (5 attempts each); hints and
the hint arm run at regeneration steps only (orchestrator.py:2383-2386). Ours keeps the slot's skill and id.

Set-up: 1 skill x 2 slots, k = 3, design_attempts 1, global batch 4. Step 0: the first design is valid, the
second is not, so slot 1 is empty. Step 1 (no regeneration): 'window' designs again for slot 1 only (valid);
'none' leaves it empty. Step 3 regenerates: the set closes.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from scripted_backend import BudgetBackend, role_of
from spade.config import load_config
from spade.core.selfplay import SelfPlay, SelfPlayState
from spade.designer.memory import EnvironmentMemory
from spade.envs.library.registry import get_env
from spade.envs.validate import Validator

VALID = "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
INVALID = "I would rather not write code today."
HINT = "<hint>Pick the items with the best value per weight.</hint>"


class CountingBackend(BudgetBackend):
    """BudgetBackend that also counts the design prompts it answered."""

    def __init__(self, tokenizer, designs: list):
        super().__init__(tokenizer, {"design": list(designs), "hint": HINT, "agent": "\\boxed{0}"})
        self.design_texts: list = []

    @property
    def designs(self) -> int:
        return len(self.design_texts)

    def generate(self, prompts, params, seed):
        texts = [self.tokenizer.decode(p) for p in prompts]
        self.design_texts += [text for text in texts if role_of(text) == "design"]
        return super().generate(prompts, params, seed)


def _config(top_up: str, memory: dict | None = None, **selfplay):
    return load_config(overrides={
        "model_card": "tiny-random", "corpus": {"enabled": False}, "agent": {"max_turns": 1},
        "memory": {"seed_library": False, **(memory or {})},
        "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 3,
                     "total_steps": 5, "design_attempts": 1, "top_up": top_up, **selfplay},
        "train": {"global_batch": 4}})


class StepValidator(Validator):
    """Validator recording the step each candidate is validated for (the lenient reset gate skips step 0)."""

    def __init__(self, pool):
        super().__init__(pool)
        self.steps: list = []

    def validate(self, raw, step=None):
        self.steps.append(step)
        return super().validate(raw, step)


def _core(pool, tokenizer, config, designs, state=None, memory=None):
    backend = CountingBackend(tokenizer, designs)
    memory = memory if memory is not None else EnvironmentMemory(config.memory)
    return SelfPlay(config, backend, StepValidator(pool), memory, None, state=state), backend


def test_top_up_fills_an_empty_slot_at_the_next_step(pool, tiny_model):
    _, tokenizer = tiny_model
    config = _config("window")
    assert config.selfplay.top_up == "window" and load_config().selfplay.top_up == "window"  # the default
    core, backend = _core(pool, tokenizer, config, [VALID, INVALID, VALID, VALID, VALID])
    _, metrics0, _ = core.rollout(0)
    first, empty = core._envs()
    assert first.valid and not empty.valid and metrics0["empty_share"] == 0.5 and backend.designs == 2
    assert "top_up_slots" not in metrics0 and metrics0["no_hint_plays"] == 4  # 4 / 1 valid slot

    samples1, metrics1, _ = core.rollout(1)
    first, late = core._envs()
    assert backend.designs == 3  # one more design, for the empty slot only
    assert (metrics1["top_up_slots"], metrics1["top_up_filled"], metrics1["top_up_attempts"]) == (1, 1, 1)
    assert late.valid and late.filled_step == 1 and late.step == 0 and late.env_id == empty.env_id
    assert late.skill == empty.skill and late.attempts == 2 and len(late.reports) == 2
    assert late.hint == "" and late.hint_returns == [] and late.regret is None  # no hint arm off the regeneration step
    assert (late.regen_episodes, late.episodes, first.episodes) == (0, 2, 4 + 2)  # m = 4 / 2 slots from step 1 on
    assert metrics1["no_hint_plays"] == 2 and metrics1["filled_slots"] == 2
    assert {s.role for s in samples1} == {"agent"} and late.designer_sample is not None

    _, metrics2, _ = core.rollout(2)
    assert "top_up_slots" not in metrics2 and backend.designs == 3  # nothing empty: no designer call

    assert core.pending_designer_groups(core._envs()) == [1]  # what the OpenRLHF coordinator plans for a flush
    samples3, metrics3, closed = core.rollout(3)  # regeneration: set 0 closes; only the step-0 design trains
    designer = [s for s in samples3 if s.role == "designer"]
    assert len(designer) == 1 and designer[0].group == "set0:" + first.skill
    assert designer[0].token_ids == first.designer_sample["token_ids"]  # (the reference rewards a top-up 0)
    rows = {row["env_id"]: row for row in closed}
    assert rows[late.env_id]["filled_step"] == 1 and rows[late.env_id]["episodes"] == 4
    assert rows[late.env_id]["designer_reward"] is not None
    # memory.examples 'reference' (the default) reaches the prompts of step 3: the agent never won the first
    # environment (win rate 0), so it is the negative example, named by its class, without its code
    name = get_env("knapsack_selection").source().split("class ", 1)[1].split("(", 1)[0].split(":", 1)[0]
    assert all(f"Example to avoid: the earlier environment {name} was too hard (agent win rate 0.00)" in text
               and "<bad_example>" not in text for text in backend.design_texts[3:])
    assert core.validator.steps == [0, 0, 1, 3, 3]  # each design is validated with the step it was made at
    # memory.win_rate 'regen_positive' cannot measure a late slot: it stays out of the memory, as in the reference
    assert [r.env_id for r in core.memory.records] == [first.env_id]


def test_none_leaves_the_slot_empty_for_the_window(pool, tiny_model):
    _, tokenizer = tiny_model
    core, backend = _core(pool, tokenizer, _config("none", memory={"examples": "full"}), [VALID, INVALID, VALID, VALID])
    for step in range(3):
        _, metrics, _ = core.rollout(step)
        assert "top_up_slots" not in metrics and metrics["filled_slots"] == 1
    assert backend.designs == 2 and not core._envs()[1].valid
    core.rollout(3)  # memory.examples 'full': the negative example's whole code in the prompts
    code = get_env("knapsack_selection").source().strip()
    assert backend.designs == 4 and all(f"<bad_example>\n{code}\n</bad_example>" in t for t in backend.design_texts[2:])


def test_a_late_slot_enters_the_memory_when_window_win_measures_it(pool, tiny_model):
    _, tokenizer = tiny_model
    config = _config("window", memory={"win_rate": "window_win"})
    core, _ = _core(pool, tokenizer, config, [VALID, INVALID, VALID, VALID, VALID])
    for step in range(4):
        core.rollout(step)
    late = [r for r in core.memory.records if r.env_id.endswith("-1")]
    assert len(late) == 1 and late[0].win_rate is not None and late[0].regret is None


def test_backfilled_sets_never_top_up(pool, tiny_model):
    """The toy backfills every empty slot at the regeneration step, so 'window' costs it no designer call."""
    _, tokenizer = tiny_model
    core, backend = _core(pool, tokenizer, _config("window", backfill=True), [INVALID, INVALID])
    for step in range(3):
        _, metrics, _ = core.rollout(step)
        assert "top_up_slots" not in metrics
    assert backend.designs == 2 and all(s.valid and s.source.startswith("backfill") for s in core._envs())


def test_a_resumed_run_repeats_the_top_up(pool, tiny_model, tmp_path):
    """Resuming from the state written after step 0 (JSON round trip) gives the same top-up and steps."""
    _, tokenizer = tiny_model
    config = _config("window")
    straight, _ = _core(pool, tokenizer, config, [VALID, INVALID, VALID, VALID, VALID])
    runs = [straight.rollout(step) for step in range(4)]
    first, _ = _core(pool, tokenizer, config, [VALID, INVALID])
    first.rollout(0)
    state = SelfPlayState(**json.loads(json.dumps(asdict(first.state))))
    memory = EnvironmentMemory.load(first.memory.save(tmp_path / "memory.json"), config.memory)
    resumed, backend = _core(pool, tokenizer, config, [VALID, VALID, VALID], state=state, memory=memory)
    again = [resumed.rollout(step) for step in range(1, 4)]
    assert backend.designs == 3  # the top-up at step 1 and the two designs of step 3
    for (samples, metrics, closed), (samples2, metrics2, closed2) in zip(runs[1:], again):
        assert [(s.role, s.token_ids, s.advantage, s.weight) for s in samples] == \
            [(s.role, s.token_ids, s.advantage, s.weight) for s in samples2]
        assert untimed(metrics) == untimed(metrics2) and drop_elapsed(closed) == drop_elapsed(closed2)


def untimed(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if "seconds" not in k and not k.startswith("phase_")}


def drop_elapsed(rows: list) -> list:
    return [{**row, "reports": [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in row["reports"]]}
            for row in rows]


@pytest.mark.parametrize("value", ["always", ""])
def test_a_bad_top_up_value_names_the_key(value):
    from spade.configtools import ConfigError

    with pytest.raises(ConfigError, match=r"selfplay\.top_up.*'window', 'none'"):
        load_config(overrides={"selfplay": {"top_up": value}})
