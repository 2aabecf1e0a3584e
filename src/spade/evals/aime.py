"""AIME 2025 and 2026: Avg@k accuracy on the 30 problems of each year (spec section 9, paper: Avg@32).

What is measured: each problem is sampled ``samples`` times (``eval.aime.temperature`` & co. under
``eval.sampling: reference``, the reference's Avg@32 settings; docs/EVALUATION.md); a sample
is right when the last ``\\boxed{...}`` of the reply equals the reference answer according to
``math-verify`` (its ``parse`` + ``verify``). Metric ``avg@<k>/<year>`` (paper columns ``aime25``,
``aime26``) = mean over problems of the fraction of right samples; its stderr is over problems.

Data: user-provided, one file per year (``eval.aime.paths``; default ``data/aime/aime_<year>.jsonl``).
Any export of the usual Hugging Face sets works: ``MathArena/aime_2025`` / ``MathArena/aime_2026``
(columns problem_idx, problem, answer), ``opencompass/AIME2025`` (question, answer),
``yentinglin/aime_2025`` (id, problem, answer).

One item = one (year, problem, sample), id ``<year>/<problem id>/<sample>``, so a batch and a resume
point are samples, and each sample has its own seed.

Deviations / choices (the paper does not give its prompt):
- prompt = the problem + "Please reason step by step, and put your final answer within \\boxed{}."
  (the Qwen model cards' instruction for math), as one user message, no system prompt;
- a reply without ``\\boxed{}`` scores 0 (no fallback to other answer formats);
- both answers are parsed with math-verify's ``LatexExtractionConfig`` only: its ``ExprExtractionConfig``
  runs ``sympy.parse_expr``, i.e. ``eval``, which model output must never reach.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from spade.configtools import ConfigError, option
from spade.evals.base import Benchmark, EvalContext, Item, ItemRecord, Metric, mean_metric, prompt_hash
from spade.evals.base import max_new_tokens_option, temperature_option, top_k_option, top_p_option
from spade.evals.registry import register_benchmark
from spade.evals.userdata import (DataSpec, pick, problem_ids, read_rows, render, reply_text, require_path,
                                  sample_replies, subsample)

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
PROBLEM_COLUMNS = ("problem", "question", "Problem", "Question")
ANSWER_COLUMNS = ("answer", "Answer", "expected_answer", "solution_answer")
ID_COLUMNS = ("problem_idx", "id", "ID", "idx", "problem_id")


@dataclass(frozen=True)
class AIMEConfig:
    years: list = option([2025, 2026], "AIME years to evaluate; each needs its own data file (see `paths`). "
                         "Paper: 2025 and 2026.")
    paths: dict = option({}, "Data file (or folder of files) per year, e.g. {2025: data/aime/aime_2025.jsonl}; a year "
                         "not listed reads data/aime/aime_<year>.jsonl. Formats: jsonl/json/parquet/csv with "
                         "problem and answer columns (docs/evals/user_data.md).")
    samples: int = option(32, "Samples per problem (paper: Avg@32). Lower it for a toy run; the metric name "
                          "follows it (avg@<samples>).", min=1)
    max_problems: int = option(0, "0 = every problem of each year; else a fixed subsample of N problems per year "
                               "(hash order of the problem ids) for toy runs.", min=0)
    temperature: float = temperature_option(0.7, "eval_configs/eval_aime_avg32.yaml:4, the in-loop Avg@32 config of every games launcher; its offline suite: 1.0, eval_offline/configs/games.yaml:6")
    top_p: float = top_p_option(0.8, "eval_configs/eval_aime_avg32.yaml:5; offline 0.95, eval_offline/configs/games.yaml:7")
    top_k: int = top_k_option(20, "eval_configs/eval_aime_avg32.yaml:6 and eval_offline/configs/games.yaml:8")
    max_new_tokens: int = max_new_tokens_option(32768, "eval_configs/eval_aime_avg32.yaml:7 and eval_offline/configs/games.yaml:9")

    def __post_init__(self):
        if not self.years:
            raise ConfigError("config key 'eval.aime.years' is empty; name at least one year, e.g. [2025, 2026]")
        for year in self.years:
            if isinstance(year, bool) or not str(year).isdigit():
                raise ConfigError(f"config key 'eval.aime.years' has value {year!r}; allowed: four-digit years, "
                                  "e.g. [2025, 2026]")
        known = {str(y) for y in self.years}
        for key in self.paths:
            if str(key) not in known:
                raise ConfigError(f"config key 'eval.aime.paths.{key}' names a year not in eval.aime.years; "
                                  f"allowed: {sorted(known)}")

    def path_for(self, year) -> str:
        for key, value in self.paths.items():
            if str(key) == str(year):
                return str(value)
        return f"data/aime/aime_{year}.jsonl"


def data_spec(year) -> DataSpec:
    return DataSpec(
        key=f"eval.aime.paths.{year}",
        title=f"AIME {year}",
        download=f"the Hugging Face dataset 'MathArena/aime_{year}' (split 'train'; 30 problems) or any other "
                 f"export of AIME {year} I+II (e.g. 'opencompass/AIME{year}', 'yentinglin/aime_{year}')",
        expected=f"data/aime/aime_{year}.jsonl (or .json/.parquet/.csv, or a folder of such files): one problem "
                 f"per record with a problem column ({' / '.join(PROBLEM_COLUMNS)}) and an answer column "
                 f"({' / '.join(ANSWER_COLUMNS)}); optional id column ({' / '.join(ID_COLUMNS)})",
        example=f"python -c \"from datasets import load_dataset; load_dataset('MathArena/aime_{year}', "
                f"split='train').to_json('data/aime/aime_{year}.jsonl')\"",
    )


# ------------------------------------------------------------------------------------------------ scoring
def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces; None if there is none."""
    best = None
    for command in ("\\boxed", "\\fbox"):
        start = text.rfind(command + "{")
        if start > (best[0] if best else -1):
            best = (start, start + len(command) + 1)
    if best is None:
        return None
    depth, begin = 1, best[1]
    for position in range(begin, len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[begin:position]
    return None  # unclosed (e.g. the reply was cut off)


def answers_match(predicted: str, gold) -> bool:
    """math-verify's verdict on a boxed answer against the reference (LaTeX parsing only, see module doc)."""
    from math_verify import LatexExtractionConfig, parse, verify

    # math-verify times out with SIGALRM, which only works in the main thread; elsewhere run without it
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    config = [LatexExtractionConfig()]
    gold_parsed = parse(f"${gold}$", extraction_config=config, parsing_timeout=timeout)
    pred_parsed = parse(f"\\boxed{{{predicted}}}", extraction_config=config, parsing_timeout=timeout)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))


