"""Grounding corpus: JSONL loading, sampling, truncation and the offline corpus builder."""

from __future__ import annotations

import json
import platform
import random

import pytest

from spade.configtools import ConfigError, from_dict
from spade.designer.corpus import (
    MIN_DOC_WORDS,
    CorpusConfig,
    CorpusError,
    CorpusSampler,
    Document,
    build_offline_corpus,
    load_corpus,
    truncate_words,
)


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ----- loading -------------------------------------------------------------------------------------
def test_load_corpus_reads_records_and_fills_defaults(tmp_path):
    path = write_lines(tmp_path / "docs.jsonl", [
        json.dumps({"text": "first document"}),
        "",
        json.dumps({"text": "second", "id": "d2", "source": "web", "provenance": {"url": "u"}}),
        json.dumps({"text": "third", "id": 7, "extra": "ignored"}),
    ])
    docs = load_corpus(path)
    assert [d.doc_id for d in docs] == ["docs:1", "d2", "7"]
    assert docs[0] == Document("docs:1", "first document", "docs.jsonl", {"file": str(path), "line": 1})
    assert docs[1].source == "web" and docs[1].provenance == {"url": "u"}
    assert docs[1].to_record() == {"id": "d2", "text": "second", "source": "web", "provenance": {"url": "u"}}


@pytest.mark.parametrize("bad,reason", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"id": "x"}', "'text' must be a non-empty string"),
    ('{"text": "   "}', "'text' must be a non-empty string"),
    ('{"text": 5}', "'text' must be a non-empty string"),
    ('{"text": "ok", "id": "a"}', "already used on line 1"),
    ('{"text": "ok", "source": 3}', "'source' must be a string"),
    ('{"text": "ok", "provenance": "x"}', "'provenance' must be a JSON object"),
])
def test_load_corpus_names_file_and_line_of_a_bad_line(tmp_path, bad, reason):
    path = write_lines(tmp_path / "broken.jsonl", ['{"text": "fine", "id": "a"}', "", bad])
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    message = str(info.value)
    assert "broken.jsonl" in message and "line 3" in message and reason in message


def test_load_corpus_rejects_missing_and_empty_files(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope.jsonl")
    with pytest.raises(CorpusError, match="no documents"):
        load_corpus(write_lines(tmp_path / "empty.jsonl", ["", "  "]))


# ----- truncation ----------------------------------------------------------------------------------
def test_truncate_words():
    text = "alpha  beta\n\tgamma delta\nepsilon"
    assert truncate_words(text, 3) == "alpha  beta\n\tgamma"
    assert truncate_words(text, 1) == "alpha"
    assert truncate_words(text, 5) == text
    assert truncate_words(text, 50) == text
    assert truncate_words(text, None) == text
    long = " ".join(f"w{i}" for i in range(10000))
    assert len(truncate_words(long, 6000).split()) == 6000
    assert truncate_words(long, 4000).split()[-1] == "w3999"
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError):
            truncate_words(text, bad)


def test_corpus_config_defaults_and_validation():
    config = from_dict(CorpusConfig, {})
    assert config.path == "" and config.enabled
    assert config.max_words_for("games") == 6000 == config.max_words_for("interactive")
    assert config.max_words_for("tool_use") == 4000
    assert from_dict(CorpusConfig, {"tool_use_max_words": 10}).max_words_for("tool_use") == 10
    with pytest.raises(ConfigError):
        from_dict(CorpusConfig, {"games_max_words": 0})
    with pytest.raises(ConfigError):
        config.max_words_for("chess")


# ----- sampling ------------------------------------------------------------------------------------
DOCS = [Document(f"d{i}", f"document number {i} " + "word " * i, "test", {}) for i in range(40)]


def test_sampler_is_deterministic_per_key_and_order_independent():
    a, b = CorpusSampler(DOCS, seed=3), CorpusSampler(DOCS, seed=3)
    keys = [(step, slot, attempt) for step in range(3) for slot in range(4) for attempt in range(5)]
    first = [a.sample(*k).doc_id for k in keys]
    second = [b.sample(*k).doc_id for k in reversed(keys)][::-1]
    assert first == second
    assert len(set(first)) > 20  # fresh documents across attempts, not one fixed pick
    attempts = [a.sample(0, 0, attempt).doc_id for attempt in range(5)]
    assert len(set(attempts)) > 1
    other = [CorpusSampler(DOCS, seed=4).sample(*k).doc_id for k in keys]
    assert other != first


