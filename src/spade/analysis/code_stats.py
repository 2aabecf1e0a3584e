"""Static statistics of generated environment code, and formula-reveal detection (spec section 9).

Everything here reads source text with :mod:`ast` and regular expressions; no environment code is ever
imported or executed. Definitions (also in ``docs/ANALYSES.md``):

* program length: lines of code = physical lines holding code, i.e. not blank, not comment-only and not
  part of a docstring (lines inside other multi-line strings are code);
* hidden state variables: distinct instance attributes (``self.<name>`` stores, ``setattr(self, "<name>",
  ...)``) in the methods of the environment class and its base classes defined in the same module, less a
  small documented set of bookkeeping names (turn counters, done flags, random generators);
* formula reveal: an observation text reveals a formula when it holds a symbolic equation ``LHS = RHS``
  whose RHS is an expression in variables rather than a value (:func:`formula_spans` gives the rule).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Sequence

from spade.analysis.rates import RateEstimate, rate_estimate

# Attributes that every environment keeps for the episode loop rather than the task (not "hidden state").
BOOKKEEPING_ATTRIBUTES = frozenset({
    "max_turns", "turn", "turns", "turn_count", "current_turn", "step_count", "steps", "num_steps", "n_steps",
    "done", "terminated", "truncated", "finished", "game_over", "over", "history", "rng", "random",
    "np_random", "seed", "_seed", "_rng", "_turn", "_done", "_steps",
})


# ----- parsing helpers ------------------------------------------------------------------------------
def parse_module(code: str) -> ast.Module:
    """``ast.parse`` of ``code``; ValueError (with the line) for non-text or code that does not parse."""
    if not isinstance(code, str):
        raise ValueError(f"code must be a str, got {type(code).__name__}")
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"code does not parse: {exc.msg} (line {exc.lineno})") from None


def _docstring_nodes(tree: ast.Module) -> list[ast.Expr]:
    nodes = []
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                nodes.append(first)
    return nodes


def _has_method(cls: ast.ClassDef, name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in cls.body)


def environment_class(tree: ast.Module, class_name: str | None = None) -> ast.ClassDef:
    """The environment class of a module: the class named ``class_name``; else the only top-level class
    that defines (itself or through a same-module base) both ``reset`` and ``step``; else, when there is
    none, the only top-level class with a base from outside the module (a tool-use environment derives
    ``reset``/``step`` from ``ToolUseBaseEnv``)."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name is not None:
        if class_name not in classes:
            raise ValueError(f"class_name {class_name!r} is not a top-level class of the code "
                             f"(found: {sorted(classes) or 'none'})")
        return classes[class_name]
    found = [cls for cls in classes.values()
             if all(any(_has_method(c, m) for c in _lineage(cls, classes)) for m in ("reset", "step"))]
    if not found:
        found = [cls for cls in classes.values() if any(not (isinstance(b, ast.Name) and b.id in classes)
                                                        for b in cls.bases)]
    if len(found) != 1:
        raise ValueError(f"expected exactly one environment class (reset() and step(), or an imported base), "
                         f"found {len(found)} "
                         f"({', '.join(c.name for c in found) or 'none'}); pass class_name")
    return found[0]


def _lineage(cls: ast.ClassDef, classes: dict) -> list[ast.ClassDef]:
    """``cls`` and its base classes defined in the same module, nearest first (cycles ignored)."""
    out, todo = [], [cls]
    while todo:
        current = todo.pop(0)
        if any(current is c for c in out):
            continue
        out.append(current)
        todo += [classes[b.id] for b in current.bases if isinstance(b, ast.Name) and b.id in classes]
    return out


