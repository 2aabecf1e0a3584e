"""Reasoning Gym, hard split: 100 procedural tasks rolled into the paper's four columns (spec section 9).

What is measured: for each task of ``reasoning_gym_hard.yaml`` (the hard-column parameters of the
Reasoning Gym paper, arXiv 2505.24760, Appendix A.3) the model answers ``episodes_per_task`` questions
drawn from the package's own dataset generator, with at most ``max_turns`` (paper: 2) model turns per
question. Turn 1 shows the question plus the package's answer-format instruction; when the answer scores
below 1 and a turn is left, the model is told its answer is not correct (nothing about the solution)
and answers again. An item's score is the package's own ``score_answer`` of the *final* answer
(``turn_scoring="max"``: best over turns). Scores lie in [0, 1]; some tasks pay partial credit.

Metrics (paper columns):
- ``math`` / ``algorithmic`` / ``cognition`` / ``logic``: mean over the bucket's tasks of each task's mean
  item score (task-weighted; with equal episodes per task this equals the item-weighted mean). ``n`` =
  number of tasks, stderr over the task means. A task's bucket is the second component of its dataset
  class's module path (``reasoning_gym.<category>.<task>``): Math = algebra + arithmetic + geometry +
  graphs (31 tasks), Algorithmic = algorithmic + code (36), Cognition = arc + games + cognition (24),
  Logic = logic + induction (9). A task of any other category is an error, never silently dropped.
- ``overall``: mean over all items; ``task/<name>``: mean over that task's items.

Items: one per (task, episode), id ``<task>/<episode:03d>``. The task's dataset is
``reasoning_gym.create_dataset(task, seed=derive_seed(eval seed, "eval", "reasoning_gym_hard",
"dataset", task), size=episodes_per_task, **params)`` and the item's entry is ``dataset[episode]`` (a
question whose generator raises is drawn again with a derived seed, see ``_Datasets``). The final answer is
the last ``<answer>...</answer>`` (the package's ``extract_answer``; ``answer_format="boxed"``: the last
``\\boxed{...}``) of the reply's text after any ``</think>``.

Safety and determinism: every ``reasoning_gym`` dataset is built, and every answer scored, in one
persistent child process (``ScorerProcess``), never in the evaluating process:
- several scorers of reasoning-gym 0.1.25 pass the model's answer to ``eval`` (binary_matrix, n_queens,
  spiral_matrix, string_insertion) or to ``sympy.parse_expr``, which is ``eval`` (countdown, puzzle24,
  polynomial_multiplication, simple/intermediate_integration). In the child those names are shadowed,
  module by module, by ``ast.literal_eval`` and by a ``parse_expr`` that first accepts only plain math
  text (digits, operators, parentheses, single-letter symbols, common function names). A rejected
  answer scores as an unparsable one (the scorer's own ``except`` path). Deviation: a non-literal Python
  expression such as ``list('abc')`` no longer earns those scorers' 0.1/0.5 format-tolerance credit.
  A task whose module uses eval-like calls and is not vetted here is refused (``check_data``).
- a score that takes longer than ``score_timeout_s`` (a sympy ``simplify`` of a monstrous answer, an
  exponent bomb) kills the child (by its pid, as a process group); the item scores 0 and the record says so.
- the child runs with ``PYTHONHASHSEED=0``: five generators (isomorphic_strings, knight_swap,
  polynomial_multiplication, ransom_note, word_ladder) iterate over string sets, so their questions
  would otherwise change from process to process.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from spade.configtools import ConfigError, option
from spade.evals.base import (Benchmark, Conversation, EvalContext, Item, ItemRecord, Metric, mean_metric,
                              play_conversations, prompt_hash)
from spade.evals.registry import register_benchmark
from spade.seeding import derive_seed

NAME = "reasoning_gym_hard"
PACKAGE_VERSION = "0.1.25"  # the version whose scorers were read and guarded (see the module docstring)
INSTALL_HINT = f"pip install --no-deps reasoning-gym=={PACKAGE_VERSION} (see setup.sh for its dependencies)"

# the paper's four columns, by the package's own category (second component of the dataset's module path)
BUCKETS = {
    "math": ("algebra", "arithmetic", "geometry", "graphs"),
    "algorithmic": ("algorithmic", "code"),
    "cognition": ("arc", "games", "cognition"),
    "logic": ("logic", "induction"),
}
CATEGORY_TO_BUCKET = {category: bucket for bucket, categories in BUCKETS.items() for category in categories}

ANSWER_FORMATS = ("answer_tag", "boxed")
TURN_SCORING = ("final", "max")

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
ENTRIES_TIMEOUT_S = 600.0  # building a batch of questions (knight_swap: ~1 s per question here)


@dataclass(frozen=True)
class ReasoningGymConfig:
    tasks_file: str = option("", "YAML file with a `configs:` mapping task name -> dataset parameters; empty = the "
                             "packaged hard split (100 tasks, paper Appendix A.3 of the Reasoning Gym paper).")
    tasks: list = option([], "Tasks to evaluate; empty = every task of the tasks file (paper: all 100). A subset "
                         "is for toy runs; bucket metrics then cover only the tasks present.")
    episodes_per_task: int = option(8, "Questions (episodes) per task (paper: 8). Also the dataset size, so "
                                    "question i of a task is the same for any value above i, except for acre and "
                                    "list_functions, whose generators depend on the dataset size.", min=1)
    max_turns: int = option(2, "Most model turns per question; a wrong answer is retried while turns are left "
                            "(paper: 2).", min=1)
    answer_format: str = option("answer_tag", "How the model gives its final answer: 'answer_tag' = the package's "
                                "own convention (<answer>...</answer>, its default instruction, last tag counts); "
                                "'boxed' = the last \\boxed{...} (the SPADE agent's and GEM's convention).",
                                choices=ANSWER_FORMATS)
    turn_scoring: str = option("final", "Item score: 'final' = score of the final answer (default); 'max' = best "
                               "score over the turns.", choices=TURN_SCORING)
    score_timeout_s: float = option(30.0, "Wall-clock limit for scoring one answer; past it the scoring process is "
                                    "killed and the item scores 0 (sympy can hang on pathological answers).",
                                    min=0.1)
    scorer_memory_mb: int = option(4096, "Address-space limit of the scoring process, MiB; 0 = no limit.", min=0)


# ------------------------------------------------------------------------------------------------ task list
def packaged_tasks_text() -> str:
    return resources.files("spade.evals").joinpath("data/reasoning_gym_hard.yaml").read_text(encoding="utf-8")


def parse_tasks(text: str, where: str) -> dict[str, dict]:
    """``{task: params}`` from the YAML text of a tasks file; malformed files raise ``ConfigError``."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config key 'eval.{NAME}.tasks_file': {where} is not valid YAML ({exc})") from None
    configs = data.get("configs") if isinstance(data, dict) else None
    if not isinstance(configs, dict) or not configs:
        raise ConfigError(f"config key 'eval.{NAME}.tasks_file': {where} has no non-empty `configs:` mapping of "
                          "task name -> parameters (see the packaged reasoning_gym_hard.yaml)")
    tasks = {}
    for task, params in configs.items():
        params = {} if params is None else params
        if not isinstance(task, str) or not isinstance(params, dict):
            raise ConfigError(f"config key 'eval.{NAME}.tasks_file': {where} entry {task!r} must map a task name "
                              f"to a mapping of parameters, got {params!r}")
        tasks[task] = dict(params)
    return tasks


