"""Validation: one realistic candidate per reason code, plus the rejection store."""

from __future__ import annotations

import json

import pytest
from conftest import GOOD_STEP, env_source

from spade.envs.validate import REASONS, Validator, store_rejection

TOOL_ENV = '''
from spade.envs.tool_base import ToolUseBaseEnv

class LampDesk(ToolUseBaseEnv):
    _tools = {
        "set_lamp": {"description": "Switch a lamp.", "parameters": {
            "lamp": {"type": "string", "enum": ["desk", "floor"]}, "on": {"type": "boolean"}},
            "required": ["lamp", "on"]},
    }

    def _setup(self, rng):
        self.state = {"desk": False, "floor": False}
        first = rng.choice(["desk", "floor"])
        self.first = first
        self._user_messages = [f"Turn on the {first} lamp.", "Now turn on the other lamp."]
        self._message_criteria = [lambda s: s[first], {PRESATISFIED}]

    def tool_set_lamp(self, lamp, on):
        self.state[lamp] = on
        return {"lamp": lamp, "on": on}

    def solution(self):
        other = "floor" if self.first == "desk" else "desk"
        return "\\n".join([
            '{"name": "set_lamp", "arguments": {"lamp": "%s", "on": true}}' % self.first,
            '{"name": "set_lamp", "arguments": {"lamp": "%s", "on": true}}' % other,
            "<answer>done</answer>",
        ])
'''


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool)


def test_valid_candidate_with_chatter(validator):
    raw = "Sure! Here is the environment.\n```python\n" + env_source(GOOD_STEP) + "```\nIt is deterministic."
    report = validator.validate(raw)
    assert report.valid and report.reason == "ok" and report.isolation == "bwrap"
    assert report.class_name == "Env" and report.kind == "game"
    assert report.checks == ("intake", "load", "reset_step_contract", "second_seed", "determinism")
    assert any("python" in change for change in report.changes)
    assert set(report.to_dict()) >= {"valid", "reason", "message", "isolation"}


@pytest.mark.parametrize(
    "source, reason, fragment",
    [
        ("def helper(:\n    pass\n", "syntax_error", "line 1"),
        ("def helper():\n    return 1\n", "no_env_class", ""),
        ("import nonexistent_module_xyz\n" + env_source(GOOD_STEP), "load_failed", "ModuleNotFoundError"),
        (env_source(GOOD_STEP).replace("self.reset()", "self.reset()\n        1 / 0"), "load_failed", "ZeroDivisionError"),
        (env_source(GOOD_STEP).replace('{{"turn": 0}}'.format(), '{"turn": 0}, 3'), "reset_failed", "reset()"),
        (env_source('        return "x", 0.0, False, False'), "step_failed", "5-tuple"),
        (env_source('        return "x", 2.0, False, False, {}'), "reward_out_of_range", "2.0"),
        (env_source('        return "x", -0.5, True, False, {}'), "reward_out_of_range", "-0.5"),
        (env_source('        return "x", float("nan"), True, False, {}'), "step_failed", "not finite"),
        (env_source("        while True:\n            pass"), "step_failed", "timeout"),
        (env_source('        import time\n        return str(time.perf_counter_ns()), 0.0, False, False, {}'),
         "nondeterministic", "fresh instance"),
        (env_source(GOOD_STEP).replace("self.turn = 0", "self.turn = 0\n        self.resets = getattr(self, 'resets', 0) + 1")
         .replace('return "Guess a digit', 'return str(self.resets) + "Guess a digit'), "nondeterministic", "twice"),
    ],
)
def test_rejections(validator, source, reason, fragment):
    report = validator.validate(source)
    assert not report.valid
    assert report.reason == reason, report.message
    assert reason in REASONS
    assert fragment in report.message


def test_valid_tool_use_candidate(validator):
    report = validator.validate(TOOL_ENV.replace("{PRESATISFIED}", "lambda s: s['desk'] and s['floor']"))
    assert report.valid, report.message
    assert report.kind == "tool_use" and "reset_gate" in report.checks


