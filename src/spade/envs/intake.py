"""Code intake: turn raw environment-designer output into clean source plus a change report.

Everything here is pure text processing plus ``ast``/``compile`` (bytecode is built for the
syntax check and thrown away; candidate code is never executed or imported).  Standard library
only, and no other ``spade`` module is imported.

Pipeline (see :func:`intake`): size check -> :func:`strip_think` -> line-ending normalisation
-> :func:`extract_code` -> :func:`repair_fstring_braces` -> whitespace tidy -> syntax check
-> :func:`find_env_class`.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import keyword
import re
import sys
import textwrap
import warnings
from dataclasses import dataclass

__all__ = ["REASONS", "IntakeError", "IntakeResult", "extract_code", "find_env_class",
           "intake", "repair_fstring_braces", "strip_think"]

REASONS = ("too_large", "empty", "syntax_error", "no_env_class", "multiple_env_classes")
TOOL_BASE = "ToolUseBaseEnv"
_MAX_REPAIR_ROUNDS = 25
_PY_TAGS = {"python", "py", "python3", "py3"}
_STRING_PREFIXES = {"", "r", "u", "f", "b", "br", "rb", "fr", "rf"}
_NESTED_QUOTES = sys.version_info >= (3, 12)  # PEP 701: f-string fields may reuse the quote
_BUILTIN_NAMES = frozenset(dir(builtins))

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_PY_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*(?:python3?|py3?)\b", re.M | re.I)
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_CODE_START = re.compile(r"^(?:import |from \S+ import |class |def |async def |@|#|\"\"\"|'''"
                         r"|[A-Za-z_]\w*\s*(?::[^=\n]+)?=[^=])")


class IntakeError(Exception):
    """Designer output that cannot become an environment; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class IntakeResult:
    code: str
    class_name: str
    kind: str  # "game" or "tool_use"
    changes: tuple[str, ...]