def load_tasks(config: ReasoningGymConfig) -> dict[str, dict]:
    """The task parameters of the tasks file, restricted to ``config.tasks`` when it is set."""
    if config.tasks_file:
        path = Path(config.tasks_file)
        if not path.is_file():
            raise ConfigError(f"config key 'eval.{NAME}.tasks_file' has value {config.tasks_file!r}, which is not a "
                              "file; leave it empty for the packaged hard split")
        tasks = parse_tasks(path.read_text(encoding="utf-8"), str(path))
    else:
        tasks = parse_tasks(packaged_tasks_text(), "the packaged reasoning_gym_hard.yaml")
    if not config.tasks:
        return tasks
    unknown = [t for t in config.tasks if t not in tasks]
    if unknown:
        raise ConfigError(f"config key 'eval.{NAME}.tasks' names unknown task(s) {unknown}; allowed: "
                          f"{', '.join(sorted(tasks))}")
    return {t: tasks[t] for t in dict.fromkeys(config.tasks)}


def import_reasoning_gym():
    """The installed package, refused when its version is not the one whose scorers were vetted."""
    from importlib import metadata

    try:
        version = metadata.version("reasoning-gym")
        import reasoning_gym
    except (metadata.PackageNotFoundError, ImportError) as exc:
        raise ConfigError(f"benchmark {NAME!r} needs the package reasoning-gym ({exc}); {INSTALL_HINT}") from None
    if version != PACKAGE_VERSION:
        raise ConfigError(f"benchmark {NAME!r} is vetted for reasoning-gym=={PACKAGE_VERSION} (its scorers' use "
                          f"of eval is guarded module by module), but {version} is installed; {INSTALL_HINT}")
    return reasoning_gym


