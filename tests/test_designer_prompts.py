"""Designer and agent prompts: every contract item is demanded, seeds/documents appear, hints parse."""

from __future__ import annotations

import re

import pytest

from spade.designer import prompts as pr
from spade.designer.skills import DOMAINS, SKILLS, VARIANTS
from spade.envs.tool_base import DECLINE_TOOL, ToolUseBaseEnv

GAME_FLAVOURS = ("puzzle", "game", "interactive")
GOOD = "class GoodSeedEnv:\n    MARKER = 'good-seed-marker-1'\n"
GOOD2 = "class OtherSeedEnv:\n    MARKER = 'good-seed-marker-2'\n"
BAD = "class BadSeedEnv:\n    MARKER = 'bad-seed-marker'\n"
DOC = "The Doppler effect shifts the observed frequency of a moving source; marker-doc-7731."


def user_text(messages) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    assert all(isinstance(m["content"], str) and m["content"] for m in messages)
    return messages[1]["content"]


def full_text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


@pytest.mark.parametrize("flavour", GAME_FLAVOURS)
def test_game_prompts_demand_the_whole_contract(flavour):
    messages = pr.design_prompt(flavour, "spatial_reasoning", None, [], None)
    text = full_text(messages)
    for phrase in (
        "__init__(self, max_turns=20, **kwargs)",
        "reset(self, seed=None) -> tuple[str, dict]",
        "step(self, action: str) -> tuple[str, float, bool, bool, dict]",
        "solution(self) -> str",
        "close(self)",
        "exactly one class",
        "Standard library only",
        "\\boxed{...}",
        "brace-free",
        "without \\boxed{}",  # solution lines are bare answers
        "one per line",
        "reward is a float in [0, 1]",
        "1.0 means full success",
        "terminated = True",
        "truncated = True",
        "max_turns",
        "random.Random(seed)",
        "No print()",
        "fully describe",
        "ONE ```python fenced block",
        SKILLS["spatial_reasoning"].description,
    ):
        assert phrase in text, f"{flavour}: missing {phrase!r}"
    assert "ToolUseBaseEnv" not in text
    # the only python fence mentioned is the requested output format
    assert user_text(messages).count("```python") == 1


def test_each_game_flavour_states_its_own_rules():
    puzzle = full_text(pr.design_prompt("puzzle", "optimization", None, [], None))
    game = full_text(pr.design_prompt("game", "optimization", None, [], None))
    inter = full_text(pr.design_prompt("interactive", "optimization", None, [], None))
    assert "single-turn" in puzzle and "try again" in puzzle
    assert "10-15 turns" in game and "at most 20 turns" in game and "dead ends" in game
    assert "hidden state" in inter and "partial reward" in inter and "probing" in inter
    assert "No document is given" in inter
    for a, b in ((puzzle, game), (game, inter), (puzzle, inter)):
        assert a != b


def test_the_regex_the_game_prompt_suggests_reads_the_first_box():
    text = full_text(pr.design_prompt("puzzle", "mathematical_reasoning", None, [], None))
    pattern = re.search(r're\.search\(r"(.+?)", action\)', text).group(1)
    match = re.search(pattern, "I think \\boxed{42} or maybe \\boxed{7}")
    assert match and match.group(1) == "42"


def test_tool_use_prompt_demands_the_base_class_contract():
    messages = pr.design_prompt("tool_use", "data_retrieval", None, [], None,
                                domain="telecom_accounts", variant="missing_value")
    text = full_text(messages)
    for phrase in (
        "subclass of ToolUseBaseEnv",
        "from spade.envs.tool_base import ToolUseBaseEnv",
        "Do NOT override reset, step",
        "_tools",
        "tool_<tool_name>(self, **arguments)",
        "_setup(self, rng)",
        "self._user_messages",
        "self._message_criteria",
        "solution(self) -> str",
        "one per line",
        "<answer>done</answer>",
        "3-8 task tools",
        "enum",
        "required parameter",
        "1-2 distractor tools",
        "3-5 instructions",
        "4-8",
        "False on a freshly reset state",
        "deterministic",
        "ONE ```python fenced block",
        SKILLS["data_retrieval"].description,
        DOMAINS["telecom_accounts"].description,
        VARIANTS["missing_value"].description,
    ):
        assert phrase in text, f"missing {phrase!r}"
    assert "\\boxed" not in text
    assert "decline_request" not in text  # only the with_irrelevant variant asks for it
    assert user_text(messages).count("```python") == 1


def test_tool_use_defaults_and_variants_differ():
    default = full_text(pr.design_prompt("tool_use", "tool_selection", None, [], None))
    assert VARIANTS["execute"].description in default
    assert "choose a realistic one" in default
    texts = {v: full_text(pr.design_prompt("tool_use", "tool_selection", None, [], None, domain="smart_home", variant=v))
             for v in VARIANTS}
    assert len(set(texts.values())) == len(VARIANTS)
    for v, text in texts.items():
        assert VARIANTS[v].description in text


