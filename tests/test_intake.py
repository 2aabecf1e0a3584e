"""Tests for spade.envs.intake: raw designer output -> clean source + change report."""

import ast

import pytest

from spade.envs.intake import (REASONS, IntakeError, IntakeResult, extract_code, find_env_class,
                               intake, repair_fstring_braces, strip_think)

GAME_ENV = '''import random


class GuessEnv:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(1, 10)
        return "Guess a number from 1 to 10.", {}

    def step(self, action):
        done = action.strip() == str(self.target)
        return ("Correct!" if done else "Wrong."), float(done), done, False, {}

    def solution(self):
        return str(self.target)

    def close(self):
        pass
'''

TOOL_ENV = '''from spade.envs.tool_base import ToolUseBaseEnv


class LookupEnv(ToolUseBaseEnv):
    def tool_lookup(self, key: str) -> str:
        return {"a": "1"}.get(key, "missing")

    def solution(self):
        return "1"
'''


def fenced(code, tag="python"):
    return f"```{tag}\n{code}```"


# ---------------------------------------------------------------- strip_think
def test_strip_think_removes_closed_block():
    text, changed = strip_think("<think>I should write a class.</think>\nHere it is.")
    assert (text, changed) == ("\nHere it is.", True)


def test_strip_think_leaves_plain_text_alone():
    assert strip_think("no reasoning here") == ("no reasoning here", False)


def test_strip_think_stray_close_drops_everything_before_it():
    raw = "plan: use a dict\nmore plan</think>\nAnswer:\n```python\nx = 1\n```"
    text, changed = strip_think(raw)
    assert changed and text == "\nAnswer:\n```python\nx = 1\n```"


def test_strip_think_unclosed_opener_keeps_from_python_fence():
    raw = "Intro.\n<think>hmm, let me draft\n```python\nclass A: pass\n```\n"
    assert strip_think(raw) == ("Intro.\n```python\nclass A: pass\n```\n", True)


def test_strip_think_unclosed_opener_without_fence_drops_rest():
    assert strip_think("Sure.<think>thinking forever and then truncat") == ("Sure.", True)


# ---------------------------------------------------------------- extract_code
def test_extract_chatty_preamble_and_explanation():
    raw = ("Sure! Here is the environment you asked for:\n\n" + fenced(GAME_ENV)
           + "\n\nThis environment picks a random number; the agent must guess it.\n")
    code, notes = extract_code(raw)
    assert code == GAME_ENV
    assert notes == ["took first ```python block (1 fenced block(s) found)"]


def test_extract_takes_first_of_two_python_blocks():
    raw = ("Environment:\n" + fenced(GAME_ENV) + "\nUsage example:\n"
           + fenced("env = GuessEnv()\nprint(env.reset(seed=0))\n"))
    code, notes = extract_code(raw)
    assert code == GAME_ENV
    assert notes == ["took first ```python block (2 fenced block(s) found)"]


def test_extract_tolerates_tag_variants_and_tilde_fences():
    for opener in ("``` Python", "```py", "~~~python"):
        raw = f"text\n{opener}\nx = 1\n{opener[:3]}\nmore text"
        assert extract_code(raw)[0] == "x = 1\n", opener


def test_extract_prefers_python_block_over_other_tags():
    raw = "Output looks like:\n```text\nGuess: 5\n```\n" + fenced(GAME_ENV)
    assert extract_code(raw)[0] == GAME_ENV


def test_extract_untagged_block_with_class():
    raw = "Run:\n```\npip install nothing\n```\nCode:\n```\n" + GAME_ENV + "```\n"
    code, notes = extract_code(raw)
    assert code == GAME_ENV
    assert "untagged" in notes[0]


def test_extract_unclosed_fence_takes_rest():
    raw = "Here you go:\n```python\n" + GAME_ENV
    code, notes = extract_code(raw)
    assert code == GAME_ENV
    assert notes == ["took everything after the unclosed fence on line 2"]


def test_extract_no_fences_returns_whole_text_unchanged():
    assert extract_code(GAME_ENV) == (GAME_ENV, [])


def test_extract_no_fences_drops_leading_prose():
    code, notes = extract_code("Here is my environment.\n\n" + GAME_ENV)
    assert code == GAME_ENV
    assert notes == ["dropped 2 line(s) of prose before the code"]


def test_extract_removes_stray_fence_lines():
    raw = "```python\n```python\nimport random\n```\n"
    # first fence opens, the duplicated opener is content, the last one closes
    code, notes = extract_code(raw)
    assert code == "import random\n"
    assert notes[-1] == "removed 1 stray fence line(s)"


