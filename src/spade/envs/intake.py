"""Code intake: raw environment-designer output -> clean source plus a report of changes.

Pure functions over text, ``ast`` and ``compile`` (bytecode is only a syntax check, thrown
away): candidate code is never executed or imported.  Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import functools
import keyword
import re
import textwrap
import warnings
from collections import namedtuple
from dataclasses import dataclass

__all__ = ["REASONS", "IntakeError", "IntakeResult", "extract_code", "find_env_class",
           "intake", "repair_fstring_braces", "strip_think"]

REASONS = ("too_large", "empty", "syntax_error", "no_env_class", "multiple_env_classes")
TOOL_BASE = "ToolUseBaseEnv"
_MAX_REPAIR_ROUNDS = 5
_PY_TAGS = {"python", "py", "python3", "py3"}
_STRING_PREFIXES = {"", "r", "u", "f", "b", "br", "rb", "fr", "rf"}
_BUILTIN_NAMES = frozenset(dir(builtins))

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_PY_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*(?:python3?|py3?)\b", re.M | re.I)
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_CODE_START = re.compile(r"(?:import |from \S+ import |class |def |async def |@|#|\"\"\"|'''"
                         r"|[A-Za-z_]\w*\s*(?::[^=\n]+)?=[^=])")


class IntakeError(Exception):
    """Designer output that cannot become an environment; ``reason`` is one of REASONS."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class IntakeResult:
    code: str
    class_name: str
    kind: str  # "game" or "tool_use"
    changes: tuple[str, ...]


def _quietly(func, *args):
    with warnings.catch_warnings():  # compile/parse may emit SyntaxWarnings: keep them quiet
        warnings.simplefilter("ignore")
        return func(*args)


@functools.lru_cache(maxsize=32)  # one intake compiles the same text several times
def _syntax_error(source: str, mode: str = "exec") -> SyntaxError | None:
    """The SyntaxError for ``source`` or None.  "exec": full compile (catches e.g. 'return'
    outside function); "eval": parse an expression only.  Nothing is ever run."""
    try:
        _quietly(compile, source, "<candidate>", mode, 0 if mode == "exec" else ast.PyCF_ONLY_AST,
                 True)
    except SyntaxError as err:
        return err
    except (ValueError, RecursionError, MemoryError) as err:  # null bytes, absurd nesting
        return SyntaxError(f"{type(err).__name__}: {err}")
    return None


def _syntax_message(err: SyntaxError) -> str:
    shown = f" in {(err.text or '').strip()[:100]!r}" if (err.text or "").strip() else ""
    return f"line {err.lineno or '?'}: {err.msg}{shown}; expected Python source that compiles"


# ------------------------------------------------------------------------------ reasoning
def strip_think(text: str, resume: re.Pattern = _PY_FENCE_LINE) -> tuple[str, bool]:
    """Remove closed ``<think>...</think>`` blocks, everything before a stray ``</think>``,
    and an unclosed ``<think>`` up to the next match of ``resume`` (by default a python fence;
    to the end if there is none)."""
    out = _THINK_BLOCK.sub("", text)
    strays = list(_THINK_CLOSE.finditer(out))
    if strays:
        out = out[strays[-1].end():]
    opener = _THINK_OPEN.search(out)
    if opener:
        found = resume.search(out, opener.end())
        out = out[:opener.start()] + (out[found.start():] if found else "")
    return out, out != text


# ------------------------------------------------------------------------------ fences
def _fenced_blocks(lines: list[str]) -> list[tuple[str, int, int | None]]:
    """(tag, opening line index, closing line index or None if unclosed) per fenced block."""
    blocks, current = [], None
    for idx, line in enumerate(lines):
        m = _FENCE.match(line)
        if m and current is None:
            current = (m["fence"], (m["info"].split() or [""])[0].lower(), idx)
        elif m and m["fence"][0] == current[0][0] and len(m["fence"]) >= len(current[0]) \
                and not m["info"]:
            blocks.append((current[1], current[2], idx))
            current = None
    return blocks + ([(current[1], current[2], None)] if current else [])