# ---------------------------------------------------------------------------------- helpers
def _compile_error(code: str) -> SyntaxError | None:
    """The SyntaxError compiling ``code`` raises (never executed), or None if it compiles."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, "<candidate>", "exec", dont_inherit=True)
    except SyntaxError as err:
        return err
    except (ValueError, RecursionError, MemoryError) as err:  # null bytes, absurd nesting
        return SyntaxError(f"{type(err).__name__}: {err}")
    return None


def _parses(expr: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _syntax_message(err: SyntaxError) -> str:
    text = (err.text or "").strip()
    shown = f" in {text[:100]!r}" if text else ""
    return f"line {err.lineno or '?'}: {err.msg}{shown}; expected Python source that compiles"


# ---------------------------------------------------------------------------------- think
def strip_think(text: str) -> tuple[str, bool]:
    """Remove model reasoning: closed ``<think>...</think>`` blocks; text before a stray
    ``</think>``; an unclosed ``<think>`` up to the next python fence (or to the end if none)."""
    out = _THINK_BLOCK.sub("", text)
    strays = list(_THINK_CLOSE.finditer(out))
    if strays:
        out = out[strays[-1].end():]
    opener = _THINK_OPEN.search(out)
    if opener:
        fence = _PY_FENCE_LINE.search(out, opener.end())
        out = out[:opener.start()] + (out[fence.start():] if fence else "")
    return out, out != text


# ---------------------------------------------------------------------------------- fences
def _fenced_blocks(lines: list[str]) -> list[tuple[str, int, int | None]]:
    """(tag, opening line index, closing line index or None when unclosed) for each block."""
    blocks, current = [], None
    for idx, line in enumerate(lines):
        m = _FENCE.match(line)
        if not m:
            continue
        fence, info = m["fence"], m["info"]
        if current is None:
            current = (fence, (info.split() or [""])[0].lower(), idx)
        elif fence[0] == current[0][0] and len(fence) >= len(current[0]) and not info:
            blocks.append((current[1], current[2], idx))
            current = None
    if current is not None:
        blocks.append((current[1], current[2], None))
    return blocks


def _trim_prose(text: str) -> tuple[str, list[str]]:
    """For unfenced output that does not compile: drop prose before the first code-looking
    line, then (only if that makes it compile) up to three trailing prose paragraphs."""
    notes, lines = [], text.split("\n")
    first = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), 0)
    if first:
        lines = lines[first:]
        notes.append(f"dropped {first} line(s) of prose before the code")
    for cut in range(1, 4) if _compile_error("\n".join(lines)) is not None else ():
        paragraphs = re.split(r"\n[ \t]*\n", "\n".join(lines).rstrip())
        if len(paragraphs) <= cut:
            break
        candidate = "\n\n".join(paragraphs[:-cut]) + "\n"
        if _compile_error(candidate) is None:
            notes.append(f"dropped {cut} trailing paragraph(s) of prose after the code")
            return candidate, notes
    return "\n".join(lines), notes


def extract_code(text: str) -> tuple[str, list[str]]:
    """Pick the code out of markdown.  Text that already compiles is kept whole; otherwise the
    first python-tagged fenced block, else the first untagged block containing ``class ``, else
    everything after an unclosed fence, else the whole text (leading prose dropped).  Stray
    fence lines are then removed (only if the code does not compile with them) and the code
    is dedented."""
    if _compile_error(text) is None:
        return text, []
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    blocks = _fenced_blocks(lines)
    body = lambda b: lines[b[1] + 1:len(lines) if b[2] is None else b[2]]  # noqa: E731
    python = [b for b in blocks if b[0] in _PY_TAGS]
    untagged = [b for b in blocks if not b[0] and "class " in "".join(body(b))]
    unclosed = [b for b in blocks if b[2] is None]
    notes: list[str] = []
    if python or untagged:
        chosen = python[0] if python else untagged[0]
        kind = f"```{chosen[0]} block" if python else "untagged ``` block containing a class"
        if chosen[2] is None:
            notes.append(f"took unclosed {kind} from line {chosen[1] + 1} to the end")
        else:
            notes.append(f"took first {kind} ({len(blocks)} fenced block(s) found)")
            if _compile_error("".join(body(chosen))) is not None:  # a fence inside a string?
                later = [b[2] for b in blocks if b[2] is not None and b[1] > chosen[1]]
                later += [b[1] for b in blocks if b[1] > chosen[1]]
                for close in sorted(later):
                    if _compile_error("".join(body((chosen[0], chosen[1], close)))) is None:
                        notes.append(f"extended the block to the fence on line {close + 1}")
                        chosen = (chosen[0], chosen[1], close)
                        break
        code_lines = body(chosen)
    elif unclosed:
        notes.append(f"took everything after the unclosed fence on line {unclosed[0][1] + 1}")
        code_lines = body(unclosed[0])
    else:
        code_lines = lines
        if blocks:
            notes.append(f"no python block among {len(blocks)} fenced block(s); used whole text")
    code = "".join(code_lines)
    if _compile_error(code) is not None:
        kept = [ln for ln in code_lines if not _FENCE.match(ln)]
        if len(kept) != len(code_lines):
            notes.append(f"removed {len(code_lines) - len(kept)} stray fence line(s)")
            code = "".join(kept)
    dedented = textwrap.dedent(code)
    if dedented != code:
        notes.append("removed common indentation")
        code = dedented
    if not blocks and code.strip() and _compile_error(code) is not None:
        code, prose_notes = _trim_prose(code)
        notes += prose_notes
    return code, notes


# ---------------------------------------------------------------------------------- f-strings
@dataclass(frozen=True)
class _Literal:
    start: int  # offset of the prefix
    quote_at: int
    end: int  # offset just past the closing quote
    prefix: str
    quote: str
    closed: bool

    @property
    def is_f(self) -> bool:
        return "f" in self.prefix.lower()

    @property
    def body(self) -> tuple[int, int]:
        return self.quote_at + len(self.quote), self.end - (len(self.quote) if self.closed else 0)


def _prefix_before(src: str, pos: int) -> str:
    start = pos
    while start and (src[start - 1].isalnum() or src[start - 1] == "_"):
        start -= 1
    prefix = src[start:pos]
    return prefix if prefix.lower() in _STRING_PREFIXES else ""


def _string_end(src: str, q: int, track_fields: bool, level: int = 0) -> int:
    """Offset just past the literal whose opening quote is at ``src[q]`` (the newline or end
    of text if unterminated).  ``track_fields``: PEP 701 nesting inside ``{...}``."""
    quote = src[q] * 3 if src.startswith(src[q] * 3, q) else src[q]
    i, depth = q + len(quote), 0
    while i < len(src):
        c = src[i]
        if depth == 0 and src.startswith(quote, i):
            return i + len(quote)
        if c == "\\":
            i += 2
            continue
        if c == "\n" and depth == 0 and len(quote) == 1:
            return i
        if track_fields and level < 16 and c == "{":
            if depth == 0 and src.startswith("{{", i):
                i += 1
            else:
                depth += 1
        elif track_fields and c == "}" and depth:
            depth -= 1
        elif track_fields and depth and c in "'\"":
            i = _string_end(src, i, "f" in _prefix_before(src, i).lower(), level + 1)
            continue
        i += 1
    return len(src)


def _string_literals(code: str) -> list[_Literal]:
    """All top-level string literals of ``code`` (comments skipped), found by scanning text."""
    found, i = [], 0
    while i < len(code):
        c = code[i]
        if c == "#":
            newline = code.find("\n", i)
            i = len(code) if newline < 0 else newline
        elif c in "'\"":
            prefix, quote = _prefix_before(code, i), c * 3 if code.startswith(c * 3, i) else c
            closed_at = lambda e: e - i >= 2 * len(quote) and code.startswith(quote, e - len(quote))  # noqa: E731
            end = _string_end(code, i, _NESTED_QUOTES and "f" in prefix.lower())
            flat_end = _string_end(code, i, False)  # 3.11 reading: first matching quote ends it
            if not closed_at(end) and closed_at(flat_end):  # a stray '{' swallowed the quote
                end = flat_end
            found.append(_Literal(i - len(prefix), i, end, prefix, quote, closed_at(end)))
            i = end
        else:
            i += 1
    return found


def _fields(body: str, raw: bool) -> list[tuple[str, int, int]]:
    """Brace items of an f-string body: ("field", s, e) for ``{...}``, ("lone", s, e) for an
    unmatched ``}``, ("open", s, e) for a ``{`` that is never closed.  ``{{``/``}}`` skipped."""
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
            end = _field_end(body, i)
            items.append(("open", i, i + 1) if end is None else ("field", i, end))
            i = i + 1 if end is None else end
        else:
            i += 1
    return items


def _field_end(body: str, start: int) -> int | None:
    depth, j = 0, start
    while j < len(body):
        c = body[j]
        if c in "'\"":
            j = _string_end(body, j, _NESTED_QUOTES and "f" in _prefix_before(body, j).lower())
            continue
        depth += (c == "{") - (c == "}")
        if c == "}" and depth == 0:
            return j + 1
        j += 1
    return None


def _line_finder(code: str):
    starts = [m.end() for m in re.finditer("\n", code)]
    return lambda offset: bisect.bisect_right(starts, offset) + 1


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _repair_literal(code: str, lit: _Literal, line_of) -> tuple[str, list[str]] | None:
    """Escape the invalid brace items of one f-string; None unless that makes it parse."""
    body_start, body_end = lit.body
    body = code[body_start:body_end]
    wrap = lambda text: lit.prefix + lit.quote + text + lit.quote  # noqa: E731
    pieces, notes, last = [], [], 0
    for kind, s, e in _fields(body, "r" in lit.prefix.lower()):
        if kind == "field" and _parses(wrap(body[s:e])):
            continue
        pieces += [body[last:s], _escape(body[s:e])]
        last = e
        what = {"field": f"literal braces {body[s:e][:60]}", "lone": "lone '}'",
                "open": "unmatched '{'"}[kind]
        notes.append(f"escaped {what} in f-string on line {line_of(body_start + s)}")
    new_literal = wrap("".join(pieces) + body[last:])
    if not notes or not _parses(new_literal):
        return None
    return code[:lit.start] + new_literal + code[lit.end:], notes


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, parameters, imports, defs, ...)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _escape_boxed_names(code: str) -> tuple[str, list[str]]:
    """In compiling code, escape ``\\boxed{NAME}`` fields whose NAME the module never binds."""
    bound = _bound_names(ast.parse(code))
    if "*" in bound:  # star import: anything might be defined
        return code, []
    line_of, edits, known = _line_finder(code), [], bound | _BUILTIN_NAMES
    for lit in _string_literals(code):
        if not (lit.is_f and lit.closed):
            continue
        body_start, body_end = lit.body
        body = code[body_start:body_end]
        for kind, s, e in _fields(body, "r" in lit.prefix.lower()):
            name = body[s + 1:e - 1].strip()
            if (kind == "field" and body[:s].endswith("\\boxed") and name.isidentifier()
                    and not keyword.iskeyword(name) and name not in known):
                edits.append((body_start + s, body_start + e, body[s:e]))
    notes = []
    for start, end, field in reversed(edits):
        code = code[:start] + _escape(field) + code[end:]
        notes.insert(0, f"escaped literal braces {field} in f-string on line {line_of(start)}"
                        f" ('{field[1:-1].strip()}' is not defined in the module)")
    return code, notes


def repair_fstring_braces(code: str) -> tuple[str, list[str]]:
    """Fix literal braces in f-strings.  While compilation fails inside an f-string, escape
    that literal's empty/invalid ``{...}`` fields and unmatched braces (bounded rounds).  Once
    the code compiles, escape ``\\boxed{NAME}`` fields whose NAME is defined nowhere."""
    notes: list[str] = []
    for _ in range(_MAX_REPAIR_ROUNDS):
        err = _compile_error(code)
        if err is None:
            break
        line_of = _line_finder(code)
        broken = [lit for lit in _string_literals(code)
                  if lit.is_f and lit.closed and not _parses(code[lit.start:lit.end])]
        at_error = [lit for lit in broken
                    if err.lineno and line_of(lit.start) <= err.lineno <= line_of(lit.end - 1)]
        if not at_error and str(err.msg).startswith("f-string"):
            at_error = broken[:1]
        repaired = _repair_literal(code, at_error[0], line_of) if at_error else None
        if repaired is None:
            return code, notes
        code, new_notes = repaired
        notes += new_notes
    if _compile_error(code) is None:
        code, boxed_notes = _escape_boxed_names(code)
        notes += boxed_notes
    return code, notes


# ---------------------------------------------------------------------------------- classes
def _base_name(expr: ast.expr) -> str:
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return expr.id if isinstance(expr, ast.Name) else ""


def find_env_class(code: str) -> tuple[str, str]:
    """(class_name, kind) of the single environment class; kind is "tool_use" or "game".
    Candidates: top-level classes that (with their in-module bases) define ``reset`` and
    ``step`` or derive from ToolUseBaseEnv; the most-derived candidate wins."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except SyntaxError as err:
        raise IntakeError("syntax_error", _syntax_message(err)) from None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    bases = {name: [_base_name(b) for b in node.bases] for name, node in classes.items()}

    def lineage(name: str, seen: frozenset = frozenset()) -> tuple[set[str], bool]:
        """(method names incl. in-module bases, derives from ToolUseBaseEnv)."""
        methods = {n.name for n in classes[name].body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        tool = TOOL_BASE in bases[name]
        for base in bases[name]:
            if base in classes and base not in seen | {name}:
                base_methods, base_tool = lineage(base, seen | {name})
                methods |= base_methods
                tool = tool or base_tool
        return methods, tool

    info = {name: lineage(name) for name in classes}
    candidates = [n for n, (methods, tool) in info.items() if tool or {"reset", "step"} <= methods]
    leaves = [n for n in candidates if not any(n in bases[other] for other in candidates)]
    if not leaves:
        found = ", ".join(classes) or "none"
        raise IntakeError("no_env_class", f"no top-level class defines reset() and step() or "
                          f"subclasses {TOOL_BASE} (top-level classes: {found}); expected one")
    if len(leaves) > 1:
        named = ", ".join(f"{n} (line {classes[n].lineno})" for n in leaves)
        raise IntakeError("multiple_env_classes", f"found {len(leaves)} environment classes: "
                          f"{named}; expected exactly one")
    return leaves[0], "tool_use" if info[leaves[0]][1] else "game"


# ---------------------------------------------------------------------------------- pipeline
def intake(raw: str, max_chars: int = 200_000) -> IntakeResult:
    """Raw designer output -> :class:`IntakeResult`, or :class:`IntakeError`."""
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
    if code.startswith("\ufeff"):
        code = code[1:]
        changes.append("removed byte-order mark")
    if not code.strip():
        raise IntakeError("empty", f"no code left after extraction ({len(raw)} characters of "
                          "designer output); expected a Python module with an environment class")
    code, notes = repair_fstring_braces(code)
    changes += notes
    tidy = re.sub(r"\A(?:[ \t]*\n)+", "", code).rstrip() + "\n"
    if tidy != code and tidy != code + "\n":
        changes.append("trimmed blank lines and trailing whitespace at the ends of the code")
    code = tidy
    err = _compile_error(code)
    if err is not None:
        raise IntakeError("syntax_error", _syntax_message(err))
    class_name, kind = find_env_class(code)
    return IntakeResult(code, class_name, kind, tuple(changes))