def test_sampler_stream_and_rng_modes():
    one, two = CorpusSampler(DOCS, seed=11), CorpusSampler(DOCS, seed=11)
    assert [one.sample().doc_id for _ in range(20)] == [two.sample().doc_id for _ in range(20)]
    assert CorpusSampler(DOCS, 0).sample(random.Random(5)) == CorpusSampler(DOCS, 99).sample(random.Random(5))
    with pytest.raises(TypeError):
        one.sample(1.5)
    with pytest.raises(CorpusError):
        CorpusSampler([], seed=0)


def test_sampler_truncates_to_max_words():
    sampler = CorpusSampler(DOCS, seed=0, max_words=4)
    for attempt in range(30):
        doc = sampler.sample(attempt)
        assert len(doc.text.split()) <= 4
        original = next(d for d in DOCS if d.doc_id == doc.doc_id)
        assert original.text.startswith(doc.text)
    assert CorpusSampler(DOCS, seed=0).sample(7).text == DOCS[CorpusSampler(DOCS, seed=0).index(7)].text


# ----- the offline corpus --------------------------------------------------------------------------
def check_records(path, package_names):
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        assert set(record) == {"id", "text", "source", "provenance"}
        assert set(record["provenance"]) == {"package", "version", "object"}
        assert record["provenance"]["package"] in package_names
        assert record["source"] == f"{record['provenance']['package']}:{record['provenance']['object']}"
        body = record["text"].split("\n\n", 1)[1]
        assert record["text"].startswith(record["provenance"]["object"] + "\n\n")
        assert len(body.split()) >= MIN_DOC_WORDS
    assert len({r["id"] for r in records}) == len(records)
    assert len({" ".join(r["text"].split("\n\n", 1)[1].split()) for r in records}) == len(records)
    docs = load_corpus(path)  # our own reader accepts the file
    assert [d.doc_id for d in docs] == [r["id"] for r in records]
    return records


def test_offline_tool_use_corpus(tmp_path):
    out = tmp_path / "corpus" / "tool_use.jsonl"
    count = build_offline_corpus("tool_use", out, max_docs=25, seed=0)
    assert count == 25
    records = check_records(out, {"python-stdlib"})
    assert len(records) == 25
    assert all(r["provenance"]["version"] == platform.python_version() for r in records)
    assert all(r["id"].startswith("tool_use-") for r in records)
    assert len({r["provenance"]["object"].split(".")[0] for r in records}) > 5  # varied modules
    again = tmp_path / "again.jsonl"
    build_offline_corpus("tool_use", again, max_docs=25, seed=0)
    assert again.read_bytes() == out.read_bytes()
    other = tmp_path / "other.jsonl"
    build_offline_corpus("tool_use", other, max_docs=25, seed=1)
    assert other.read_bytes() != out.read_bytes()
    assert [p.name for p in out.parent.iterdir()] == ["tool_use.jsonl"]  # no temporary files left


def test_offline_corpus_is_bounded_by_what_exists(tmp_path):
    out = tmp_path / "all.jsonl"
    count = build_offline_corpus("tool_use", out, max_docs=10**6, seed=0)
    assert 100 < count < 10**6
    assert len(check_records(out, {"python-stdlib"})) == count


def test_offline_corpus_rejects_bad_arguments(tmp_path):
    with pytest.raises(CorpusError, match="unknown corpus kind"):
        build_offline_corpus("novels", tmp_path / "x.jsonl", 5, 0)
    for bad in (0, -1, 2.0):
        with pytest.raises(CorpusError, match="max_docs"):
            build_offline_corpus("tool_use", tmp_path / "x.jsonl", bad, 0)
    assert not (tmp_path / "x.jsonl").exists()


@pytest.fixture(scope="module")
def games_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("games") / "games.jsonl"
    return out, build_offline_corpus("games", out, max_docs=30, seed=0)


def test_offline_games_corpus(games_corpus, tmp_path):
    import scipy
    import sympy

    out, count = games_corpus
    assert count == 30
    records = check_records(out, {"sympy", "scipy"})
    packages = [r["provenance"]["package"] for r in records]
    assert packages.count("sympy") == 20 and packages.count("scipy") == 10  # the 2:1 math:science mix
    versions = {r["provenance"]["package"]: r["provenance"]["version"] for r in records}
    assert versions == {"sympy": sympy.__version__, "scipy": scipy.__version__}
    assert all(r["source"].startswith(("sympy:sympy.", "scipy:scipy.")) for r in records)
    again = tmp_path / "again.jsonl"
    assert build_offline_corpus("games", again, max_docs=30, seed=0) == 30
    assert again.read_bytes() == out.read_bytes()