def extract_code(text: str) -> tuple[str, list[str]]:
    """Pick the code out of markdown.  Text that compiles as it is stays whole.  Otherwise:
    the first python-tagged fenced block (extended past a fence that sits inside a string),
    else the first untagged block containing ``class ``, else everything after an unclosed
    fence, else the whole text minus leading prose.  Stray fence lines are then dropped if
    the code does not compile with them, and common indentation is removed."""
    if _syntax_error(text) is None:
        return text, []
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    blocks = _fenced_blocks(lines)
    body = lambda b: lines[b[1] + 1:len(lines) if b[2] is None else b[2]]  # noqa: E731
    python = [b for b in blocks if b[0] in _PY_TAGS]
    untagged = [b for b in blocks if not b[0] and "class " in "".join(body(b))]
    chosen = (python or untagged or [b for b in blocks if b[2] is None] or [None])[0]
    if chosen is None:  # no usable block: the whole text, minus leading prose if unfenced
        first = 0 if blocks else next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), 0)
        code_lines, notes = lines[first:], []
        if blocks:
            notes.append(f"no python block among {len(blocks)} fenced block(s); used whole text")
        if first:
            notes.append(f"dropped {first} line(s) of prose before the code")
    elif chosen[2] is None:
        code_lines = body(chosen)
        notes = [f"took everything after the unclosed fence on line {chosen[1] + 1}"]
    else:
        kind = f"```{chosen[0]} block" if python else "untagged ``` block containing a class"
        notes = [f"took first {kind} ({len(blocks)} fenced block(s) found)"]
        later = sorted({i for b in blocks for i in b[1:] if i is not None and i > chosen[2]})
        for close in later if _syntax_error("".join(body(chosen))) else ():  # fence in a string?
            if _syntax_error("".join(body((chosen[0], chosen[1], close)))) is None:
                notes.append(f"extended the block to the fence on line {close + 1}")
                chosen = (chosen[0], chosen[1], close)
                break
        code_lines = body(chosen)
    code = "".join(code_lines)
    kept = [line for line in code_lines if not _FENCE.match(line)]
    if len(kept) != len(code_lines) and _syntax_error(code) is not None:
        notes.append(f"removed {len(code_lines) - len(kept)} stray fence line(s)")
        code = "".join(kept)
    if textwrap.dedent(code) != code:
        notes.append("removed common indentation")
        code = textwrap.dedent(code)
    return code, notes


# ------------------------------------------------------------------------------ f-strings
# Offsets into the module: prefix start, body start/end (inside the quotes), just past the end.
_Literal = namedtuple("_Literal", "start body_start body_end end prefix quote")


def _prefix_before(src: str, pos: int) -> str:
    """The string prefix (f, rb, ...) right before the quote at ``pos``; "" if none/invalid."""
    word = re.search(r"\w*\Z", src[max(0, pos - 3):pos])[0]  # 3 chars: prefixes are <= 2
    return word if word.lower() in _STRING_PREFIXES else ""


def _string_end(src: str, q: int) -> int:
    """Offset just past the literal whose opening quote is at ``src[q]`` (the newline or the
    end of text if unterminated).  Read the Python 3.11 way: the first unescaped matching
    quote ends it, whatever braces come before."""
    quote = src[q] * 3 if src.startswith(src[q] * 3, q) else src[q]
    i = q + len(quote)
    while i < len(src) and not src.startswith(quote, i):
        if src[i] == "\n" and len(quote) == 1:
            return i
        i += 2 if src[i] == "\\" else 1
    return min(i + len(quote), len(src))


def _f_literals(code: str) -> list[_Literal]:
    """Every terminated top-level f-string literal of ``code``, found by scanning the text."""
    found, i = [], 0
    while i < len(code):
        if code[i] == "#":
            i = code.find("\n", i) % (len(code) + 1)  # no newline (-1) -> the end
        elif code[i] in "'\"":
            prefix, end = _prefix_before(code, i), _string_end(code, i)
            quote = code[i] * 3 if code.startswith(code[i] * 3, i) else code[i]
            if "f" in prefix.lower() and end - i >= 2 * len(quote) \
                    and code.startswith(quote, end - len(quote)):
                found.append(_Literal(i - len(prefix), i + len(quote), end - len(quote), end,
                                      prefix, quote))
            i = end
        else:
            i += 1
    return found


