"""GPQA-Diamond: seeded option shuffles, letter extraction, accuracy by hand, the user-data message."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from scripted_backend import ScriptedBackend
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate, items_path
from spade.evals.gpqa import GPQADiamond, GPQADiamondConfig, extract_letter

FIXTURE = Path(__file__).parent / "fixtures" / "evals" / "gpqa" / "gpqa_diamond.csv"
CORRECT = {"ball is dropped": "19.6 m/s", "ethanol": "hydroxyl", "adenine": "thymine", "resistors": "1"}


def options(prompt: str) -> dict:
    return {text: letter for letter, text in re.findall(r"^([A-D])\) (.*)$", prompt, re.MULTILINE)}


def reply(prompt, seed):
    """Physics right (two answer formats), chemistry a wrong letter, biology no letter at all."""
    key = next(k for k in CORRECT if k in prompt)
    right = options(prompt)[CORRECT[key]]
    if key == "ball is dropped":
        return f"v = g t = 19.6.\nAnswer: {right}"
    if key == "resistors":
        return f"Answer: A at first; no.\n**Answer:** {right}"
    if key == "ethanol":
        return "Answer: " + next(letter for letter in "ABCD" if letter != right)
    return "I am not sure."


def run(tiny_model, tmp_path, seed=7, name="r.json", path=str(FIXTURE), samples=1, answer=reply):
    backend = ScriptedBackend(tiny_model[1], answer)
    ctx = EvalContext(backend, seed=seed, benchmark="gpqa_diamond", max_new_tokens=32)
    result = evaluate(GPQADiamond(GPQADiamondConfig(path=path, samples=samples)), ctx,
                      EvalRun("toy", 0, tmp_path / name, 8), progress=False)
    return result, backend


def test_accuracy_by_hand(tiny_model, tmp_path):
    result, backend = run(tiny_model, tmp_path)
    rows = {row["metric"]: row["value"] for row in result["rows"]}
    assert rows == {"accuracy": 0.5, "accuracy/Biology": 0.0, "accuracy/Chemistry": 0.0, "accuracy/Physics": 1.0}
    records = {r["id"]: r for r in map(json.loads, items_path(tmp_path / "r.json").read_text().splitlines())}
    assert set(records) == {"recFixture001/0", "recFixture002/0", "recFixture003/0", "recFixture004/0"}
    assert records["recFixture003/0"]["extra"]["chosen"] is None
    prompt = next(p for p in backend.calls[0][0] if "adenine" in p)
    assert options(prompt)["thymine"] == records["recFixture003/0"]["extra"]["correct_letter"]
    assert "'Answer: $LETTER'" in prompt


def test_k_samples_avg_over_questions_by_hand(tiny_model, tmp_path):
    """4 samples per question, right 3, 0, 1 and 2 times: accuracy = mean over questions of the share right
    (0.75 + 0 + 0.25 + 0.5) / 4 = 0.375 (the reference's avg@k, equal to the mean over all 16 replies), stderr over
    the 4 questions: sqrt(var([.75, 0, .25, .5]) / 4) with var = 0.3125 / 3. Every sample of a question gets the same
    prompt (one option order per question, as the reference samples n replies to one prompt) and its own seed."""
    right_times = {"ball is dropped": 3, "ethanol": 0, "adenine": 1, "resistors": 2}
    seen: dict = {}

    def answer(prompt, seed):
        key = next(k for k in CORRECT if k in prompt)
        seen.setdefault(key, []).append((prompt, seed))
        letter = options(prompt)[CORRECT[key]]
        wrong = next(other for other in "ABCD" if other != letter)
        return f"Answer: {letter if len(seen[key]) <= right_times[key] else wrong}"

    result, _ = run(tiny_model, tmp_path, samples=4, answer=answer)
    rows = {row["metric"]: row for row in result["rows"]}
    assert rows["accuracy"]["value"] == pytest.approx(0.375) and rows["accuracy"]["n"] == 4
    assert rows["accuracy"]["stderr"] == pytest.approx((0.3125 / 3 / 4) ** 0.5)
    assert rows["accuracy/Physics"]["value"] == pytest.approx((0.75 + 0.5) / 2)
    assert result["n_items"] == 16
    for calls in seen.values():
        assert len({prompt for prompt, _ in calls}) == 1 and len({seed for _, seed in calls}) == 4


def test_shuffle_depends_on_eval_seed_only(tiny_model, tmp_path):
    _, first = run(tiny_model, tmp_path, seed=7, name="a.json")
    _, again = run(tiny_model, tmp_path, seed=7, name="b.json")
    _, other = run(tiny_model, tmp_path, seed=8, name="c.json")
    orders = [[options(p) for p in backend.calls[0][0]] for backend in (first, again, other)]
    assert orders[0] == orders[1] and orders[0] != orders[2]


def test_jsonl_export_reads_the_same(tiny_model, tmp_path):
    with open(FIXTURE, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    export = tmp_path / "gpqa_diamond.jsonl"
    export.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert GPQADiamond(GPQADiamondConfig(path=str(export))).items() == \
        GPQADiamond(GPQADiamondConfig(path=str(FIXTURE))).items()
    assert len(GPQADiamond(GPQADiamondConfig(path=str(FIXTURE), max_questions=2)).items()) == 2 * 8  # 8 samples each


@pytest.mark.parametrize("text, letter", [
    ("Answer: C", "C"), ("so...\nanswer: (B)", "B"), ("**Answer:** D", "D"), ("Answer: $A$", "A"),
    ("Answer: A\nwait\nAnswer: B", "B"), ("The result is \\boxed{C}.", "C"), ("Answer: because of x", None),
    ("Answer: A1", None), ("no idea", None), ("Answer: b", None),
])
def test_letter_extraction(text, letter):
    assert extract_letter(text) == letter


def test_missing_data_message(tmp_path):
    with pytest.raises(DataMissing) as caught:
        GPQADiamond(GPQADiamondConfig(path=str(tmp_path / "nope.csv"))).check_data()
    message = str(caught.value)
    assert "eval.gpqa_diamond.path" in message and "Idavidrein/gpqa" in message and "gpqa_diamond.csv" in message
    assert "'Correct Answer'" in message and "'Incorrect Answer 1'" in message


def test_smoke_hf_backend(tiny_model, tmp_path):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    ctx = EvalContext(HFBackend(model, tokenizer), seed=1, benchmark="gpqa_diamond", max_new_tokens=4)
    result = evaluate(GPQADiamond(GPQADiamondConfig(path=str(FIXTURE), max_questions=1, samples=1)), ctx,
                      EvalRun("smoke", 0, tmp_path / "s.json", 1), progress=False)
    record = json.loads(items_path(tmp_path / "s.json").read_text())
    assert result["n_items"] == 1 and record["score"] in (0.0, 1.0) and 1 <= record["tokens"] <= 4
