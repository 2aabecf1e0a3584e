"""The scoring child of ``reasoning_gym_hard`` (``spade.evals.reasoning_gym``): every ``reasoning_gym`` dataset is
built, and every answer scored, in one persistent child process (``ScorerProcess``), never in the evaluating process:
- several scorers of reasoning-gym 0.1.25 pass the model's answer to ``eval`` (binary_matrix, n_queens,
  spiral_matrix, string_insertion) or to ``sympy.parse_expr``, which is ``eval`` (countdown, puzzle24,
  polynomial_multiplication, simple/intermediate_integration). In the child those names are shadowed,
  module by module, by ``ast.literal_eval`` and by a ``parse_expr`` that first accepts only plain math
  text (digits, operators, parentheses, single-letter symbols, common function names). A rejected
  answer scores as an unparsable one (the scorer's own ``except`` path). Deviation: a non-literal Python
  expression such as ``list('abc')`` no longer earns those scorers' 0.1/0.5 format-tolerance credit.
  ``GUARDED_MODULES`` lists every vetted module; ``spade.evals.reasoning_gym.check_tasks`` refuses a task whose
  module uses eval-like calls and is not among them.
- a score that takes longer than ``score_timeout_s`` (a sympy ``simplify`` of a monstrous answer, an
  exponent bomb) kills the child (by its pid, as a process group); the item scores 0 and the record says so.
- the child runs with ``PYTHONHASHSEED=0``: five generators (isomorphic_strings, knight_swap,
  polynomial_multiplication, ransom_note, word_ladder) iterate over string sets, so their questions
  would otherwise change from process to process.

The host side (``ScorerProcess``) sends one JSON request per line (``entries``: questions and reference answers;
``score``: one answer) and reads one JSON reply per line, each under a wall-clock limit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

from spade.seeding import derive_seed

# --- scorer guards (reasoning-gym 0.1.25, read line by line) --------------------------------------
# modules whose score_answer calls the builtin ``eval`` on text: shadowed by ast.literal_eval
EVAL_MODULES = ("reasoning_gym.algorithmic.binary_matrix", "reasoning_gym.algorithmic.number_sorting",
                "reasoning_gym.algorithmic.spiral_matrix", "reasoning_gym.algorithmic.string_insertion",
                "reasoning_gym.games.n_queens")
# modules that imported sympy's ``parse_expr`` by name: replaced by the guarded version
PARSE_EXPR_MODULES = ("reasoning_gym.games.countdown", "reasoning_gym.games.puzzle24")
# modules that call ``<alias>.parse_expr`` on the sympy module: the alias is replaced by a guarded proxy
SYMPY_ALIAS_MODULES = {"reasoning_gym.algebra.simple_integration": "sympy",
                       "reasoning_gym.algebra.intermediate_integration": "sympy",
                       "reasoning_gym.algebra.polynomial_multiplication": "sp"}
# modules that use eval/exec/a parse_expr of their own only on trusted, generated text (read: safe)
TRUSTED_MODULES = ("reasoning_gym.arithmetic.basic_arithmetic", "reasoning_gym.arithmetic.bitwise_arithmetic",
                   "reasoning_gym.code.codeio",
                   "reasoning_gym.logic.propositional_logic")
GUARDED_MODULES = frozenset(EVAL_MODULES + PARSE_EXPR_MODULES + tuple(SYMPY_ALIAS_MODULES) + TRUSTED_MODULES)
RISKY_SOURCE = re.compile(r"(?<![\w.])(eval|exec)\(|parse_expr|sympify|parse_latex|pickle|__import__")

MATH_TEXT = re.compile(r"[0-9A-Za-z\s+\-*/^().,]*")
MATH_NAMES = frozenset("sin cos tan cot sec csc asin acos atan acot sinh cosh tanh exp log ln sqrt pi oo Abs abs"
                       .split())
MAX_MATH_CHARS = 4000

STARTUP_TIMEOUT_S = 120.0  # child start: importing reasoning_gym, numpy and sympy on a loaded machine
GENERATION_RETRIES = 10  # further seeds tried for a question whose generator raises (see _Datasets)


# ------------------------------------------------------------------------------------------------ the child
def check_math_text(text) -> None:
    """Accept only plain math text before sympy's ``parse_expr`` (which ``eval`` s it); else ValueError."""
    if not isinstance(text, str) or len(text) > MAX_MATH_CHARS or not MATH_TEXT.fullmatch(text):
        raise ValueError("not plain math text")
    for name in re.findall(r"[A-Za-z]+", text):
        if len(name) > 1 and name not in MATH_NAMES:
            raise ValueError(f"name {name[:20]!r} is not allowed in math text")


class _GuardLog:
    rejected = 0  # answers refused by a guard during the current request


def _guarded_literal_eval(text, *args, **kwargs):
    """Stands in for the builtin ``eval`` inside the modules of EVAL_MODULES."""
    if args or kwargs or not isinstance(text, str):
        _GuardLog.rejected += 1
        raise ValueError("eval with a namespace or a non-string is refused")
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        _GuardLog.rejected += 1
        raise ValueError("not a Python literal") from None


def _guard_parse_expr(parse_expr):
    def guarded(text, *args, **kwargs):
        try:
            check_math_text(text)
        except ValueError:
            _GuardLog.rejected += 1
            raise
        return parse_expr(text, *args, **kwargs)

    return guarded


