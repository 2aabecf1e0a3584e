"""Admission gates of the validator (solution replay, do-nothing policy, held-out n-gram overlap).

Each gate is tested on small hand-written environments that pass and fail it, through the real sandbox.
Expected shares of the overlap gate are counted by hand in the comments.
"""

from __future__ import annotations

import json

import pytest
from conftest import GOOD_STEP, env_source

from spade.configtools import ConfigError, from_dict
from spade.envs.validate import (
    REASONS,
    ValidationConfig,
    Validator,
    build_ngram_index,
    defines_method,
    load_heldout_texts,
    ngram_overlap,
    ngrams,
    write_heldout_texts,
)

GOOD = env_source(GOOD_STEP)
WRONG_SOLUTION = GOOD.replace("return str(self.target)", "return str((self.target + 1) % 10)")
NO_SOLUTION = GOOD.replace("def solution(self):", "def answer_key(self):")
SOLUTION_RAISES = GOOD.replace("return str(self.target)", "return str(1 // 0)")
# Wins on an empty turn: the do-nothing policy gets reward 1.
IDLE_WINS = env_source('        won = action.strip() == ""\n'
                       '        return "ok", float(won), won, self.turn >= self.max_turns, {}')
IDLE_PARTIAL = env_source('        return "ok", (REWARD if action.strip() == "" else 0.0), True, False, {}')

TOOL_ENV = '''
from spade.envs.tool_base import ToolUseBaseEnv

class DeskLamp(ToolUseBaseEnv):
    _tools = {
        "set_lamp": {"description": "Switch a lamp.", "parameters": {
            "lamp": {"type": "string", "enum": ["desk", "floor"]}, "on": {"type": "boolean"}},
            "required": ["lamp", "on"]},
    }

    def _setup(self, rng):
        self.state = {"desk": False, "floor": False}
        self.lamp = rng.choice(["desk", "floor"])
        self._user_messages = [f"Turn on the {self.lamp} lamp."]
        self._message_criteria = [lambda s: s[self.lamp]]

    def tool_set_lamp(self, lamp, on):
        self.state[lamp] = on
        return {"lamp": lamp, "on": on}
EXTRA
'''
TOOL_SOLUTION = '''
    def solution(self):
        return '{"name": "set_lamp", "arguments": {"lamp": "%s", "on": true}}\\n<answer>done</answer>' % self.lamp
'''
TOOL_GOOD = TOOL_ENV.replace("EXTRA", TOOL_SOLUTION)
TOOL_NO_SOLUTION = TOOL_ENV.replace("EXTRA", "")  # inherits ToolUseBaseEnv.solution (NotImplementedError)
# Accepts "done" at once: the do-nothing answer wins.
TOOL_IDLE_WINS = TOOL_ENV.replace("EXTRA", TOOL_SOLUTION + "\n    def _check_answer(self, answer):\n        return True\n")

# 20 words -> 20 - 13 + 1 = 8 distinct 13-grams.
HELDOUT = ("alice has three red marbles and twice as many blue marbles as green ones "
           "while bob owns seven yellow marbles")
HELDOUT_16 = " ".join(HELDOUT.split()[:16])  # 16 words -> 13-grams starting at 0..3: 4 of the 8


def observation_with(text: str) -> str:
    return GOOD.replace('return "Guess a digit', 'return "' + text + '. Guess a digit')


def gated(pool, **settings) -> Validator:
    return Validator(pool, ValidationConfig(**settings))


@pytest.fixture(scope="module")
def solution_validator(pool):
    return gated(pool, solution_gate=True)


@pytest.fixture(scope="module")
def idle_validator(pool):
    return gated(pool, idle_gate=True)


def test_reason_codes_are_registered():
    assert {"no_solution", "solution_failed", "idle_too_high", "eval_overlap"} <= set(REASONS)
    assert len(set(REASONS)) == len(REASONS)


def test_gates_are_off_by_default(pool):
    config = ValidationConfig()
    assert (config.solution_gate, config.idle_gate, config.overlap_gate) == (False, False, False)
    # A candidate that fails every gate is still valid under the paper's validation.
    report = Validator(pool).validate(IDLE_WINS.replace("def solution(self):", "def other(self):"))
    assert report.valid, report.message
    assert report.checks == ("intake", "load", "reset_step_contract", "second_seed", "determinism")


def test_solution_gate_accepts_a_working_solution(solution_validator):
    report = solution_validator.validate(GOOD)
    assert report.valid, report.message
    assert report.checks[-1] == "solution_gate"


def test_solution_gate_accepts_a_tool_use_solution(solution_validator):
    report = solution_validator.validate(TOOL_GOOD)
    assert report.valid, report.message
    assert report.checks[-2:] == ("determinism", "solution_gate")


@pytest.mark.parametrize(
    "source, reason, fragment",
    [
        (WRONG_SOLUTION, "solution_failed", "episode return 0"),
        (SOLUTION_RAISES, "solution_failed", "ZeroDivisionError"),
        (NO_SOLUTION, "no_solution", "defines no solution()"),
        (TOOL_NO_SOLUTION, "no_solution", "DeskLamp"),
    ],
)
def test_solution_gate_rejections(solution_validator, source, reason, fragment):
    report = solution_validator.validate(source)
    assert not report.valid
    assert report.reason == reason, report.message
    assert fragment in report.message


def test_solution_gate_skips_without_switch(pool):
    assert Validator(pool).validate(WRONG_SOLUTION).valid


