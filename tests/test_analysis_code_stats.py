"""Static code statistics and formula-reveal detection (spec section 9), on hand-counted snippets."""

from __future__ import annotations

import pytest

from spade.analysis.code_stats import (
    code_reveals_formula, environment_class, first_observation_strings, formula_reveal_rate, formula_spans,
    hidden_state_variables, is_physics_text, parse_module, physics_terms, program_length, reveals_formula,
)

# Lines marked C are code; 13 in all.
COUNTED = '''"""Module docstring,
over two lines."""
# a comment

import random                      # C 1


class Base:                        # C 2
    """Class docstring."""
    def _init_base(self):          # C 3
        self.base_state = 0        # C 4


class Env(Base):                   # C 5
    LIMIT = 3                      # C 6

    def reset(self, seed=None):    # C 7
        text = """first line       # C 8 (opening line of a plain multi-line string)
# not a comment: inside a string   # C 9
last line"""                       # C 10
        return text, {}            # C 11

    def step(self, action):        # C 12
        return "", 0.0, True, False, {}  # C 13
'''

ENV = '''
import random

INTRO = "A ball is thrown; its height follows h = v*t - g*t^2/2 (gravity g)."


def describe(speed):
    return f"Launch speed v = {speed} m/s."


class Base:
    def _init_base(self):
        self.base_state = 0


class Thrower(Base):
    GREETING = "Welcome."

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.turn = 0
        self.speed, self.angle = 0.0, 0.0
        self.reset()

    def reset(self, seed=None):
        """Docstring with a formula that is not observed: E = m*c^2."""
        self.rng = random.Random(seed)
        self.speed = self.rng.uniform(5, 20)
        self.hits += 0
        setattr(self, "target", 3)
        for self.cursor in range(2):
            pass
        return self._intro() + describe(self.speed), {}

    def _intro(self):
        return INTRO

    def step(self, action):
        self.turn += 1
        self.last_action: str = action
        return "Energy E = m*c^2 is revealed only later.", 0.0, False, False, {}

    @staticmethod
    def helper(obj):
        obj.not_mine = 1
'''


def test_program_length_counts_code_lines_only():
    assert program_length(COUNTED) == 13
    assert program_length("") == 0
    assert program_length("x = 1\n\n\n# c\ny = 2\n") == 2


def test_parse_errors_name_the_line():
    with pytest.raises(ValueError, match="does not parse.*line 2"):
        program_length("x = 1\ndef broken(:\n")
    with pytest.raises(ValueError, match="code must be a str"):
        parse_module(b"x = 1")


def test_hidden_state_variables_by_static_analysis():
    found = hidden_state_variables(ENV)
    # speed and angle (tuple target), hits (augmented), target (setattr), cursor (for target), last_action
    # (annotated), base_state (same-module base); max_turns, turn and rng are bookkeeping; LIMIT-style class
    # constants and a staticmethod's argument are not instance state.
    assert found == ["angle", "base_state", "cursor", "hits", "last_action", "speed", "target"]
    assert hidden_state_variables(ENV, exclude=()) == sorted(found + ["max_turns", "rng", "turn"])


def test_environment_class_selection():
    two = "class A:\n    def reset(self): pass\n    def step(self, a): pass\n" \
          "class B:\n    def reset(self): pass\n    def step(self, a): pass\n"
    with pytest.raises(ValueError, match="found 2"):
        hidden_state_variables(two)
    assert environment_class(parse_module(two), "B").name == "B"
    with pytest.raises(ValueError, match="class_name 'C'"):
        environment_class(parse_module(two), "C")
    # a tool-use environment takes reset/step from an imported base class
    tool = "from spade.envs.tool_base import ToolUseBaseEnv\nclass Shop(ToolUseBaseEnv):\n" \
           "    def _setup(self, rng):\n        self.state = {}\n"
    assert hidden_state_variables(tool) == ["state"]


