"""GPQA-Diamond: accuracy on 198 graduate-level four-option science questions (spec section 9).

What is measured: for each question the correct answer and the three incorrect ones are shuffled into
options A-D with a seed derived from the eval seed and the question id (so every checkpoint of a run
sees the same order, and the order never depends on batching); the model answers ``samples`` times
(default 8, the reference's avg@8) to that prompt, one item per (question, sample), each with its own
seed; a sample scores 1 when the extracted letter is the correct option. Metric ``accuracy`` (paper column
``gpqa_diamond``) = mean over questions of the share of right samples (stderr over questions), plus
``accuracy/<domain>`` per high-level domain when the data has that column.

Data: user-provided (the set is gated): ``eval.gpqa_diamond.path``, default
``data/gpqa/gpqa_diamond.csv``, the ``gpqa_diamond.csv`` of the Hugging Face dataset ``Idavidrein/gpqa``
(or of the password-protected zip at github.com/idavidrein/gpqa), or a jsonl/json/parquet export with
the same columns: "Question", "Correct Answer", "Incorrect Answer 1".."Incorrect Answer 3", optional
"Record ID" and "High-level domain".

Prompt: simple-evals' multiple-choice template (one user message): "Answer the following multiple
choice question. The last line of your response should be of the following format: 'Answer: $LETTER'
(without quotes) where LETTER is one of ABCD. Think step by step before answering." then the question
and the options as "A) ...".

Letter extraction (``ANSWER_PATTERN``; the LAST match in the reply counts)::

    (?i:answer)[ \\t]*:[ \\t]*(?:\\*\\*)?[ \\t]*\\$?\\(?([A-D])\\)?\\$?(?:\\*\\*)?(?![A-Za-z0-9])

i.e. "Answer: C", "answer: (C)", "**Answer:** C", "Answer: $C$"; the letter itself must be a capital
followed by no letter or digit. Fallback when no such line exists: the last ``\\boxed{X}`` with X in A-D.
Deviations from simple-evals: it takes the first match and its case-insensitive letter class reads
"Answer: because ..." as B; we take the last match and require a capital letter standing alone.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from spade.configtools import option
from spade.evals.base import Benchmark, EvalContext, Item, ItemRecord, Metric, prompt_hash, unit_mean_metric
from spade.evals.base import max_new_tokens_option, temperature_option, top_k_option, top_p_option
from spade.evals.registry import register_benchmark
from spade.evals.userdata import (DataSpec, pick, problem_ids, read_rows, render, reply_text, require_path,
                                  sample_replies, subsample)

LETTERS = "ABCD"
TEMPLATE = (
    "Answer the following multiple choice question. The last line of your response should be of the following "
    "format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step before answering."
    "\n\n{question}\n\nA) {A}\nB) {B}\nC) {C}\nD) {D}"
)
ANSWER_PATTERN = re.compile(r"(?i:answer)[ \t]*:[ \t]*(?:\*\*)?[ \t]*\$?\(?([A-D])\)?\$?(?:\*\*)?(?![A-Za-z0-9])")
BOXED_PATTERN = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*([A-D])\s*\}?\s*\}")
QUESTION_COLUMNS = ("Question", "question")
CORRECT_COLUMNS = ("Correct Answer", "correct_answer")
INCORRECT_COLUMNS = [(f"Incorrect Answer {i}", f"incorrect_answer_{i}") for i in (1, 2, 3)]
ID_COLUMNS = ("Record ID", "record_id", "id")
DOMAIN_COLUMNS = ("High-level domain", "high_level_domain")

DATA = DataSpec(
    key="eval.gpqa_diamond.path",
    title="GPQA-Diamond",
    download="the Hugging Face dataset 'Idavidrein/gpqa' (gated: accept its terms), file 'gpqa_diamond.csv' "
             "(config 'gpqa_diamond', 198 questions); or gpqa_diamond.csv from the zip at "
             "https://github.com/idavidrein/gpqa (password in its README)",
    expected="data/gpqa/gpqa_diamond.csv (or a .jsonl/.json/.parquet export): one question per record with columns "
             "'Question', 'Correct Answer', 'Incorrect Answer 1', 'Incorrect Answer 2', 'Incorrect Answer 3' "
             "(optional 'Record ID', 'High-level domain')",
    example="python -c \"from datasets import load_dataset; load_dataset('Idavidrein/gpqa', 'gpqa_diamond', "
            "split='train').to_csv('data/gpqa/gpqa_diamond.csv', index=False)\"",
)


@dataclass(frozen=True)
class GPQADiamondConfig:
    path: str = option("data/gpqa/gpqa_diamond.csv", "GPQA-Diamond file (csv/jsonl/json/parquet with the original "
                       "column names); see docs/evals/user_data.md.")
    samples: int = option(8, "Replies sampled per question; accuracy = mean over questions of the share of right "
                          "replies (the reference's avg@8: eval_offline/configs/games.yaml:13; the paper: accuracy, "
                          "1 = one reply per question).", min=1)
    max_questions: int = option(0, "0 = all 198 questions; else a fixed subsample of N (hash order of the record "
                                "ids) for toy runs.", min=0)
    temperature: float = temperature_option(0.7, "eval_offline/configs/games.yaml:14")
    top_p: float = top_p_option(0.95, "eval_offline/configs/games.yaml:15")
    top_k: int = top_k_option(0, "not set")
    max_new_tokens: int = max_new_tokens_option(32768, "eval_offline/configs/games.yaml:16")


def extract_letter(reply: str) -> str | None:
    """The chosen option letter (see the module doc for the patterns), or None."""
    matches = ANSWER_PATTERN.findall(reply)
    if matches:
        return matches[-1]
    boxed = BOXED_PATTERN.findall(reply)
    return boxed[-1] if boxed else None


def shuffle_options(correct: str, incorrect: list, seed: int) -> tuple[list, str]:
    """Options in a seeded random order and the letter of the correct one."""
    choices = [correct, *incorrect]
    order = random.Random(seed).sample(range(4), 4)
    return [choices[i] for i in order], LETTERS[order.index(0)]


@register_benchmark
class GPQADiamond(Benchmark):
    name = "gpqa_diamond"
    config_cls = GPQADiamondConfig
    offline = False

    def check_data(self) -> None:
        require_path(self.config.path, DATA)

    def items(self) -> list[Item]:
        path = require_path(self.config.path, DATA)
        rows = read_rows(path, DATA)
        ids = problem_ids(rows, ID_COLUMNS)
        questions = {}
        for index, (qid, row) in enumerate(zip(ids, rows)):
            def text(names, what, row=row, index=index):
                return str(pick(row, names, DATA, path, index, what)).strip()

            domain = next((str(row[c]).strip() for c in DOMAIN_COLUMNS if row.get(c)), "")
            questions[qid] = ({
                "question_id": qid,
                "question": text(QUESTION_COLUMNS, "question"),
                "correct": text(CORRECT_COLUMNS, "correct answer"),
                "incorrect": [text(names, f"incorrect answer {i}") for i, names in enumerate(INCORRECT_COLUMNS, 1)],
            }, domain)
        width = len(str(self.config.samples - 1))
        return [Item(f"{qid}/{sample:0{width}d}", {**questions[qid][0], "sample": sample}, group=questions[qid][1])
                for qid in subsample(ids, self.config.max_questions, "gpqa_diamond")
                for sample in range(self.config.samples)]

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        prompts, keys = [], []
        for item in items:
            # one option order per question, shared by its samples (the reference samples n replies to one prompt)
            options, letter = shuffle_options(item.payload["correct"], item.payload["incorrect"],
                                              ctx.item_seed(item.payload["question_id"], "options"))
            content = TEMPLATE.format(question=item.payload["question"], **dict(zip(LETTERS, options)))
            prompts.append([{"role": "user", "content": content}])
            keys.append(letter)
        conversations = sample_replies(ctx, prompts, [ctx.item_seed(item.id) for item in items])
        records = []
        for item, messages, letter, conversation in zip(items, prompts, keys, conversations):
            reply = reply_text(conversation)
            chosen = extract_letter(reply)
            records.append(ItemRecord(
                id=item.id, prompt_hash=prompt_hash(render(ctx, messages)), response=reply,
                score=1.0 if chosen == letter else 0.0, turns=len(conversation.replies), tokens=conversation.tokens,
                group=item.group, extra={"question_id": item.payload["question_id"], "sample": item.payload["sample"],
                                         "correct_letter": letter, "chosen": chosen,
                                         "stop_reason": conversation.stop_reason},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        """``accuracy``: mean over questions of the share of right samples (avg@k), stderr over questions."""
        def question(record):
            return record.extra["question_id"]

        metrics = [unit_mean_metric("accuracy", records, question)]
        for domain in sorted({r.group for r in records if r.group}):
            metrics.append(unit_mean_metric(f"accuracy/{domain}", [r for r in records if r.group == domain], question))
        return metrics