def test_extract_keeps_fence_lines_inside_strings_of_valid_code():
    code = 'PROMPT = """Reply like:\n```\nanswer\n```\n"""\n'
    assert extract_code(code) == (code, [])


def test_extract_extends_block_past_fence_inside_a_prompt_string():
    env = GAME_ENV.replace('"Guess a number from 1 to 10."',
                           '"""Reply in a block:\n```\n5\n```\n"""')
    raw = "Here is the env:\n```python\n" + env + "```\nEnjoy."
    code, notes = extract_code(raw)
    assert code == env
    assert notes[1].startswith("extended the block to the fence on line ")


# ---------------------------------------------------------------- repair_fstring_braces
def test_repair_leaves_compiling_code_without_boxed_alone():
    code = 'x = 3\nmsg = f"value {x} of {{x}}"\n'
    assert repair_fstring_braces(code) == (code, [])


def test_repair_escapes_boxed_undefined_name():
    code = ('def prompt():\n'
            '    return f"Answer in the form \\\\boxed{answer} within {3} turns."\n')
    fixed, notes = repair_fstring_braces(code)
    assert fixed == ('def prompt():\n'
                     '    return f"Answer in the form \\\\boxed{{answer}} within {3} turns."\n')
    assert notes == ["escaped literal braces {answer} in f-string on line 2 "
                     "('answer' is not defined in the module)"]


def test_repair_keeps_boxed_name_that_is_defined():
    code = 'def show(answer):\n    return f"\\\\boxed{answer}"\n'
    assert repair_fstring_braces(code) == (code, [])


def test_repair_boxed_in_raw_triple_quoted_fstring():
    code = 'N = 3\nP = rf"""Solve {N} puzzles.\nReply with \\boxed{answer}."""\n'
    fixed, notes = repair_fstring_braces(code)
    assert fixed == 'N = 3\nP = rf"""Solve {N} puzzles.\nReply with \\boxed{{answer}}."""\n'
    assert notes[0].startswith("escaped literal braces {answer} in f-string on line 3")


def test_repair_empty_braces_syntax_error():
    code = 'a = 1\nHINT = f"Use {} for an empty dict, not {a}."\n'
    fixed, notes = repair_fstring_braces(code)
    assert fixed == 'a = 1\nHINT = f"Use {{}} for an empty dict, not {a}."\n'
    assert notes == ["escaped literal braces {} in f-string on line 2"]
    compile(fixed, "<t>", "exec")


def test_repair_invalid_expression_in_triple_quoted_fstring():
    code = ('class E:\n'
            '    def reset(self, seed=None):\n'
            '        n = 4\n'
            '        text = f"""Board ({n} rows).\n'
            'Moves look like {row col} and a set like {1, 2} is fine.\n'
            '"""\n'
            '        return text, {}\n')
    fixed, notes = repair_fstring_braces(code)
    assert "{{row col}}" in fixed and "{1, 2}" in fixed and "({n} rows)" in fixed
    assert notes == ["escaped literal braces {row col} in f-string on line 5"]
    assert fixed.replace("{{row col}}", "{row col}") == code


def test_repair_lone_and_unmatched_braces():
    code = 'x = 1\ns = f"close } then {x} open { here"\n'
    fixed, notes = repair_fstring_braces(code)
    assert fixed == 'x = 1\ns = f"close }} then {x} open {{ here"\n'
    assert len(notes) == 2


def test_repair_fixes_several_fstrings_and_never_touches_plain_strings():
    code = ('a = "plain {} stays"\n'
            'b = f"first {}"\n'
            "c = f'second {two words}'  # comment with f\"{}\"\n")
    fixed, notes = repair_fstring_braces(code)
    assert fixed == ('a = "plain {} stays"\n'
                     'b = f"first {{}}"\n'
                     "c = f'second {{two words}}'  # comment with f\"{}\"\n")
    assert [n[-9:] for n in notes] == ["on line 2", "on line 3"]


def test_repair_leaves_non_fstring_syntax_errors_alone():
    code = 'msg = f"ok {1}"\ndef broken(:\n    pass\n'
    assert repair_fstring_braces(code) == (code, [])


def test_repair_is_all_or_nothing_when_code_still_fails():
    code = 'msg = f"empty {} here"\ndef broken(:\n    pass\n'
    assert repair_fstring_braces(code) == (code, [])


def test_repair_set_literal_text_left_alone():
    code = 'prompt = f"Pick one of {1, 2}"\n'
    assert repair_fstring_braces(code) == (code, [])