def test_analysis_never_runs_the_code(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\n" + ENV
    program_length(code), hidden_state_variables(code), code_reveals_formula(code)
    assert not marker.exists()


@pytest.mark.parametrize("text, spans", [
    ("Use F = m * a to find the force.", ["F = m * a"]),
    ("The height is h = v²/(2g).", ["h = v²/(2g)"]),
    ("Recall $E = mc^2$ here", ["E = mc^2"]),
    ("Momentum p = mv.", ["p = mv"]),
    ("Net force F = 2 m a", ["F = 2 m a"]),
    ("Period: T = 2\\pi\\sqrt{L/g}.", ["T = 2\\pi\\sqrt{L/g}"]),
    ("KE = ½mv² = 25 J", ["KE = ½mv²"]),
    ("v = √(2gh), then x(t) = x0 + v t", ["v = √(2gh)", "x(t) = x0 + v t"]),
    ("Gravity F = G m1 m2 / r^2", ["F = G m1 m2 / r^2"]),
])
def test_formula_spans_positive(text, spans):
    assert formula_spans(text) == spans
    assert reveals_formula(text)


@pytest.mark.parametrize("text", [
    "The ball starts at v = 12 m/s.",
    "Use g = 9.81 m/s² and G = 6.67 × 10^-11 N m^2/kg^2.",
    "x = 5, y = -3, θ = 30°, T = 300 K, q = 1.6e-19 C",
    "x = y",
    "speed = distance / time",
    "reward = your total yield / the best total yield",
    "Answer as \\boxed{v=12.5} or \\boxed{v = 12 m/s}",
    "y = row 0-0 from the top",
    "if score == 5 or x >= 3 or x <= 2",
    "",
])
def test_formula_spans_negative(text):
    assert formula_spans(text) == []
    assert not reveals_formula(text)


def test_formula_spans_rejects_non_text():
    with pytest.raises(ValueError, match="text must be a str"):
        formula_spans(None)


def test_first_observation_strings_follow_reset():
    strings = first_observation_strings(ENV)
    # reset -> self._intro() -> INTRO; describe() f-string with its field replaced by 0
    assert INTRO_TEXT in strings
    assert "Launch speed v = 0 m/s." in strings
    assert not any("E = m*c^2" in s for s in strings)  # reset's docstring and step() are not observed
    assert code_reveals_formula(ENV)  # h = v*t - g*t^2/2 in INTRO
    quiet = ENV.replace("h = v*t - g*t^2/2", "the height")
    assert not code_reveals_formula(quiet)  # "v = 0 m/s" is a value, not a formula
    with pytest.raises(ValueError, match="no reset"):
        first_observation_strings("from base import B\nclass E(B):\n    pass\n")


INTRO_TEXT = "A ball is thrown; its height follows h = v*t - g*t^2/2 (gravity g)."


def test_physics_label_and_reveal_rate():
    assert physics_terms("A projectile's velocity under gravity") == ["gravity", "projectile", "velocity"]
    assert is_physics_text("A projectile's velocity under gravity")
    assert not is_physics_text("Choose plots to drill under a budget; yield = cost * 2")
    observations = [
        "A projectile: velocity v and gravity g give range R = v^2 sin(2θ)/g.",  # physics, reveals
        "A block on an incline with friction; use F = μ m g.",  # physics, reveals
        "A pendulum swings under gravity; find its period.",  # physics, does not reveal
        "Budget puzzle: c = a*b",  # not physics (but it reveals a formula)
    ]
    est = formula_reveal_rate(observations)
    assert (est.successes, est.trials) == (2, 3)
    est = formula_reveal_rate(observations, physics=[False, False, True, True])  # explicit domain labels
    assert (est.successes, est.trials) == (1, 2)
    assert formula_reveal_rate(observations[3:]) is None
    with pytest.raises(ValueError, match="equal length"):
        formula_reveal_rate(observations, physics=[True])
    with pytest.raises(ValueError, match="min_terms"):
        is_physics_text("x", min_terms=0)