def _brace_items(body: str, raw: bool) -> list[tuple[str, int, int]]:
    """("field", s, e) per ``{...}``, ("lone", s, e) per unmatched ``}``, ("open", s, e) per
    never-closed ``{`` in an f-string body; ``{{``, ``}}`` and ``\\N{...}`` are skipped."""
    items, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and not raw:
            named_end = body.find("}", i) if body.startswith("N{", i + 1) else -1
            i = named_end + 1 if named_end > 0 else i + (2 if body.startswith("\\", i + 1) else 1)
        elif body.startswith("{{", i) or body.startswith("}}", i):
            i += 2
        elif c == "}":
            items.append(("lone", i, i + 1))
            i += 1
        elif c == "{":
            depth, j = 1, i + 1
            while j < len(body) and depth:  # find the matching '}', skipping nested strings
                depth += (body[j] == "{") - (body[j] == "}")
                j = _string_end(body, j) if body[j] in "'\"" else j + 1
            items.append(("open", i, i + 1) if depth else ("field", i, j))
            i = i + 1 if depth else j
        else:
            i += 1
    return items


def _line_of(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _repair_literal(code: str, lit: _Literal) -> tuple[str, list[str]] | None:
    """(new literal, notes) with the invalid brace items escaped; None unless it then parses."""
    body = code[lit.body_start:lit.body_end]
    wrap = lambda text: lit.prefix + lit.quote + text + lit.quote  # noqa: E731
    pieces, notes, last = [], [], 0
    for kind, s, e in _brace_items(body, "r" in lit.prefix.lower()):
        if kind == "field" and _syntax_error(wrap(body[s:e]), "eval") is None:
            continue
        pieces += [body[last:s], _escape(body[s:e])]
        last = e
        what = {"field": f"literal braces {body[s:e][:60]}", "lone": "lone '}'",
                "open": "unmatched '{'"}[kind]
        notes.append(f"escaped {what} in f-string on line {_line_of(code, lit.body_start + s)}")
    new_literal = wrap("".join(pieces) + body[last:])
    return (new_literal, notes) if notes and _syntax_error(new_literal, "eval") is None else None


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, parameters, imports, defs, ...)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(getattr(node, "name", None), str):  # defs, classes, except/match `as`
            names.add(node.name)
    return names


def _escape_boxed_names(code: str) -> tuple[str, list[str]]:
    """In compiling code, escape ``\\boxed{NAME}`` f-string fields whose NAME is never bound."""
    if "\\boxed{" not in code:  # such a field needs this text in the source
        return code, []
    candidates = []  # fields that qualify unless the module binds the name
    for lit in _f_literals(code):
        body = code[lit.body_start:lit.body_end]
        for kind, s, e in _brace_items(body, "r" in lit.prefix.lower()):
            name = body[s + 1:e - 1].strip()
            if kind == "field" and body[:s].endswith("\\boxed") and name.isidentifier() \
                    and not keyword.iskeyword(name) and name not in _BUILTIN_NAMES:
                candidates.append((lit.body_start + s, lit.body_start + e, name))
    if not candidates:  # nothing to escape whatever the module binds: skip parsing it
        return code, []
    bound = _bound_names(_quietly(ast.parse, code))
    if "*" in bound:  # star import: anything might be defined
        return code, []
    edits = [edit for edit in candidates if edit[2] not in bound]
    notes = [f"escaped literal braces {code[s:e]} in f-string on line {_line_of(code, s)} "
             f"('{name}' is not defined in the module)" for s, e, name in edits]
    for s, e, _ in reversed(edits):
        code = code[:s] + _escape(code[s:e]) + code[e:]
    return code, notes


