"""AIME: items per (year, problem, sample), boxed answers checked by math-verify, avg@k per year by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scripted_backend import ScriptedBackend
from spade.configtools import ConfigError, from_dict
from spade.evals.aime import AIME, INSTRUCTION, AIMEConfig, answers_match, last_boxed
from spade.evals.base import DataMissing, EvalContext, EvalRun, evaluate, items_path

FIXTURES = Path(__file__).parent / "fixtures" / "evals" / "aime"
PATHS = {2025: str(FIXTURES / "aime_2025.jsonl"), 2026: str(FIXTURES / "aime_2026.jsonl")}

# Replies per problem (recognised by a phrase of its statement), one per sample in order.
SCRIPT = {
    "divisors of $360$": ["So the count is \\boxed{24}.", "\\boxed{24.0}"],  # answer 24: right, right
    "$2^{10}$": ["\\boxed{024}", "The answer is 24."],  # 24: right, no box -> wrong
    "$3x + 5 = 215$": ["x = \\boxed{\\frac{140}{2}}", "\\boxed{7} then \\boxed{71}"],  # 70: right, last box wrong
    "first $20$ positive odd": ["\\boxed{400}", "\\boxed{400}"],  # 400: right, right
    "ordered pairs": ["\\boxed{12}", "\\boxed{12}"],  # 11: wrong, wrong
}


def scripted(tokenizer):
    seen: dict = {}

    def reply(prompt, seed):
        key = next(k for k in SCRIPT if k in prompt)
        index = seen.get(key, 0)
        seen[key] = index + 1
        return SCRIPT[key][index]

    return ScriptedBackend(tokenizer, reply)


def test_items_ids_and_payload():
    items = AIME(AIMEConfig(paths=PATHS, samples=2)).items()
    assert [i.id for i in items][:4] == ["2025/001/0", "2025/001/1", "2025/002/0", "2025/002/1"]
    assert len(items) == 3 * 2 + 2 * 2
    # 2026 has no id column: row numbers
    assert {i.id for i in items if i.group == "2026"} == {"2026/001/0", "2026/001/1", "2026/002/0", "2026/002/1"}
    assert items[-1].payload["answer"] == "11"
    subset = AIME(AIMEConfig(years=[2025], paths={2025: PATHS[2025]}, samples=1, max_problems=2)).items()
    assert len(subset) == 2 and subset == AIME(AIMEConfig(years=[2025], paths={"2025": PATHS[2025]}, samples=1,
                                                          max_problems=2)).items()


def test_avg_at_k_by_hand(tiny_model, tmp_path):
    backend = scripted(tiny_model[1])
    ctx = EvalContext(backend, seed=5, benchmark="aime", max_new_tokens=64)
    result = evaluate(AIME(AIMEConfig(paths=PATHS, samples=2)), ctx, EvalRun("toy", 0, tmp_path / "aime.json", 16),
                      progress=False)
    rows = {row["metric"]: row for row in result["rows"]}
    assert set(rows) == {"avg@2/2025", "avg@2/2026"}
    # 2025: problem means 1, 1/2, 1/2 -> 2/3; stderr = sd(1, .5, .5)/sqrt(3) = sqrt(1/12)/sqrt(3) = 1/6
    assert rows["avg@2/2025"]["value"] == pytest.approx(2 / 3) and rows["avg@2/2025"]["n"] == 3
    assert rows["avg@2/2025"]["stderr"] == pytest.approx(1 / 6)
    assert rows["avg@2/2026"]["value"] == pytest.approx(0.5) and rows["avg@2/2026"]["n"] == 2
    records = {r["id"]: r for r in map(json.loads, items_path(tmp_path / "aime.json").read_text().splitlines())}
    assert records["2025/003/1"]["extra"]["extracted"] == "71" and records["2025/003/1"]["score"] == 0.0
    assert records["2025/002/1"]["extra"]["extracted"] is None
    prompts, _, seeds = backend.calls[0]
    assert all(INSTRUCTION in p for p in prompts) and len(set(seeds)) == len(seeds) == 10


def test_parquet_and_folder_inputs(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIXTURES / "aime_2025.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train-00000.parquet")
    from_parquet = AIME(AIMEConfig(years=[2025], paths={2025: str(tmp_path / "train-00000.parquet")}, samples=1))
    from_folder = AIME(AIMEConfig(years=[2025], paths={2025: str(tmp_path)}, samples=1))
    from_jsonl = AIME(AIMEConfig(years=[2025], paths={2025: PATHS[2025]}, samples=1))
    assert from_parquet.items() == from_jsonl.items() == from_folder.items()


def test_missing_data_names_key_source_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bench = AIME(AIMEConfig(years=[2025, 2026], paths={2025: PATHS[2025]}))
    with pytest.raises(DataMissing) as caught:
        bench.check_data()
    message = str(caught.value)
    assert "eval.aime.paths.2026" in message and "MathArena/aime_2026" in message
    assert "data/aime/aime_2026.jsonl" in message and "docs/evals/user_data.md" in message


def test_bad_config_and_malformed_file(tmp_path):
    with pytest.raises(ConfigError, match=r"eval\.aime\.paths\.2024.*allowed"):
        from_dict(AIMEConfig, {"years": [2025], "paths": {2024: "x.jsonl"}}, "eval.aime")
    with pytest.raises(ConfigError, match=r"eval\.aime\.years"):
        from_dict(AIMEConfig, {"years": []}, "eval.aime")
    broken = tmp_path / "aime_2025.jsonl"
    broken.write_text('{"problem": "p", "answer": "1"}\n{not json\n')
    with pytest.raises(ConfigError, match=r"eval\.aime\.paths\.2025.*line 2"):
        AIME(AIMEConfig(years=[2025], paths={2025: str(broken)})).items()
    broken.write_text('{"problem": "p", "solution": "1"}\n')
    with pytest.raises(ConfigError, match=re.escape("no answer column")):
        AIME(AIMEConfig(years=[2025], paths={2025: str(broken)})).items()


def test_boxed_extraction_and_math_verify():
    assert last_boxed("a \\boxed{1} b \\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert last_boxed("\\fbox{5}") == "5" and last_boxed("\\boxed{12") is None and last_boxed("12") is None
    assert answers_match("070", "70") and answers_match("\\dfrac{1}{2}", "0.5")
    assert answers_match("3\\sqrt{2}", "\\sqrt{18}")
    assert not answers_match("71", "70") and not answers_match("__import__('os').getcwd()", "70")