def task_category(task: str) -> str:
    """The package's category of a task: second component of its dataset class's module path."""
    from reasoning_gym.factory import DATASETS

    parts = DATASETS[task][0].__module__.split(".")
    return parts[1] if len(parts) >= 3 else "other"


def check_tasks(tasks: dict[str, dict]) -> dict[str, str]:
    """Validate task names, parameters and categories; returns ``{task: bucket}``."""
    import inspect

    import_reasoning_gym()
    from reasoning_gym.factory import DATASETS

    unknown = [t for t in tasks if t not in DATASETS]
    if unknown:
        raise ConfigError(f"config key 'eval.{NAME}.tasks_file' lists task(s) {unknown} that reasoning-gym "
                          f"{PACKAGE_VERSION} does not have; allowed: {', '.join(sorted(DATASETS))}")
    buckets = {}
    for task, params in tasks.items():
        dataset_cls, config_cls = DATASETS[task]
        category = task_category(task)
        if category not in CATEGORY_TO_BUCKET:
            raise ConfigError(f"task {task!r} (config key 'eval.{NAME}.tasks_file') has category {category!r}, which "
                              f"is in none of the paper's columns; allowed categories: {sorted(CATEGORY_TO_BUCKET)}")
        module = sys.modules[dataset_cls.__module__]
        if module.__name__ not in GUARDED_MODULES and RISKY_SOURCE.search(inspect.getsource(module)):
            raise ConfigError(f"task {task!r} (config key 'eval.{NAME}.tasks_file'): its module {module.__name__} "
                              "calls eval/exec/parse_expr and is not vetted by this benchmark; remove the task")
        try:
            task_config = config_cls(**params)
            if hasattr(task_config, "validate"):
                task_config.validate()
        except (TypeError, ValueError, AssertionError) as exc:
            raise ConfigError(f"config key 'eval.{NAME}.tasks_file': parameters {params!r} of task {task!r} are "
                              f"invalid ({exc})") from None
        buckets[task] = CATEGORY_TO_BUCKET[category]
    return buckets


def dataset_seed(eval_seed: int, task: str) -> int:
    return derive_seed(eval_seed, "eval", NAME, "dataset", task)


# ------------------------------------------------------------------------------------------------ answers
def visible_text(reply: str) -> str:
    """The reply without a reasoning block: the text after the last ``</think>`` (thinking models)."""
    return reply.rsplit("</think>", 1)[-1]


