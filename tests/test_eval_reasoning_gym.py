"""Reasoning Gym hard split: buckets, the 2-turn protocol, the package's scorers behind guards, metrics."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from scripted_backend import ScriptedBackend
from spade.configtools import ConfigError
from spade.evals.base import EvalContext, EvalRun, ItemRecord, evaluate, items_path
from spade.evals.reasoning_gym import (ReasoningGymConfig, ReasoningGymHard, bucket_metrics, check_tasks,
                                       extract_final_answer, last_boxed, load_tasks)
from spade.evals.reasoning_gym_scorer import check_math_text

# one quick task per column, each with a reference answer that its own scorer rates 1.0
FOUR = ["leg_counting", "spell_backward", "number_sequence", "syllogism"]
SEED = 7


def bench(**overrides) -> ReasoningGymHard:
    return ReasoningGymHard(ReasoningGymConfig(**{"tasks": FOUR, "episodes_per_task": 2, **overrides}))


def answers_by_question(benchmark: ReasoningGymHard) -> dict:
    """question text -> reference answer, for the scripted model (read from the prompt it is shown)."""
    items = benchmark.items()
    return {e["question"].strip(): e["answer"] for e in benchmark.entries(items, SEED)}


def reference_in(prompt: str, lookup: dict) -> str:
    found = [q for q in lookup if q in prompt]
    assert len(found) == 1, "the prompt must show exactly one known question"
    return lookup[found[0]]


def run(benchmark, reply, tiny_model, tmp_path, batch=8):
    backend = ScriptedBackend(tiny_model[1], reply)
    ctx = EvalContext(backend, seed=SEED, benchmark="reasoning_gym_hard", max_new_tokens=256)
    result = evaluate(benchmark, ctx, EvalRun("toy", 0, tmp_path / "r.json", batch), progress=False)
    records = [json.loads(line) for line in items_path(tmp_path / "r.json").read_text().splitlines()]
    return {row["metric"]: row for row in result["rows"]}, records, backend


def test_hard_split_buckets_hold_31_36_24_9_tasks():
    buckets = check_tasks(load_tasks(ReasoningGymConfig()))
    assert len(buckets) == 100
    assert Counter(buckets.values()) == {"math": 31, "algorithmic": 36, "cognition": 24, "logic": 9}
    assert buckets["complex_arithmetic"] == "math" and buckets["codeio"] == "algorithmic"
    assert buckets["arc_1d"] == "cognition" and buckets["acre"] == "logic"
    items = ReasoningGymHard(ReasoningGymConfig()).items()
    assert len(items) == 800 and len({i.id for i in items}) == 800 and items[0].id == "ab/000"


def test_unknown_task_name_is_refused_with_the_allowed_names():
    with pytest.raises(ConfigError) as caught:
        bench(tasks=["leg_counting", "no_such_task"]).items()
    message = str(caught.value)
    assert "no_such_task" in message and "eval.reasoning_gym_hard.tasks" in message and "zebra_puzzles" in message


def test_bad_tasks_files_are_refused(tmp_path):
    other = tmp_path / "probability.yaml"
    other.write_text("configs:\n  coin_flip: {}\n  leg_counting: {}\n")
    with pytest.raises(ConfigError, match="coin_flip.*'probability'"):
        ReasoningGymHard(ReasoningGymConfig(tasks_file=str(other))).check_data()
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match="missing.yaml"):
        ReasoningGymHard(ReasoningGymConfig(tasks_file=str(missing))).check_data()
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks: [leg_counting]\n")
    with pytest.raises(ConfigError, match="configs"):
        ReasoningGymHard(ReasoningGymConfig(tasks_file=str(broken))).check_data()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("configs:\n  leg_counting: {min_animals: 9, max_animals: 2}\n")
    with pytest.raises(ConfigError, match="leg_counting"):
        ReasoningGymHard(ReasoningGymConfig(tasks_file=str(wrong))).check_data()


def test_right_answers_score_one_in_one_turn(tiny_model, tmp_path):
    benchmark = bench()
    lookup = answers_by_question(benchmark)
    rows, records, backend = run(benchmark, lambda prompt, seed: f"<answer>{reference_in(prompt, lookup)}</answer>",
                                 tiny_model, tmp_path)
    assert rows["overall"]["value"] == 1.0 and rows["overall"]["n"] == 8
    for column in ("math", "algorithmic", "cognition", "logic"):
        assert rows[column]["value"] == 1.0 and rows[column]["n"] == 1
    assert rows["task/syllogism"]["value"] == 1.0 and rows["task/syllogism"]["n"] == 2
    assert [r["turns"] for r in records] == [1] * 8 and len(backend.calls) == 1
    assert all(r["extra"]["turn_scores"] == [1.0] for r in records)
    assert "<answer>answer here</answer>" in backend.calls[0][0][0]  # the package's own format instruction


def test_wrong_then_right_takes_two_turns_and_scores_the_final_answer(tiny_model, tmp_path):
    benchmark = bench()
    lookup = answers_by_question(benchmark)

    def reply(prompt, seed):
        return f"<answer>{reference_in(prompt, lookup)}</answer>" if "not correct" in prompt else "<answer>zzz</answer>"

    rows, records, backend = run(benchmark, reply, tiny_model, tmp_path)
    assert [r["turns"] for r in records] == [2] * 8 and len(backend.calls) == 2
    assert all(r["score"] == 1.0 and r["extra"]["turn_scores"][1] == 1.0 for r in records)
    assert all(r["extra"]["answers"][0] == "zzz" for r in records)
    assert rows["overall"]["value"] == 1.0
    second_turn = backend.calls[1][0][0]
    retry = second_turn.split("<answer>zzz</answer>")[1]
    assert "Your answer is not correct" in retry and reference_in(second_turn, lookup) not in retry


def test_final_versus_best_turn_scoring(tiny_model, tmp_path):
    """leg_counting uses the package's default scorer: an answer containing the reference r scores
    len(r) / len(answer), so r doubled scores 0.5; then "zzz" scores 0. Final = 0, best = 0.5."""
    def script(lookup):
        def reply(prompt, seed):
            reference = reference_in(prompt, lookup)
            return "<answer>zzz</answer>" if "not correct" in prompt else f"<answer>{reference * 2}</answer>"
        return reply

    final = bench(tasks=["leg_counting"])
    rows, records, _ = run(final, script(answers_by_question(final)), tiny_model, tmp_path / "final")
    assert [r["extra"]["turn_scores"] for r in records] == [[0.5, 0.0]] * 2
    assert rows["overall"]["value"] == 0.0 and rows["math"]["value"] == 0.0
    best = bench(tasks=["leg_counting"], turn_scoring="max")
    rows, records, _ = run(best, script(answers_by_question(best)), tiny_model, tmp_path / "best")
    assert rows["overall"]["value"] == 0.5 and [r["turns"] for r in records] == [2, 2]


def test_missing_answer_is_retried_and_scored_by_the_package(tiny_model, tmp_path):
    rows, records, backend = run(bench(tasks=["leg_counting"], max_turns=3), lambda p, s: "I do not know.",
                                 tiny_model, tmp_path)
    assert [r["turns"] for r in records] == [3, 3] and rows["overall"]["value"] == 0.0
    assert records[0]["extra"]["answers"] == [None, None, None]
    assert "could not find a final answer" in backend.calls[1][0][0]


def test_bucket_metrics_are_task_weighted():
    def record(task, group, score):
        return ItemRecord(f"{task}/{score}", "", "", score, group=group, extra={"task": task})

    records = [record("a", "math", 1.0), record("a", "math", 0.0), record("a", "math", 0.0),
               record("b", "math", 1.0), record("c", "logic", 0.5)]
    rows = {m.name: m for m in bucket_metrics(records)}
    assert rows["math"].value == pytest.approx(2 / 3) and rows["math"].n == 2  # item-weighted would be 0.5
    assert rows["logic"].value == 0.5 and "cognition" not in rows
    assert rows["overall"].value == pytest.approx(2.5 / 5) and rows["task/a"].value == pytest.approx(1 / 3)
    assert rows["answer_rate"].value == 0.0  # none of these records holds an extracted answer
    answered = ItemRecord("d/0", "", "", 0.0, group="logic", extra={"task": "d", "answers": [None, "7"]})
    assert {m.name: m for m in bucket_metrics(records + [answered])}["answer_rate"].value == pytest.approx(1 / 6)


def test_questions_are_deterministic_across_processes_and_seeds():
    """ransom_note iterates a set of strings: stable only because the child fixes PYTHONHASHSEED."""
    first, second = bench(tasks=["ransom_note"]), bench(tasks=["ransom_note"])
    items = first.items()
    assert first.entries(items, SEED) == second.entries(items, SEED)
    assert first.entries(items, SEED) != first.entries(items, SEED + 1)


def test_model_text_never_reaches_eval_and_hangs_are_killed(tmp_path):
    benchmark = bench(tasks=["string_insertion", "countdown", "simple_integration"], episodes_per_task=1,
                      score_timeout_s=2.0)
    items = {item.payload["task"]: item for item in benchmark.items()}
    entries = dict(zip(items, benchmark.entries(list(items.values()), SEED)))
    marker = tmp_path / "pwned"
    attack = f"__import__('os').system('touch {marker}')"
    for task, item in items.items():
        score = benchmark.score_fn(item, SEED)
        assert score(attack)[2] == 1  # refused by the guard ...
        assert score(entries[task]["answer"]) == (1.0, "", 0)  # ... which lets the reference through
    assert not marker.exists()
    insertion = benchmark.score_fn(items["string_insertion"], SEED)
    assert insertion(repr(list(entries["string_insertion"]["answer"])))[0] == 0.1  # literal lists still parse
    countdown = benchmark.score_fn(items["countdown"], SEED)
    score, error, _ = countdown("9**9**9**9")
    assert score == 0.0 and "killed" in error
    assert countdown(entries["countdown"]["answer"])[0] == 1.0  # a fresh child takes over
    benchmark.close()


def test_answer_extraction():
    assert extract_final_answer("<think><answer>1</answer></think> so <answer> 42 </answer>", "answer_tag") == "42"
    assert extract_final_answer("no tags", "answer_tag") is None
    assert last_boxed("\\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{7} and \\boxed{cut") == "7"
    assert extract_final_answer("<think>\\boxed{1}</think>\\boxed{2}", "boxed") == "2"
    check_math_text("-3*x**2/2 + sin(x) + C")
    for bad in ("x.__class__", "open('f')", "lambda: 1", "[1]", "exit()"):
        with pytest.raises(ValueError):
            check_math_text(bad)


def test_smoke_hf_backend(tiny_model, tmp_path):
    from spade.inference.generation_hf import HFBackend

    model, tokenizer = tiny_model
    ctx = EvalContext(HFBackend(model, tokenizer), seed=1, benchmark="reasoning_gym_hard", max_new_tokens=4)
    result = evaluate(bench(tasks=["leg_counting"]), ctx, EvalRun("smoke", 0, tmp_path / "s.json", 2),
                      progress=False)
    records = [json.loads(line) for line in items_path(tmp_path / "s.json").read_text().splitlines()]
    assert result["n_items"] == 2 and [r["id"] for r in records] == ["leg_counting/000", "leg_counting/001"]
    assert all(0.0 <= r["score"] <= 1.0 and r["turns"] in (1, 2) and 1 <= r["tokens"] <= 8 for r in records)
    assert {row["metric"] for row in result["rows"]} == {"overall", "math", "answer_rate", "task/leg_counting"}