# ----- program length ---------------------------------------------------------------------------------
def program_length(code: str) -> int:
    """Lines of code: physical lines that are not blank, not comment-only and not in a docstring.

    Lines inside a multi-line string that is not a docstring count as code (even when they start with
    ``#``). Only ``ast`` and the text are used; the code is never run.
    """
    tree = parse_module(code)
    lines = code.splitlines()
    docstring = {n for node in _docstring_nodes(tree) for n in range(node.lineno, node.end_lineno + 1)}
    in_string = {n for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 for n in range(node.lineno + 1, node.end_lineno + 1)}  # continuation lines of a literal
    count = 0
    for number, line in enumerate(lines, start=1):
        if number in docstring:
            continue
        text = line.strip()
        if number in in_string or (text and not text.startswith("#")):
            count += 1
    return count


# ----- hidden state variables ---------------------------------------------------------------------------
def _self_name(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    if decorators & {"staticmethod", "classmethod"}:
        return None
    params = fn.args.posonlyargs + fn.args.args
    return params[0].arg if params else None


def _instance_attributes(cls: ast.ClassDef) -> set[str]:
    names = set()
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or (me := _self_name(fn)) is None:
            continue
        for node in ast.walk(fn):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name) and node.value.id == me):
                names.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                  and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == me
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                names.add(node.args[1].value)
    return names


def hidden_state_variables(code: str, class_name: str | None = None,
                           exclude: Iterable[str] = BOOKKEEPING_ATTRIBUTES) -> list[str]:
    """Sorted names of the environment's state variables found statically (see module docstring).

    Instance attributes stored in any method of the environment class or of its same-module base classes,
    less ``exclude`` (default :data:`BOOKKEEPING_ATTRIBUTES`; pass ``()`` to keep every attribute). Class
    attributes (constants) and attributes set only by a base class from another module are not seen.
    """
    tree = parse_module(code)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    cls = environment_class(tree, class_name)
    names = set().union(*(_instance_attributes(c) for c in _lineage(cls, classes)))
    return sorted(names - set(exclude))


# ----- formula reveal -------------------------------------------------------------------------------------
_GREEK = "α-ωΑ-Ω"
_GREEK_NAMES = frozenset("alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu "
                         "xi pi rho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma "
                         "Phi Psi Omega".split())
_FUNCTIONS = frozenset({"sqrt", "sin", "cos", "tan", "exp", "log", "ln", "abs", "arcsin", "arccos", "arctan"})
_LATEX_OPERATORS = frozenset({"frac", "sqrt", "cdot", "times", "div", "pm", "dfrac", "tfrac"})
# short English words that end a formula rather than name a variable
_STOPWORDS = frozenset("the an and or of to in on at by for is are was be as if it its use with per you your we our "
                       "not no yes can may all any has had but so then than from into via each one two new out see "
                       "now let get set put ask end try how why who its his her him she he they them do does did "
                       "has have will".split())
_UNITS = ("m s kg g mg km cm mm nm μm um N kN J kJ MJ eV keV MeV W kW MW Pa kPa MPa atm bar Hz kHz MHz GHz K "
          "°C °F ° C mC μC uC V mV kV A mA Ω kΩ ohm ohms F μF uF nF pF H mH T mT Wb L mL mol rad sr h hr min ms μs "
          "us ns yr mph kph ft lb lbs cal kcal dB rpm % m/s").split()