def last_boxed(text: str) -> str | None:
    """Content of the last brace-balanced ``\\boxed{...}`` in ``text``, or None."""
    start = text.rfind("\\boxed{")
    while start >= 0:
        depth = 0
        for j in range(start + len("\\boxed"), len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[start + len("\\boxed{"): j].strip()
        start = text.rfind("\\boxed{", 0, start)  # unbalanced (cut off): try an earlier one
    return None


def extract_final_answer(reply: str, answer_format: str) -> str | None:
    """The final answer of a reply; None when it gives none in the asked format."""
    text = visible_text(reply)
    if answer_format == "boxed":
        return last_boxed(text)
    from reasoning_gym.utils import extract_answer

    return extract_answer(text)  # the package's own: last <answer>...</answer>, stripped


def answer_instruction(answer_format: str) -> str:
    """How to give the final answer; 'answer_tag' uses the package's own default system prompt text."""
    if answer_format == "boxed":
        return ("Given a problem, your task is to answer the question by thinking step-by-step in a clear and "
                "specific manner.\nOnce you have thought about the reasoning process, put only the final answer "
                "inside \\boxed{}.\nWhen an example is provided, you should strictly follow the format of the "
                "output/answer in that example.")
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return SYSTEM_PROMPTS["default"].strip()


def first_prompt(question: str, answer_format: str) -> str:
    """Turn 1: the question, then the answer-format instruction, as one user message (no system prompt)."""
    return f"{question.rstrip()}\n\n{answer_instruction(answer_format)}"


def retry_prompt(answer_format: str, had_answer: bool) -> str:
    """Turn 2+: the answer was not correct (or missing); nothing about the solution is revealed."""
    form = "\\boxed{...}" if answer_format == "boxed" else "<answer>...</answer>"
    if not had_answer:
        return f"I could not find a final answer in {form} in your reply. Please try again and give your final " \
               f"answer in {form}."
    return f"Your answer is not correct. Please try again and give your final answer in {form}."


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


CHILD_BOOT = "from spade.evals.reasoning_gym import child_main; child_main()"


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


# ------------------------------------------------------------------------------------------------ playing
class TaskConversation(Conversation):
    """One question: score every reply with the package's scorer; retry while < 1 and turns are left."""

    def __init__(self, prompt: str, score, answer_format: str, max_turns: int):
        super().__init__([{"role": "user", "content": prompt}])
        self.score_answer, self.answer_format, self.max_turns = score, answer_format, max_turns
        self.answers: list = []  # extracted final answer per turn (None = none found)
        self.scores: list = []  # the package's score per turn
        self.errors: list = []  # scorer failures ("" when none)
        self.guard_rejected = 0

    def respond(self, text: str) -> str | None:
        answer = extract_final_answer(text, self.answer_format)
        score, error, rejected = self.score_answer(answer)
        self.answers.append(answer)
        self.scores.append(score)
        self.errors.append(error)
        self.guard_rejected += rejected
        if score >= 1.0 or len(self.replies) >= self.max_turns:
            return None
        return retry_prompt(self.answer_format, answer is not None)


def clamp_score(value) -> float:
    """A scorer's value as a score in [0, 1]; non-numbers and NaN count 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, float(value)))


@register_benchmark
class ReasoningGymHard(Benchmark):
    name = NAME
    config_cls = ReasoningGymConfig

    def __init__(self, config: ReasoningGymConfig):
        super().__init__(config)
        self._buckets: dict | None = None
        self._tasks: dict | None = None
        self._scorer: ScorerProcess | None = None

    def check_data(self) -> None:
        """The package is installed at the vetted version; task names, parameters and categories are valid."""
        self._task_buckets()

    def _task_buckets(self) -> dict[str, str]:
        if self._buckets is None:
            self._tasks = load_tasks(self.config)
            self._buckets = check_tasks(self._tasks)
        return self._buckets

    def items(self) -> list[Item]:
        buckets = self._task_buckets()
        return [Item(f"{task}/{episode:03d}", {"task": task, "episode": episode}, group=buckets[task])
                for task in buckets for episode in range(self.config.episodes_per_task)]

    def scorer(self) -> ScorerProcess:
        """The child process, started on first use and killed when this benchmark is collected or at exit."""
        if self._scorer is None:
            self._scorer = ScorerProcess(self.config.scorer_memory_mb)
            weakref.finalize(self, self._scorer.stop)
        return self._scorer

    def close(self) -> None:
        if self._scorer is not None:
            self._scorer.stop()

    def dataset_request(self, task: str, eval_seed: int) -> dict:
        self._task_buckets()
        return {"task": task, "params": self._tasks[task], "seed": dataset_seed(eval_seed, task),
                "size": self.config.episodes_per_task}

    def entries(self, items: Sequence[Item], eval_seed: int) -> list[dict]:
        """``{"question", "answer"}`` of each item's dataset entry (built in the child, cached per task)."""
        by_task: dict[str, list[int]] = {}
        for item in items:
            by_task.setdefault(item.payload["task"], []).append(item.payload["episode"])
        found = {}
        for task, episodes in by_task.items():
            reply = self._ask({**self.dataset_request(task, eval_seed), "op": "entries", "indices": episodes},
                              ENTRIES_TIMEOUT_S, f"building the questions of task {task!r}")
            found.update({(task, e): entry for e, entry in zip(episodes, reply["entries"])})
        return [found[(item.payload["task"], item.payload["episode"])] for item in items]

    def _ask(self, message: dict, timeout: float, what: str) -> dict:
        try:
            reply = self.scorer().request(message, timeout)
        except ScorerFailed as exc:
            raise RuntimeError(f"reasoning-gym child failed while {what}: {exc}") from None
        if "error" in reply:
            raise RuntimeError(f"reasoning-gym failed while {what}: {reply['error']}")
        return reply

    def score_fn(self, item: Item, eval_seed: int):
        """answer -> (score in [0, 1], error text, guard rejections) with the dataset's own ``score_answer``."""
        request = {**self.dataset_request(item.payload["task"], eval_seed), "op": "score",
                   "index": item.payload["episode"]}

        def score(answer):
            # a (re)started child rebuilds the question first, under the generous generation limit
            self._ask({**request, "op": "entries", "indices": [request["index"]]}, ENTRIES_TIMEOUT_S,
                      f"building question {item.id!r}")
            try:
                reply = self.scorer().request({**request, "answer": answer}, self.config.score_timeout_s)
            except ScorerFailed as exc:
                return 0.0, f"scorer killed: {exc}", 0
            if "error" in reply:  # score_answer raised: the package could not score this answer
                return 0.0, reply["error"], 0
            return clamp_score(reply.get("score")), "", int(reply.get("guard_rejected", 0))

        return score

    def play(self, items: Sequence[Item], ctx: EvalContext) -> list[ItemRecord]:
        entries = self.entries(items, ctx.seed)
        prompts = [first_prompt(entry["question"], self.config.answer_format) for entry in entries]
        conversations = [TaskConversation(prompt, self.score_fn(item, ctx.seed), self.config.answer_format,
                                          self.config.max_turns) for item, prompt in zip(items, prompts)]
        play_conversations(ctx, conversations, [ctx.item_seed(item.id) for item in items], self.config.max_turns)
        records = []
        for item, entry, prompt, conv in zip(items, entries, prompts, conversations):
            if not conv.scores:  # no reply at all (the question alone exceeds the context)
                score = 0.0
            else:
                score = max(conv.scores) if self.config.turn_scoring == "max" else conv.scores[-1]
            records.append(ItemRecord(
                id=item.id, prompt_hash=prompt_hash(prompt), response=conv.replies[-1] if conv.replies else "",
                score=score, turns=len(conv.replies), tokens=conv.tokens, group=item.group,
                extra={"task": item.payload["task"], "episode": item.payload["episode"],
                       "dataset_seed": dataset_seed(ctx.seed, item.payload["task"]), "retry": entry["retry"],
                       "answers": conv.answers, "turn_scores": conv.scores, "reference": entry["answer"],
                       "stop_reason": conv.stop_reason, "scorer_errors": [e for e in conv.errors if e],
                       "guard_rejected": conv.guard_rejected}))
        return records

    def aggregate(self, records: Sequence[ItemRecord]) -> list[Metric]:
        return bucket_metrics(records)


def bucket_metrics(records: Sequence[ItemRecord]) -> list[Metric]:
    """``overall`` (item mean), the four columns (task-weighted means), ``answer_rate``, then ``task/<name>``.

    ``answer_rate`` (a diagnostic, not a paper column) is the share of items where the model gave an
    extractable final answer in at least one turn: it separates "wrong" from "never answered".
    """
    by_task: dict[str, list[float]] = {}
    bucket_of: dict[str, str] = {}
    for record in records:
        by_task.setdefault(record.extra["task"], []).append(record.score)
        bucket_of[record.extra["task"]] = record.group
    metrics = [mean_metric("overall", [r.score for r in records])]
    for bucket in BUCKETS:
        task_means = [sum(v) / len(v) for t, v in sorted(by_task.items()) if bucket_of[t] == bucket]
        if task_means:  # a subset config may leave a column without tasks: no row rather than NaN
            metrics.append(mean_metric(bucket, task_means))
    metrics.append(mean_metric("answer_rate", [float(any(a is not None for a in r.extra.get("answers", [])))
                                               for r in records]))
    metrics += [mean_metric(f"task/{task}", scores) for task, scores in sorted(by_task.items())]
    return metrics
