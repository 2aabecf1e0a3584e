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
question whose generator raises is drawn again with a derived seed, see ``reasoning_gym_scorer._Datasets``). The
final answer is the last ``<answer>...</answer>`` (the package's ``extract_answer``; ``answer_format="boxed"``: the
last ``\\boxed{...}``) of the reply's text after any ``</think>``.

Safety and determinism: every ``reasoning_gym`` dataset is built, and every answer scored, in one
persistent child process, never in the evaluating process. ``spade.evals.reasoning_gym_scorer`` says how: the
guards on the scorers that ``eval`` the model's answer (and the one scoring deviation they cause), the time limit
of a score, and the fixed hash seed that keeps the questions the same from process to process. A task whose module
uses eval-like calls and is not vetted there is refused (``check_data``).
"""

from __future__ import annotations

import math
import sys
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from spade.configtools import ConfigError, option
from spade.evals.base import (Benchmark, Conversation, EvalContext, Item, ItemRecord, Metric, mean_metric,
                              play_conversations, prompt_hash)
from spade.evals.base import max_new_tokens_option, temperature_option, top_k_option, top_p_option
from spade.evals.reasoning_gym_scorer import GUARDED_MODULES, RISKY_SOURCE, ScorerFailed, ScorerProcess
from spade.evals.registry import register_benchmark
from spade.seeding import derive_seed

NAME = "reasoning_gym_hard"
PACKAGE_VERSION = "0.1.25"  # the version whose scorers were read and guarded (spade.evals.reasoning_gym_scorer)
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
    temperature: float = temperature_option(0.6, "eval_offline/configs/_games_gem.yaml:14; paper: 0.6")
    top_p: float = top_p_option(0.8, "spade/core/eval/gem_evaluator.py:296, every GEM task")
    top_k: int = top_k_option(20, "spade/core/eval/gem_evaluator.py:297, every GEM task")
    max_new_tokens: int = max_new_tokens_option(8192, "eval_offline/configs/_games_gem.yaml:15")


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