def test_with_irrelevant_prompt_matches_the_base_class_decline_tool():
    text = full_text(pr.design_prompt("tool_use", "tool_selection", None, [], None,
                                      domain="retail_orders", variant="with_irrelevant"))
    assert '"decline_request": DECLINE_TOOL' in text and "DECLINE_TOOL" in text
    criterion_src = re.search(r"its criterion is (lambda s: .+?)\.\n", text + "\n").group(1)
    criterion = eval(criterion_src)  # our own prompt text, not generated code

    class Env(ToolUseBaseEnv):
        _tools = {"decline_request": DECLINE_TOOL}

        def _setup(self, rng):
            self.state = {}
            self._user_messages = ["Book me a trip to the moon."]
            self._message_criteria = [criterion]

        def solution(self):
            return '{"name": "decline_request", "arguments": {"reason": "no tool"}}\n<answer>done</answer>'

    env = Env()
    assert criterion(env.state) is False  # false on a fresh state (the reset gate)
    env.step('{"name": "decline_request", "arguments": {"reason": "out of scope"}}')
    assert criterion(env.state) is True
    assert env.step("<answer>done</answer>")[1] == 1.0


@pytest.mark.parametrize("flavour,skill", [("interactive", "causal_inference"), ("tool_use", "api_orchestration")])
def test_document_and_seeds_are_included_when_given(flavour, skill):
    extra = {"domain": "file_system", "variant": "execute"} if flavour == "tool_use" else {}
    bare = user_text(pr.design_prompt(flavour, skill, None, [], None, **extra))
    full = user_text(pr.design_prompt(flavour, skill, DOC, [GOOD, GOOD2], BAD, examples="full", **extra))
    assert "marker-doc-7731" in full and "<document>" in full and "concept from this document" in full
    assert "good-seed-marker-1" in full and "good-seed-marker-2" in full
    assert "bad-seed-marker" in full and "Do not make one like it" in full
    assert full.index("good-seed-marker-1") < full.index("bad-seed-marker")
    for marker in ("marker-doc-7731", "<document>", "good-seed", "bad-seed", "Good example", "Example to avoid"):
        assert marker not in bare
    assert full.count("```python") == 1  # seeds are shown inside tags, not as extra fences
    only_negative = user_text(pr.design_prompt(flavour, skill, None, None, BAD, examples="full", **extra))
    assert "bad-seed-marker" in only_negative and "Good example" not in only_negative


def test_reference_examples_cut_the_positives_and_name_the_negative_only():
    """memory.examples 'reference' (env_memory.py:125-151): header with skill, win rate and regret, code cut to
    example_chars; the negative by its class name and why, without code."""
    from spade.designer.memory import MemoryRecord

    tail = "# good-tail-marker\n"
    long_code = "class LongGood:\n" + "".join(f"    A{i:04d} = {i}\n" for i in range(200)) + tail
    assert len(long_code) > 2000
    good = MemoryRecord("s00004-optimization-1", long_code, "optimization", "interactive", 0.375, 0.25, 4)
    short = MemoryRecord("library:x", GOOD2, "optimization", "interactive", None, None, -1)
    bad_code = BAD + "    def reset(self, seed=None):\n        return 'obs', {}\n    def step(self, a):\n" \
        "        return 'obs', 0.0, True, False, {}\n"
    bad = MemoryRecord("s00000-optimization-0", bad_code, "optimization", "interactive", 0.96, 0.0, 0)
    text = user_text(pr.design_prompt("interactive", "optimization", None, [good, short], bad))
    assert ("Good example 1 (skill: Optimization, agent win rate 0.38, hint regret 0.25): an earlier environment "
            "whose difficulty suited the agent, its first 2000 characters below.") in text
    shown = text.split("<good_example>\n", 1)[1].split("\n</good_example>", 1)[0]
    assert shown == long_code[:2000].rstrip() and "good-tail-marker" not in text
    assert "Good example 2 (skill: Optimization, agent win rate not measured, hint regret not measured)" in text
    assert "good-seed-marker-2" in text and "its code below" in text  # short enough: shown whole
    assert ("Example to avoid: the earlier environment BadSeedEnv was too easy (agent win rate 0.96). "
            "Do not make one like it.") in text
    assert "bad-seed-marker" not in text and "<bad_example>" not in text
    hard = MemoryRecord("s00000-optimization-0", "x = 1\n", "optimization", "interactive", 0.02, 0.0, 0)
    text = user_text(pr.design_prompt("interactive", "optimization", None, [], hard, example_chars=50))
    assert "the earlier environment s00000-optimization-0 was too hard (agent win rate 0.02)" in text
    full = user_text(pr.design_prompt("interactive", "optimization", None, [good], bad, examples="full"))
    assert long_code.strip() in full and "bad-seed-marker" in full and "agent win rate" not in full
    with pytest.raises(ValueError, match="memory.examples"):
        pr.design_prompt("interactive", "optimization", None, [good], bad, examples="short")