def test_idle_gate(idle_validator):
    assert idle_validator.validate(GOOD).valid  # an empty guess is wrong: return 0
    report = idle_validator.validate(IDLE_WINS)
    assert report.reason == "idle_too_high" and "scored 1" in report.message


@pytest.mark.parametrize("reward, valid", [("0.5", False), ("0.4", True)])
def test_idle_gate_threshold_is_strict(idle_validator, reward, valid):
    # The do-nothing turn terminates at once with the given reward; the gate needs a return < 0.5.
    report = idle_validator.validate(IDLE_PARTIAL.replace("REWARD", reward))
    assert report.valid is valid, report.message
    if not valid:
        assert report.reason == "idle_too_high"


def test_idle_gate_tool_use(idle_validator):
    assert idle_validator.validate(TOOL_GOOD).valid  # "done" before any tool call loses
    report = idle_validator.validate(TOOL_IDLE_WINS)
    assert report.reason == "idle_too_high" and "<answer>done</answer>" in report.message


def test_ngram_index_by_hand():
    assert ngrams("A b, c! d", 2) == {"a b", "b c", "c d"}
    index = build_ngram_index([HELDOUT, "too short"], n=13)
    assert index.sizes == (8, 0)
    assert ngram_overlap(index, "x " + HELDOUT_16 + " y") == (0.5, 0, 4)
    assert ngram_overlap(index, ["unrelated words only", HELDOUT.upper()]) == (1.0, 0, 8)
    assert ngram_overlap(index, "nothing in common here") == (0.0, -1, 0)
    with pytest.raises(ValueError, match="no held-out text has 13 words"):
        build_ngram_index(["short text"], n=13)
    with pytest.raises(ValueError, match="n must be"):
        build_ngram_index([HELDOUT], n=0)


@pytest.mark.parametrize(
    "source, threshold, reason",
    [
        (GOOD, 0.5, "ok"),
        (observation_with(HELDOUT), 0.5, "eval_overlap"),  # share 8/8
        (observation_with(HELDOUT_16), 0.5, "eval_overlap"),  # share 4/8 = 0.5, not below 0.5
        (observation_with(HELDOUT_16), 0.6, "ok"),
        ("# " + HELDOUT + "\n" + GOOD, 0.5, "eval_overlap"),  # in the source only
    ],
)
def test_overlap_gate(pool, source, threshold, reason):
    validator = gated(pool, overlap_gate=True, overlap_texts=[HELDOUT], overlap_threshold=threshold)
    report = validator.validate(source)
    assert report.reason == reason, report.message
    if reason == "ok":
        assert report.checks[-1] == "overlap_gate"
    else:
        assert "held-out item 0" in report.message


def test_overlap_gate_configurable_n(pool):
    # With n = 3, the 3-word item "blue marbles everywhere" is fully contained in the observation.
    validator = gated(pool, overlap_gate=True, overlap_n=3, overlap_texts=["blue marbles everywhere"])
    assert validator.validate(observation_with("Blue marbles everywhere")).reason == "eval_overlap"
    assert validator.validate(GOOD).valid


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".txt"])
def test_heldout_files(tmp_path, pool, suffix):
    path = tmp_path / f"heldout{suffix}"
    if suffix == ".jsonl":
        write_heldout_texts(path, ["first item", HELDOUT])
        assert path.read_text().splitlines()[1] == json.dumps({"text": HELDOUT})
    elif suffix == ".json":
        path.write_text(json.dumps(["first item", {"text": HELDOUT}]))
    else:
        path.write_text("first item\n\n" + HELDOUT + "\n")
    assert load_heldout_texts(path) == ["first item", HELDOUT]
    validator = gated(pool, overlap_gate=True, overlap_texts_path=str(path))
    assert validator.validate(observation_with(HELDOUT)).reason == "eval_overlap"


def test_overlap_config_errors(tmp_path, pool):
    with pytest.raises(ConfigError, match="neither overlap_texts_path nor overlap_texts"):
        from_dict(ValidationConfig, {"overlap_gate": True}, "validation")
    with pytest.raises(ConfigError, match="overlap_threshold"):
        from_dict(ValidationConfig, {"overlap_threshold": 1.5}, "validation")
    with pytest.raises(ValueError, match="is not a file"):
        gated(pool, overlap_gate=True, overlap_texts_path=str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "no text key"}\n')
    with pytest.raises(ValueError, match="item 0"):
        load_heldout_texts(bad)


def test_defines_method_follows_module_bases():
    code = "class Base:\n    def solution(self):\n        return ''\n\nclass Env(Base):\n    pass\n\nclass Other:\n    pass\n"
    assert defines_method(code, "Env", "solution")
    assert not defines_method(code, "Other", "solution")
    assert not defines_method(TOOL_NO_SOLUTION, "DeskLamp", "solution")


def test_heldout_library_texts_feed_the_overlap_gate(pool, tmp_path):
    from spade.envs.library.registry import get_env
    from spade.envs.validate import heldout_library_texts

    texts = heldout_library_texts(pool, ["crt_residue_puzzle"], [0, 1])
    assert len(texts) == 2 and texts[0] != texts[1]
    path = write_heldout_texts(tmp_path / "heldout.jsonl", texts)
    validator = gated(pool, overlap_gate=True, overlap_texts_path=str(path))
    # The held-out environment itself is rejected; a different environment is admitted.
    assert validator.validate(get_env("crt_residue_puzzle").source()).reason == "eval_overlap"
    assert validator.validate(GOOD).valid