_TOKEN = re.compile(
    r"(?P<ws>[ \t]+)"
    r"|(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[½¼¾⅓⅔])"
    r"|(?P<latex>\\[A-Za-z]+)"
    rf"|(?P<ident>[A-Za-z{_GREEK}][A-Za-z{_GREEK}0-9]*(?:_\{{?[A-Za-z0-9{_GREEK}]+\}}?)*'*)"
    r"|(?P<op>\*\*|[-+*/^·×÷√−⋅±²³])"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])"
    r"|(?P<unit>[°%])"
    r"|(?P<eq>(?<![<>=!:])=(?![=>]))"
)
_NUMBER = r"[-+−]?\s*(?:\d+(?:\.\d+)?(?:[eE][-+−]?\d+)?|[½¼¾⅓⅔])(?:\s*[×x*·]\s*10\s*(?:\^|\*\*)\s*[-+−]?\d+)?"
_UNIT_NAMES = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))  # longest first
_UNIT = rf"(?:{_UNIT_NAMES})(?:(?:\^|\*\*)[-−]?\d+|[²³])*"
_UNIT_PRODUCT = rf"{_UNIT}(?:\s*[/·⋅*]\s*{_UNIT})*"
_QUANTITY = re.compile(rf"\s*{_NUMBER}\s*(?:{_UNIT_PRODUCT}(?:\s{_UNIT_PRODUCT})?)?\s*")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) for every character run; characters no pattern knows become "stop" tokens."""
    out, i = [], 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            out.append(("stop", text[i], i))
            i += 1
            continue
        kind, value = m.lastgroup, m.group()
        if kind == "latex":
            name = value[1:]
            kind = "op" if name in _LATEX_OPERATORS else "symbol" if name in _GREEK_NAMES else "stop"
        elif kind == "ident":
            core = re.match(rf"[A-Za-z{_GREEK}]+", value).group()
            kind = ("function" if value in _FUNCTIONS else "stop" if value.lower() in _STOPWORDS
                    else "word" if len(core) > 3 else "symbol")
        out.append((kind, value, i))
        i = m.end()
    return out


def _side(tokens: list, start: int, direction: int) -> list:
    """The formula tokens next to an ``=``: walk from ``start`` in ``direction`` until a stop, a word, another
    ``=`` or a bracket that closes outside the run."""
    out, depth, i = [], 0, start
    opening, closing = ("open", "close") if direction > 0 else ("close", "open")
    while 0 <= i < len(tokens):
        kind = tokens[i][0]
        if kind in ("stop", "word", "eq"):
            break
        if kind == opening:
            depth += 1
        elif kind == closing:
            if depth == 0:
                break
            depth -= 1
        out.append(tokens[i])
        i += direction
    return out if direction > 0 else out[::-1]


def _atoms(side: list) -> list[tuple[str, str]]:
    """The tokens of one side without blanks and brackets; a number written directly before a symbol
    (``2g`` in ``2g``, ``3t``) is a coefficient and counts as a variable term."""
    atoms = []
    for i, (kind, text, _) in enumerate(side):
        if kind in ("ws", "open", "close"):
            continue
        if kind == "num" and i + 1 < len(side) and side[i + 1][0] == "symbol":
            kind = "symbol"
        atoms.append((kind, text))
    return atoms


def _is_formula(lhs: list, rhs: list) -> bool:
    symbols = [t for k, t, _ in rhs if k == "symbol"]
    if not any(k in ("symbol", "function") for k, _, _ in lhs) or not symbols:
        return False
    if _QUANTITY.fullmatch("".join(t for _, t, _ in rhs)):  # a value with units, e.g. "12 m/s"
        return False
    atoms = _atoms(rhs)
    if any(k == "function" for k, _ in atoms):
        return True
    for i, (kind, _) in enumerate(atoms):  # an operator applied to a variable term
        if kind == "op" and any(0 <= j < len(atoms) and atoms[j][0] == "symbol" for j in (i - 1, i + 1)):
            return True
    if len(symbols) >= 2:  # implicit product of symbols: "m a", "G m1 m2"
        return True
    # one lowercase multi-letter symbol alone is an implicit product: "p = mv"
    return len(atoms) == 1 and symbols[0].isalpha() and symbols[0].islower() and len(symbols[0]) >= 2


def formula_spans(text: str) -> list[str]:
    """The equations of ``text`` that count as a revealed formula, in order (stripped ``LHS = RHS``).

    Rule. ``text`` is cut into tokens: numbers, symbols (identifiers with at most 3 letters before any
    subscript, digits or primes; Greek letters; LaTeX Greek names), function names (``sqrt sin cos tan exp
    log ln abs``), operators (``+ - * / ^ ** × · ÷ √ ± ² ³`` and LaTeX ``\\frac \\sqrt \\cdot \\times``),
    brackets and unit signs. Longer words, common short English words (``the``, ``and``, ``for``, ...), any
    other punctuation and line breaks end an expression. For each ``=`` (not ``==``, ``<=``, ``>=``, ``!=``,
    ``:=``, ``=>``) the expression runs directly left and right of it are the LHS and RHS. The equation
    reveals a formula when

    1. the LHS holds a symbol or function, and the RHS holds a symbol;
    2. the RHS is not a single quantity: a number with optional units (``12 m/s``, ``9.8 m/s^2``,
       ``6.67 × 10^-11 N m^2/kg^2``, ``30°``);
    3. and the RHS applies a function, or has an operator next to a variable term (a symbol, or a number
       written directly before a symbol as in ``2g``), or has two or more symbols (implicit product,
       ``m a``), or is one lowercase multi-letter symbol (``p = mv``).

    So ``F = m * a``, ``h = v²/(2g)``, ``E = mc^2`` and ``T = 2\\pi\\sqrt{L/g}`` reveal a formula;
    ``v = 12 m/s``, ``x = 5``, ``x = y`` and ``speed = distance / time`` (words, not symbols) do not.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    tokens = _tokens(text)
    spans = []
    for i, (kind, _, offset) in enumerate(tokens):
        if kind != "eq":
            continue
        lhs, rhs = _side(tokens, i - 1, -1), _side(tokens, i + 1, +1)
        if _is_formula(lhs, rhs):
            start = lhs[0][2] if lhs else offset
            end = rhs[-1][2] + len(rhs[-1][1])
            spans.append(text[start:end].strip())
    return spans