def score_reply(reply: str, gold) -> tuple[float, str | None]:
    boxed = last_boxed(reply)
    if boxed is None or not boxed.strip():
        return 0.0, boxed
    return (1.0 if answers_match(boxed, gold) else 0.0), boxed


# ------------------------------------------------------------------------------------------------ benchmark
@register_benchmark
class AIME(Benchmark):
    name = "aime"
    config_cls = AIMEConfig
    offline = False

    def check_data(self) -> None:
        for year in self.config.years:
            require_path(self.config.path_for(year), data_spec(year))

    def problems(self, year) -> list[dict]:
        """The year's problems as ``{"id", "problem", "answer"}``, after the configured subsample."""
        spec = data_spec(year)
        path = require_path(self.config.path_for(year), spec)
        rows = read_rows(path, spec)
        ids = problem_ids(rows, ID_COLUMNS)
        problems = {}
        for index, (pid, row) in enumerate(zip(ids, rows)):
            problem = str(pick(row, PROBLEM_COLUMNS, spec, path, index, "problem")).strip()
            answer = str(pick(row, ANSWER_COLUMNS, spec, path, index, "answer")).strip()
            problems[pid] = {"id": pid, "problem": problem, "answer": answer}
        return [problems[pid] for pid in subsample(ids, self.config.max_problems, f"aime/{year}")]

    def items(self) -> list[Item]:
        self.check_data()
        width = len(str(self.config.samples - 1))
        items = []
        for year in self.config.years:
            for problem in self.problems(year):
                for sample in range(self.config.samples):
                    payload = {"year": str(year), "problem_id": problem["id"], "problem": problem["problem"],
                               "answer": problem["answer"], "sample": sample}
                    items.append(Item(f"{year}/{problem['id']}/{sample:0{width}d}", payload, group=str(year)))
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        prompts = [[{"role": "user", "content": f"{item.payload['problem']}\n{INSTRUCTION}"}] for item in items]
        conversations = sample_replies(ctx, prompts, [ctx.item_seed(item.id) for item in items])
        records = []
        for item, messages, conversation in zip(items, prompts, conversations):
            reply = reply_text(conversation)
            score, boxed = score_reply(reply, item.payload["answer"])
            records.append(ItemRecord(
                id=item.id, prompt_hash=prompt_hash(render(ctx, messages)), response=reply, score=score,
                turns=len(conversation.replies), tokens=conversation.tokens, group=item.group,
                extra={"problem_id": item.payload["problem_id"], "sample": item.payload["sample"],
                       "extracted": boxed, "answer": item.payload["answer"], "stop_reason": conversation.stop_reason},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        """``avg@<k>/<year>``: mean over problems of the mean over that problem's samples."""
        metrics = []
        for year in sorted({r.group for r in records}):
            by_problem: dict = {}
            for record in records:
                if record.group == year:
                    by_problem.setdefault(record.extra["problem_id"], []).append(record.score)
            per_problem = [sum(scores) / len(scores) for scores in by_problem.values()]
            metrics.append(mean_metric(f"avg@{self.config.samples}/{year}", per_problem))
        return metrics