def repair_fstring_braces(code: str) -> tuple[str, list[str]]:
    """Escape literal braces in f-strings; nothing outside f-string literals ever changes.

    While compilation fails inside an f-string, double the empty/invalid ``{...}`` fields and
    unmatched braces of every f-string that does not parse on its own (a few rounds); if the
    code still does not compile it is returned unchanged.  Once it compiles, ``\\boxed{NAME}``
    fields whose NAME the module never binds are escaped too (they would raise NameError)."""
    original, notes = code, []
    for _ in range(_MAX_REPAIR_ROUNDS):
        err = _syntax_error(code)
        if err is None:
            break
        broken = [lit for lit in _f_literals(code)
                  if _syntax_error(code[lit.start:lit.end], "eval") is not None]
        at_error = str(err.msg).startswith("f-string") or any(
            err.lineno and _line_of(code, lit.start) <= err.lineno <= _line_of(code, lit.end - 1)
            for lit in broken)
        fixes = [(lit, _repair_literal(code, lit)) for lit in broken if at_error]
        fixes = [(lit, fix) for lit, fix in fixes if fix is not None]
        if not fixes:
            break
        for lit, (literal, _) in reversed(fixes):
            code = code[:lit.start] + literal + code[lit.end:]
        notes += [note for _, (_, fix_notes) in fixes for note in fix_notes]
    if _syntax_error(code) is not None:
        return original, []
    code, boxed_notes = _escape_boxed_names(code)
    return code, notes + boxed_notes


# ------------------------------------------------------------------------------ classes
def _base_name(expr: ast.expr) -> str:
    expr = expr.value if isinstance(expr, ast.Subscript) else expr
    return expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", "")


def find_env_class(code: str) -> tuple[str, str]:
    """(class_name, kind) of the one environment class; kind is "tool_use" or "game".
    Candidates are top-level classes that, counting their in-module bases, define ``reset``
    and ``step`` or derive from ToolUseBaseEnv; of those, the most-derived must be unique."""
    err = _syntax_error(code)
    if err is not None:
        raise IntakeError("syntax_error", _syntax_message(err))
    tree = _quietly(ast.parse, code)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    bases = {name: [_base_name(b) for b in node.bases] for name, node in classes.items()}

    def lineage(name: str, seen: frozenset = frozenset()) -> tuple[set[str], bool]:
        """(method names including in-module bases, derives from ToolUseBaseEnv)."""
        methods = {n.name for n in classes[name].body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        tool = TOOL_BASE in bases[name]
        for base in bases[name]:
            if base in classes and base not in seen | {name}:
                base_methods, base_tool = lineage(base, seen | {name})
                methods, tool = methods | base_methods, tool or base_tool
        return methods, tool

    info = {name: lineage(name) for name in classes}
    candidates = [n for n, (methods, tool) in info.items() if tool or {"reset", "step"} <= methods]
    leaves = [n for n in candidates if not any(n in bases[other] for other in candidates)]
    if not leaves:
        raise IntakeError("no_env_class", f"no top-level class defines reset() and step() or "
                          f"subclasses {TOOL_BASE} (top-level classes: "
                          f"{', '.join(classes) or 'none'}); expected exactly one")
    if len(leaves) > 1:
        named = ", ".join(f"{n} (line {classes[n].lineno})" for n in leaves)
        raise IntakeError("multiple_env_classes", f"found {len(leaves)} environment classes: "
                          f"{named}; expected exactly one")
    return leaves[0], "tool_use" if info[leaves[0]][1] else "game"


# ------------------------------------------------------------------------------ pipeline
def intake(raw: str, max_chars: int = 200_000) -> IntakeResult:
    """Raw designer output -> IntakeResult (clean code, class, kind, every change made).
    Raises IntakeError with a reason from REASONS."""
    if len(raw) > max_chars:
        raise IntakeError("too_large", f"designer output is {len(raw)} characters; "
                          f"expected at most {max_chars}")
    changes: list[str] = []
    text, thought = strip_think(raw)
    if thought:
        changes.append("removed <think> reasoning")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        changes.append("converted CRLF/CR line endings to LF")
    code, notes = extract_code(text)
    changes += notes
    if not code.strip():
        raise IntakeError("empty", f"no code left after extraction ({len(raw)} characters of "
                          "designer output); expected a Python module with an environment class")
    code, notes = repair_fstring_braces(code)
    changes += notes
    tidy = re.sub(r"\A(?:[ \t]*\n)+", "", code).rstrip() + "\n"
    if tidy not in (code, code + "\n"):
        changes.append("trimmed blank lines and trailing whitespace at the ends of the code")
    err = _syntax_error(tidy)
    if err is not None:
        raise IntakeError("syntax_error", _syntax_message(err))
    class_name, kind = find_env_class(tidy)
    return IntakeResult(tidy, class_name, kind, tuple(changes))