def reveals_formula(text: str) -> bool:
    """Whether an observation text prints a formula (rule of :func:`formula_spans`)."""
    return bool(formula_spans(text))


_PHYSICS_TERMS = {
    "velocity": r"velocit", "acceleration": r"accelerat", "force": r"forces?\b", "momentum": r"momentum",
    "kinetic": r"kinetic", "potential energy": r"potential\s+energy", "gravity": r"gravit", "friction": r"friction",
    "projectile": r"projectile", "pendulum": r"pendul", "spring": r"spring\s+constant|hooke", "newton": r"newton",
    "joule": r"joule", "voltage": r"voltage", "ohm": r"\bohms?\b|ohm's", "resistance": r"resist(?:or|ance)",
    "capacitance": r"capacit(?:or|ance)", "circuit": r"circuit", "magnetic": r"magnet", "electric field":
    r"electric\s+field", "wavelength": r"wavelength", "frequency": r"frequenc", "refraction": r"refract",
    "lens": r"\blens", "orbit": r"orbit", "collision": r"collision|collide", "oscillation": r"oscillat",
    "torque": r"torque", "inertia": r"inertia", "buoyancy": r"buoyan", "density": r"densit", "pressure": r"pressure",
    "thermodynamics": r"thermodynam", "heat": r"specific\s+heat|heat\s+capacity", "photon": r"photon",
    "displacement": r"displacement", "trajectory": r"trajector", "free fall": r"free[\s-]fall", "mass": r"\bmass",
    "incline": r"inclined?\s+plane|incline\b", "energy": r"energy", "speed of light": r"speed\s+of\s+light",
}
_PHYSICS_RE = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in _PHYSICS_TERMS.items()}