class _SympyProxy:
    """The sympy module with a guarded ``parse_expr``; every other attribute is sympy's own."""

    def __init__(self, sympy_module):
        self._sympy = sympy_module
        self.parse_expr = _guard_parse_expr(sympy_module.parse_expr)

    def __getattr__(self, name):
        return getattr(self._sympy, name)


def install_guards() -> None:
    """Shadow eval / parse_expr in the vetted reasoning_gym modules (child process only)."""
    import importlib

    import sympy

    for name in EVAL_MODULES:
        importlib.import_module(name).eval = _guarded_literal_eval  # a module global shadows the builtin
    for name in PARSE_EXPR_MODULES:
        module = importlib.import_module(name)
        module.parse_expr = _guard_parse_expr(module.parse_expr)
    for name, alias in SYMPY_ALIAS_MODULES.items():
        module = importlib.import_module(name)
        if getattr(module, alias) is not sympy:
            raise RuntimeError(f"{name}.{alias} is not the sympy module; the guard table does not fit this version")
        setattr(module, alias, _SympyProxy(sympy))


class _Datasets:
    """The child's cache of built datasets and generated entries, keyed by (task, params, seed, size).

    A generator may fail for some seeds (knight_swap with the hard parameters sometimes finds no valid
    board in its 100 tries and raises). Entry ``i`` is then drawn again, as entry ``i`` of the dataset with
    seed ``derive_seed(seed, "retry", k)``, k = 1, 2, ...: deterministic, and scored by that dataset.
    """

    def __init__(self):
        self.cache: dict = {}

    def dataset(self, request: dict, seed: int):
        import reasoning_gym

        key = (request["task"], json.dumps(request["params"], sort_keys=True), seed, request["size"])
        if key not in self.cache:
            self.cache[key] = reasoning_gym.create_dataset(request["task"], seed=seed, size=request["size"],
                                                           **request["params"])
        return self.cache[key]

    def entry(self, request: dict, index: int) -> tuple:
        """(dataset, entry, retry k) of question ``index``; the same on every call."""
        key = ("entry", request["task"], json.dumps(request["params"], sort_keys=True), request["seed"],
               request["size"], index)
        if key not in self.cache:
            for attempt in range(GENERATION_RETRIES + 1):
                seed = request["seed"] if attempt == 0 else derive_seed(request["seed"], "retry", attempt)
                dataset = self.dataset(request, seed)
                try:
                    self.cache[key] = (dataset, dataset[index], attempt)
                    break
                except Exception:  # the package's generators raise all kinds
                    if attempt == GENERATION_RETRIES:
                        raise
        return self.cache[key]


def _plain_answer(answer):
    return answer if answer is None or isinstance(answer, str) else str(answer)


def handle_request(datasets: _Datasets, request: dict) -> dict:
    """One child request: ``entries`` (questions and reference answers) or ``score`` (one answer)."""
    if request["op"] == "entries":
        rows = [datasets.entry(request, i) for i in request["indices"]]
        return {"entries": [{"question": e["question"], "answer": _plain_answer(e["answer"]), "retry": k}
                            for _, e, k in rows]}
    if request["op"] == "score":
        dataset, entry, _ = datasets.entry(request, request["index"])
        _GuardLog.rejected = 0
        score = dataset.score_answer(request["answer"], entry)
        return {"score": float(score), "guard_rejected": _GuardLog.rejected}
    raise ValueError(f"unknown op {request['op']!r}")


def child_main() -> None:
    """Entry point of the scoring child: JSON lines in on stdin, JSON lines out on the original stdout."""
    import resource

    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the package prints now and then: keep it off the protocol stream
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory_mb:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    import reasoning_gym  # noqa: F401

    install_guards()
    datasets = _Datasets()
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin.buffer:
        try:
            reply = handle_request(datasets, json.loads(line))
        except Exception as exc:  # any failure of the package becomes an answer to the host
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        out.write(json.dumps(reply) + "\n")


CHILD_BOOT = "from spade.evals.reasoning_gym_scorer import child_main; child_main()"


class ScorerFailed(Exception):
    """The child did not answer in time or died; it has been killed and restarts on the next request."""


class ScorerProcess:
    """Host side of the child: one request at a time, each with a wall-clock limit."""

    def __init__(self, memory_mb: int = 0):
        self.memory_mb = memory_mb
        self.proc: subprocess.Popen | None = None
        self._stderr = None
        self._buffer = b""

    def start(self) -> None:
        env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD_BOOT, str(self.memory_mb)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env, start_new_session=True)
        self._buffer = b""
        try:
            ready = self._read(STARTUP_TIMEOUT_S)
        except ScorerFailed as exc:
            detail = self._stderr_tail()
            self.stop()
            raise RuntimeError(f"the reasoning-gym scoring process did not start ({exc}): {detail}") from None
        if not ready.get("ready"):
            self.stop()
            raise RuntimeError(f"the reasoning-gym scoring process sent {ready!r} instead of its ready line")

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode("utf-8", "replace").strip()

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ScorerFailed(f"no answer within {timeout:.3g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ScorerFailed(f"the process exited ({self.proc.poll()})")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request; ``ScorerFailed`` (child killed) when it does not answer within ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
            return self._read(timeout)
        except (ScorerFailed, BrokenPipeError) as exc:
            self.stop()
            raise ScorerFailed(str(exc)) from None

    def stop(self) -> None:
        """Kill the child (its own process group, by its pid) and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