PRESATISFIED = "lambda s: s['floor'] or True"  # True on every fresh state
SOME_SEEDS = "lambda s: s['ceiling'] if first == 'desk' else False"  # raises on the seeds whose first lamp is the desk
ALL_SEEDS = "lambda s: s['ceiling']"  # raises on every seed


@pytest.mark.parametrize("mode, step, expected", [
    # reference (synthetic_game_env.py:487-531): only a raise on every seed rejects; nothing is checked at step 0
    ("lenient", None, ["ok", "ok", "reset_gate_error"]),
    ("lenient", 3, ["ok", "ok", "reset_gate_error"]),
    ("lenient", 0, ["ok", "ok", "ok"]),
    # the paper's text: every criterion evaluates and is False on fresh states, at every step
    ("strict", None, ["reset_gate_presatisfied", "reset_gate_error", "reset_gate_error"]),
    ("strict", 0, ["reset_gate_presatisfied", "reset_gate_error", "reset_gate_error"]),
])
def test_reset_gate_modes(pool, mode, step, expected):
    import random

    from spade.envs.validate import ValidationConfig

    config = ValidationConfig(reset_gate=mode)
    firsts = [random.Random(seed).choice(["desk", "floor"]) for seed in config.reset_gate_seeds]
    assert "desk" in firsts and "floor" in firsts  # SOME_SEEDS raises on some gate seeds, not all
    validator = Validator(pool, config)
    reports = [validator.validate(TOOL_ENV.replace("{PRESATISFIED}", c), step) for c in (PRESATISFIED, SOME_SEEDS, ALL_SEEDS)]
    assert [r.reason for r in reports] == expected, [r.message for r in reports]
    assert all(r.valid == (r.reason == "ok") for r in reports)
    assert all(("reset_gate" in r.checks) == (r.valid and not (mode == "lenient" and step == 0)) for r in reports)
    if mode == "lenient" and step != 0:
        assert "every reset gate seed" in reports[2].message and "KeyError" in reports[2].message
    assert ValidationConfig().reset_gate == "lenient"  # the reference's gate is the default


def test_rejected_candidate_is_stored(validator, tmp_path):
    raw = env_source('        return "x", 2.0, False, False, {}')
    report = validator.validate(raw)
    folder = store_rejection(tmp_path, raw, report)
    assert (folder / "raw.txt").read_text() == raw
    assert "class Env" in (folder / "code.py").read_text()
    stored = json.loads((folder / "report.json").read_text())
    assert stored["reason"] == "reward_out_of_range" and stored["valid"] is False
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporaries


def test_determinism_check_is_a_switch(pool):
    from spade.envs.validate import ValidationConfig

    source = env_source('        import time\n        return str(time.perf_counter_ns()), 0.0, False, False, {}')
    report = Validator(pool, ValidationConfig(check_determinism=False)).validate(source)
    assert report.valid and "determinism" not in report.checks


class _RecordingPool:
    """The shared pool, recording what each ``open`` was given."""

    def __init__(self, pool):
        self.pool, self.level, self.config, self.opens = pool, pool.level, pool.config, []

    def open(self, code, class_name, **kwargs):
        self.opens.append(kwargs.get("compiled"))
        return self.pool.open(code, class_name, **kwargs)


@pytest.mark.parametrize("with_set", [False, True])
def test_a_validation_compiles_once_for_all_its_episodes(pool, with_set):
    recording = _RecordingPool(pool)
    source = env_source(GOOD_STEP)
    if with_set:  # a constant set: its order would follow the host's hash seed, so each episode compiles
        source = source.replace("self.turn = 0\n", "self.turn = 0\n        self.kinds = sorted({'a', 'b', 'c'})\n", 1)
    report = Validator(recording).validate(source)
    assert report.valid and "determinism" in report.checks, report.message
    assert len(recording.opens) == 2 and recording.opens[0] == recording.opens[1]
    assert (recording.opens[0] is None) == with_set
