"""Grading a LiveCodeBench program (``spade.evals.livecodebench``): each test case run in the sandbox, the output
compared on the host.

Execution: never on the host. For every test case a fresh episode of our sandbox (``ctx.pool``:
forked, seccomp-restricted, no child processes, resource limits; see ``spade.sandbox``) loads
``HARNESS_SOURCE``, a trusted class with ``reset``/``step`` that runs the candidate in-process:
- stdin problems: the program runs as ``__main__`` after LCB's import prelude, with ``sys.stdin`` (and
  ``open(0)``) reading the test input and ``sys.stdout`` captured; ``SystemExit`` ends it normally;
- functional (LeetCode) problems: ``Solution().<func_name>(*args)`` with one JSON value per input line
  (LCB's format), a top-level tuple read as a list.
Each call is limited by the sandbox's ``call_timeout_s`` (LCB: 6 s per test); a timeout, crash or
exception fails the test. Expected outputs never enter the sandbox: the harness returns the program's
output and the host compares, so a program cannot fake a verdict.

Comparison (as LCB's ``testing_util``): stdin outputs line by line after stripping the whole text and
each line; a line that differs is compared as whitespace-separated ``Decimal`` numbers. Functional
outputs: the returned value == ``json.loads(expected)`` with Python's ``==`` (the harness encodes
tuples, non-string dict keys and other types so the host sees the same value, not a JSON-blurred one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from spade.seeding import derive_seed


# ------------------------------------------------------------------------------------------------ comparison
def stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str):
    try:
        return [Decimal(part) for part in line.split()]
    except (InvalidOperation, ValueError):
        return None


def stdio_match(output: str, expected: str) -> bool:
    """LCB's stdin comparison: same number of stripped lines; each equal as text or as Decimal numbers."""
    got, want = stripped_lines(output), stripped_lines(expected)
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


class _Opaque:
    """A returned value of a type JSON cannot carry (set, object...): equal to nothing, as in LCB's check."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__


def decode_value(value):
    """Invert the harness's tagged encoding (tuples, dicts with any keys, non-finite floats, other types)."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        if "$tuple" in value:
            return tuple(decode_value(v) for v in value["$tuple"])
        if "$dict" in value:
            return {decode_value(k): decode_value(v) for k, v in value["$dict"]}
        if "$float" in value:
            return float(value["$float"])
        return _Opaque(str(value.get("$other", "?")))
    return value


def functional_match(output: str, expected: str) -> bool:
    """LCB's call-based comparison: ``prediction == json.loads(expected)`` (top-level tuple read as list)."""
    try:
        got = decode_value(json.loads(output))
        want = json.loads(expected)
    except (ValueError, TypeError, KeyError, RecursionError):
        return False
    return bool(got == want)


# ------------------------------------------------------------------------------------------------ sandbox harness
# Runs INSIDE the sandbox (standard library only). One episode = one test case of one program.
HARNESS_SOURCE = r'''
import builtins
import io
import json
import sys

PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
_dumps = json.dumps


class _Sink(io.BytesIO):
    def close(self):  # a program that closes sys.stdout keeps what it wrote
        pass


def _exit(*args):
    raise SystemExit(*args)


def _encode(value):
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -10**4000 < value < 10**4000 else {"$other": "int too large"}
    if kind is float:
        return value if value - value == 0 else {"$float": repr(value)}
    if kind is list:
        return [_encode(v) for v in value]
    if kind is tuple:
        return {"$tuple": [_encode(v) for v in value]}
    if kind is dict:
        return {"$dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    return {"$other": kind.__name__}


class LCBHarness:
    def __init__(self, program="", func_name="", chunk=65536):
        self.program, self.func_name, self.chunk = program, func_name, chunk
        self.pieces, self.output = [], ""

    def reset(self, seed=None):
        return "ready", {}

    def _reply(self, payload):
        return _dumps(payload), 0.0, False, False, {}

    def step(self, action):
        request = json.loads(action)
        op = request.get("op")
        if op == "put":
            self.pieces.append(request["data"])
            return self._reply({"ok": True})
        if op == "run":
            self.pieces.append(request.get("data", ""))
            status, error = self._run("".join(self.pieces))
            return self._reply({"status": status, "error": error[:2000], "size": len(self.output),
                                "output": self.output[:self.chunk]})
        if op == "get":
            start = int(request["offset"])
            return self._reply({"output": self.output[start:start + self.chunk]})
        return self._reply({"status": "harness_error", "error": "unknown op %r" % (op,)})

    def _namespace(self):
        return {"__name__": "__main__", "__builtins__": builtins, "exit": _exit, "quit": _exit}

    def _run(self, text):
        try:
            code = compile(self.program, "<solution>", "exec")
        except BaseException as exc:
            return "compile_error", "%s: %s" % (type(exc).__name__, exc)
        if self.func_name:
            return self._run_call(code, text)
        return self._run_stdin(code, text)

    def _run_stdin(self, code, text):
        data = text.encode("utf-8")
        sink = _Sink()
        out = io.TextIOWrapper(sink, encoding="utf-8", write_through=True)
        real_open, saved = builtins.open, (sys.stdin, sys.stdout)

        def fake_open(file, mode="r", *args, **kwargs):
            if file == 0 and not isinstance(file, bool):
                return io.BytesIO(data) if "b" in mode else io.StringIO(text)
            return real_open(file, mode, *args, **kwargs)

        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        sys.stdout = out
        builtins.open = fake_open
        status, error = "ok", ""
        try:
            namespace = self._namespace()
            exec(PRELUDE, namespace)
            exec(code, namespace)
        except SystemExit:
            pass
        except BaseException as exc:
            status, error = "runtime_error", "%s: %s" % (type(exc).__name__, exc)
        finally:
            builtins.open = real_open
            sys.stdin, sys.stdout = saved
        try:
            out.flush()
        except BaseException:
            pass
        self.output = sink.getvalue().decode("utf-8", "replace")
        return status, error

    def _run_call(self, code, text):
        try:
            args = [json.loads(line) for line in text.split("\n")]
        except ValueError as exc:
            return "harness_error", "test input is not JSON lines: %s" % exc
        try:
            namespace = self._namespace()
            exec(PRELUDE, namespace)
            exec(code, namespace)
            if "Solution" in namespace:
                method = getattr(namespace["Solution"](), self.func_name)
            else:
                method = namespace[self.func_name]
            result = method(*args)
            if type(result) is tuple:
                result = list(result)
            self.output = _dumps(_encode(result))
        except SystemExit:
            self.output = _dumps({"$other": "SystemExit"})
        except BaseException as exc:
            return "runtime_error", "%s: %s" % (type(exc).__name__, exc)
        return "ok", ""
'''