# ---------------------------------------------------------------- find_env_class
def test_find_game_env():
    assert find_env_class(GAME_ENV) == ("GuessEnv", "game")


def test_find_tool_use_env_including_dotted_base():
    assert find_env_class(TOOL_ENV) == ("LookupEnv", "tool_use")
    dotted = "import spade.envs.tool_base as tb\nclass X(tb.ToolUseBaseEnv):\n    pass\n"
    assert find_env_class(dotted) == ("X", "tool_use")


def test_find_picks_concrete_subclass_of_helper_base():
    code = ('class BaseGame:\n'
            '    def reset(self, seed=None):\n        raise NotImplementedError\n'
            '    def step(self, action):\n        raise NotImplementedError\n'
            'class Board:\n    def render(self):\n        return ""\n'
            'class NimEnv(BaseGame):\n'
            '    def reset(self, seed=None):\n        return "", {}\n')
    assert find_env_class(code) == ("NimEnv", "game")


def test_find_two_env_classes_is_an_error():
    with pytest.raises(IntakeError) as info:
        find_env_class(GAME_ENV + "\n\nclass OtherEnv:\n"
                       "    def reset(self, seed=None):\n        pass\n"
                       "    def step(self, action):\n        pass\n")
    assert info.value.reason == "multiple_env_classes"
    assert "GuessEnv" in info.value.message and "OtherEnv" in info.value.message


def test_find_only_functions_is_no_env_class():
    with pytest.raises(IntakeError) as info:
        find_env_class("def reset():\n    pass\n\ndef step(a):\n    pass\n\n"
                       "class Helper:\n    pass\n")
    assert info.value.reason == "no_env_class"
    assert "Helper" in info.value.message


def test_find_syntax_error_reports_line():
    with pytest.raises(IntakeError) as info:
        find_env_class("x = 1\n\nclass Broken(\n    def reset(self):\n")
    assert info.value.reason == "syntax_error"
    assert "line " in info.value.message and info.value.reason in str(info.value)


# ---------------------------------------------------------------- intake pipeline
def test_intake_full_messy_output():
    raw = ("<think>The user wants a guessing game. I'll use random.</think>\r\n"
           "Here is the environment:\r\n\r\n```python\r\n" + GAME_ENV.replace("\n", "\r\n")
           + "```\r\n\r\nLet me know if you want changes!\r\n")
    result = intake(raw)
    assert result == IntakeResult(GAME_ENV, "GuessEnv", "game", (
        "removed <think> reasoning",
        "converted CRLF/CR line endings to LF",
        "took first ```python block (1 fenced block(s) found)",
    ))


def test_intake_repairs_boxed_and_reports_it():
    env = GAME_ENV.replace('"Guess a number from 1 to 10."',
                           'f"Guess from 1 to 10; reply \\\\boxed{answer}."')
    result = intake(fenced(env))
    assert "\\\\boxed{{answer}}" in result.code
    assert result.changes[-1].startswith("escaped literal braces {answer} in f-string on line 11")
    ast.parse(result.code)


def test_intake_tool_use_and_trailing_newline():
    result = intake("\n\n" + TOOL_ENV.rstrip() + "   \n\n\n")
    assert (result.code, result.class_name, result.kind) == (TOOL_ENV, "LookupEnv", "tool_use")
    assert result.changes == (
        "trimmed blank lines and trailing whitespace at the ends of the code",)


def test_intake_is_pure():
    raw = "<think>x</think>```python\n" + GAME_ENV.replace('"Wrong."', 'f"Wrong {}."') + "```"
    assert intake(raw) == intake(raw)
    assert "{{}}" in intake(raw).code


@pytest.mark.parametrize("raw, reason, needle", [
    ("x" * 1001, "too_large", "1001 characters; expected at most 1000"),
    ("<think>only thinking</think>\n  \n", "empty", "no code"),
    ("```python\n```", "empty", "no code"),
    ("```python\nclass A:\n    def reset(self)\n        pass\n```", "syntax_error", "line 2"),
    ("```python\ndef helper():\n    return 1\n```", "no_env_class", "none"),
])
def test_intake_errors(raw, reason, needle):
    with pytest.raises(IntakeError) as info:
        intake(raw, max_chars=1000)
    assert info.value.reason == reason and reason in REASONS
    assert needle in info.value.message


def test_reasons_exported():
    assert set(REASONS) == {"too_large", "empty", "syntax_error", "no_env_class",
                            "multiple_env_classes"}