def test_design_prompt_rejects_mismatched_arguments():
    with pytest.raises(ValueError, match="tool_use skill"):
        pr.design_prompt("game", "error_recovery", None, [], None)
    with pytest.raises(ValueError, match="game skill"):
        pr.design_prompt("tool_use", "optimization", None, [], None)
    with pytest.raises(ValueError, match="tool_use flavour only"):
        pr.design_prompt("puzzle", "optimization", None, [], None, domain="smart_home")
    with pytest.raises(ValueError, match="unknown flavour"):
        pr.design_prompt("arcade", "optimization", None, [], None)
    with pytest.raises(KeyError):
        pr.design_prompt("tool_use", "error_recovery", None, [], None, variant="chaos")


def test_hint_prompts_see_the_code_and_ask_for_the_right_hint():
    code = "class HintTarget:\n    SECRET_RULE = 'hint-code-marker'\n"
    game = pr.hint_prompt(code, "game")
    tool = pr.hint_prompt(code, "tool_use")
    for messages in (game, tool):
        text = user_text(messages)
        assert "hint-code-marker" in text and "<hint>...</hint>" in text
    game_text, tool_text = full_text(game), full_text(tool)
    assert "\\boxed{...}" in game_text and "Never state the answer" in game_text and "insight" in game_text
    assert "value-free plan" in tool_text and "Do not include ids" in tool_text and "\\boxed" not in tool_text
    assert full_text(pr.hint_prompt(code, "interactive")) == game_text  # every game flavour: same hint request
    with pytest.raises(ValueError):
        pr.hint_prompt(code, "arcade")


@pytest.mark.parametrize("raw,expected", [
    ("  Try the smallest case first.  ", "Try the smallest case first."),
    ("Intro text <hint>\nUse parity.\n</hint> trailing", "Use parity."),
    ("<think>maybe <hint>wrong</hint></think>\n<hint>Right one.</hint>", "Right one."),
    ("<THINK>scratch</THINK>Plain hint.", "Plain hint."),
    ("leftover reasoning</think>\nAfter the tag.", "After the tag."),
    ("<think>never closed, ran out of tokens", ""),
    ("<think>unclosed reasoning <hint>Kept hint.</hint>", "Kept hint."),
    ("<hint>Unclosed hint runs to the end.  ", "Unclosed hint runs to the end."),
    ("<Hint>Case does not matter.</HINT>", "Case does not matter."),
    ("<hint>first</hint> <hint>second</hint>", "first"),
    ("", ""),
])
def test_extract_hint_cases(raw, expected):
    assert pr.extract_hint(raw) == expected


def test_extract_hint_caps_length():
    long = "<hint>" + " ".join(["word"] * 500) + "</hint>"
    out = pr.extract_hint(long, max_chars=100)
    assert len(out) <= 100 and out.endswith("word") and not out.endswith(" ")
    assert len(pr.extract_hint(long)) <= pr.DEFAULT_HINT_CHARS
    unbroken = "x" * 300
    assert pr.extract_hint(unbroken, max_chars=50) == "x" * 50
    with pytest.raises(ValueError):
        pr.extract_hint("hint", max_chars=0)


def test_agent_system_prompts():
    game = pr.agent_system_prompt("game")
    assert "\\boxed{" in game and "first" in game
    assert pr.agent_system_prompt("puzzle") == game == pr.agent_system_prompt("interactive")
    tool = pr.agent_system_prompt("tool_use")
    assert '{"name":' in tool and '"arguments"' in tool and "<answer>done</answer>" in tool
    assert "one call per turn" in tool and "\\boxed" not in tool
    schema = [{"type": "function", "function": {"name": "lookup_order_marker", "parameters": {}}}]
    listed = pr.agent_system_prompt("tool_use", tools=schema)
    assert "lookup_order_marker" in listed and "lookup_order_marker" not in tool
    with pytest.raises(ValueError):
        pr.agent_system_prompt("chess")


def test_with_hint_marks_the_hint_in_the_first_observation():
    observation = "You see three doors."
    out = pr.with_hint(observation, "  Count the doors.  ")
    assert out.startswith(observation)
    assert pr.HINT_MARK_START in out and pr.HINT_MARK_END in out
    assert out.index(pr.HINT_MARK_START) < out.index("Count the doors.") < out.index(pr.HINT_MARK_END)
    assert pr.with_hint(observation, "") == observation
    assert pr.with_hint(observation, "   ") == observation


def test_flavour_kind():
    assert [pr.flavour_kind(f) for f in pr.DESIGN_FLAVOURS] == ["game", "game", "game", "tool_use"]
    with pytest.raises(ValueError):
        pr.flavour_kind("tool-use")