@dataclass
class TestResult:
    passed: bool
    status: str  # ok | wrong_answer | runtime_error | compile_error | timeout | crash | output_limit |
    #              program_too_large | harness_error
    detail: str = ""


def run_test(pool, program: str, func_name: str, test: dict, seed: int) -> TestResult:
    """Run ``program`` on one test case in a fresh sandbox episode; the host compares the output."""
    limits = pool.config.limits
    # a chunk travels as JSON inside JSON: up to 7 bytes per character ('\\uXXXX'); keep under both caps
    chunk = max(1024, min(limits.max_request_bytes, limits.max_response_bytes) // 8)
    if len(json.dumps(program)) > limits.max_request_bytes // 2:
        return TestResult(False, "program_too_large", "program larger than half the sandbox request limit")
    episode = pool.open(HARNESS_SOURCE, "LCBHarness", seed=seed,
                        env_kwargs={"program": program, "func_name": func_name, "chunk": chunk})
    if not episode.opened.ok:
        return TestResult(False, "harness_error", episode.opened.describe())
    with episode:
        text = test["input"]
        pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)] or [""]
        for piece in pieces[:-1]:
            outcome = episode.step(json.dumps({"op": "put", "data": piece}))
            if not outcome.ok:
                return TestResult(False, "harness_error", outcome.describe())
        outcome = episode.step(json.dumps({"op": "run", "data": pieces[-1]}))
        if not outcome.ok:
            status = "timeout" if outcome.kind == "timeout" else "crash"
            return TestResult(False, status, outcome.describe())
        reply = _reply_payload(outcome.value[0])
        if reply.get("status") != "ok":
            return TestResult(False, str(reply.get("status", "harness_error")), str(reply.get("error", ""))[:500])
        size, output = reply.get("size"), str(reply.get("output", ""))
        if not isinstance(size, int) or size > 2 * len(test["output"]) + 65536:
            return TestResult(False, "output_limit", f"output of {size} characters")
        while len(output) < size:
            outcome = episode.step(json.dumps({"op": "get", "offset": len(output)}))
            piece = str(_reply_payload(outcome.value[0]).get("output", "")) if outcome.ok else ""
            if not piece:
                return TestResult(False, "harness_error", "output transfer stopped early")
            output += piece
    match = functional_match if func_name else stdio_match
    if match(output, test["output"]):
        return TestResult(True, "ok")
    return TestResult(False, "wrong_answer", f"got {output[:200]!r}")


def _reply_payload(observation) -> dict:
    try:
        payload = json.loads(observation)
    except (TypeError, ValueError):
        return {"status": "harness_error", "error": "unreadable harness reply"}
    return payload if isinstance(payload, dict) else {"status": "harness_error", "error": "malformed harness reply"}


def grade_program(pool, program: str, func_name: str, tests: list, seed: int) -> dict:
    """Run the tests in order until one fails (as LCB); returns passed, tests passed, and the failure."""
    if not program.strip():
        return {"passed": False, "tests_passed": 0, "tests": len(tests), "status": "no_code", "detail": ""}
    for index, test in enumerate(tests):
        result = run_test(pool, program, func_name, test, derive_seed(seed, "test", index))
        if not result.passed:
            return {"passed": False, "tests_passed": index, "tests": len(tests), "status": result.status,
                    "detail": result.detail}
    return {"passed": True, "tests_passed": len(tests), "tests": len(tests), "status": "ok", "detail": ""}