def physics_terms(text: str) -> list[str]:
    """The physics concepts named in ``text`` (keys of a fixed term list, matched case-insensitively)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return sorted(name for name, pattern in _PHYSICS_RE.items() if pattern.search(text))


def is_physics_text(text: str, min_terms: int = 2) -> bool:
    """Heuristic domain label: ``text`` names at least ``min_terms`` distinct physics concepts. Use a real
    domain label instead wherever the run records one."""
    if isinstance(min_terms, bool) or not isinstance(min_terms, int) or min_terms < 1:
        raise ValueError(f"min_terms must be a positive int, got {min_terms!r}")
    return len(physics_terms(text)) >= min_terms


def formula_reveal_rate(observations: Sequence[str], physics: Sequence[bool] | None = None,
                        confidence: float = 0.95) -> RateEstimate | None:
    """Spec 9: share of physics environments whose first observation prints the governing formula.

    ``observations`` [N] first observations (or the static strings of :func:`first_observation_text`);
    ``physics`` [N] domain flags, by default :func:`is_physics_text` of the same text. Returns the rate with
    its Wilson interval, or None when no environment is a physics environment.
    """
    if physics is None:
        physics = [is_physics_text(t) for t in observations]
    if len(physics) != len(observations):
        raise ValueError(f"observations ({len(observations)}) and physics ({len(physics)}) must have equal length")
    picked = [t for t, p in zip(observations, physics) if p]
    if not picked:
        return None
    return rate_estimate(sum(reveals_formula(t) for t in picked), len(picked), confidence)


# ----- the first observation, statically -------------------------------------------------------------------
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")


def _literal_text(node: ast.AST, format_template: bool) -> str | None:
    """The text of a string literal; formatted values (f-string fields, ``str.format`` fields) become "0"
    so that ``v = {v} m/s`` reads as a value, not a formula."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        return _FORMAT_FIELD.sub("0", text) if format_template else text
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in node.values)
    return None


def first_observation_strings(code: str, class_name: str | None = None) -> list[str]:
    """The string literals that can make up the first observation, found statically.

    The literals (docstrings excluded) in ``reset`` of the environment class, in the methods and module
    functions it calls (transitively, by name: ``self.m()``, ``f()``), and in module-level or class-level
    constants those functions read by name. A proxy for the real first observation, which only running the
    environment gives; a formula split across several literals is not seen.
    """
    tree = parse_module(code)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    lineage = _lineage(environment_class(tree, class_name), classes)
    methods: dict[str, ast.AST] = {}
    for cls in reversed(lineage):  # nearest class wins
        methods.update({n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    if "reset" not in methods:
        raise ValueError("the environment class has no reset() method")
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    constants: dict[str, ast.AST] = {}
    for body in [tree.body, *(cls.body for cls in reversed(lineage))]:
        for node in body:
            if isinstance(node, ast.Assign):
                constants.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})

    docstrings = {id(d.value) for d in _docstring_nodes(tree)}
    seen, todo, texts = set(), [("method", "reset")], []
    while todo:
        key = todo.pop(0)
        if key in seen:
            continue
        seen.add(key)
        kind, name = key
        node = {"method": methods, "function": functions, "constant": constants}[kind].get(name)
        if node is None:
            continue
        templates = {id(n.func.value) for n in ast.walk(node) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "format"}
        in_fstring = {id(v) for n in ast.walk(node) if isinstance(n, ast.JoinedStr) for v in n.values}
        in_fstring |= {id(n.format_spec) for n in ast.walk(node) if isinstance(n, ast.FormattedValue) and n.format_spec}
        for sub in ast.walk(node):
            if id(sub) in docstrings or id(sub) in in_fstring:
                continue
            text = _literal_text(sub, id(sub) in templates)
            if text is not None:
                texts.append(text)
            if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                    and isinstance(sub.func.value, ast.Name)):
                todo.append(("method", sub.func.attr))
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                todo.append(("function", sub.func.id))
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                todo.append(("constant", sub.id))
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and isinstance(sub.ctx, ast.Load):
                todo.append(("constant", sub.attr))  # self.INTRO / Cls.INTRO
    return texts


def first_observation_text(code: str, class_name: str | None = None) -> str:
    """:func:`first_observation_strings` joined by blank lines (input for :func:`reveals_formula`)."""
    return "\n\n".join(first_observation_strings(code, class_name))


def code_reveals_formula(code: str, class_name: str | None = None) -> bool:
    """Static formula-reveal flag of an environment: some literal of its first observation reveals a formula."""
    return any(reveals_formula(text) for text in first_observation_strings(code, class_name))
