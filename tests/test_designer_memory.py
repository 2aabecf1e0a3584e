"""Environment memory: cap and eviction, seed selection, library seeding, persistence."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from spade.configtools import ConfigError, from_dict
from spade.designer.memory import LIBRARY_STEP, EnvironmentMemory, MemoryConfig, MemoryRecord
from spade.envs.library.registry import library


def rec(env_id, skill="optimization", win_rate=0.5, regret=0.1, step=0, flavour="puzzle", code=None):
    return MemoryRecord(env_id, code if code is not None else f"# code of {env_id}\n", skill, flavour,
                        win_rate, regret, step)


def ids(records):
    return [r.env_id for r in records]


# ----- cap and eviction ----------------------------------------------------------------------------
def test_cap_evicts_oldest_first():
    memory = EnvironmentMemory(MemoryConfig(cap=3))
    evicted = []
    for i in range(5):
        evicted += memory.add(rec(f"e{i}", step=i))
    assert ids(memory.records) == ["e2", "e3", "e4"]
    assert ids(evicted) == ["e0", "e1"]
    assert len(memory) == 3 and ids(memory) == ["e2", "e3", "e4"]


def test_re_adding_an_id_replaces_it_and_makes_it_newest():
    memory = EnvironmentMemory(MemoryConfig(cap=3))
    for i in range(3):
        memory.add(rec(f"e{i}"))
    assert memory.add(rec("e0", win_rate=0.3)) == []
    assert ids(memory.records) == ["e1", "e2", "e0"]
    assert memory.get("e0").win_rate == 0.3
    assert ids(memory.add(rec("e3"))) == ["e1"]
    assert memory.get("e1") is None
    with pytest.raises(TypeError):
        memory.add({"env_id": "x"})


def test_default_cap_is_two_hundred():
    memory = EnvironmentMemory()
    for i in range(250):
        memory.add(rec(f"e{i}"))
    assert len(memory) == 200 and memory.records[0].env_id == "e50"


def test_record_validation():
    with pytest.raises(ValueError, match="win_rate"):
        rec("x", win_rate=1.5)
    with pytest.raises(ValueError, match="regret"):
        rec("x", regret=float("nan"))
    with pytest.raises(ValueError, match="unknown skill"):
        rec("x", skill="juggling")
    with pytest.raises(ValueError, match="env_id"):
        rec("")


# ----- positive seeds ------------------------------------------------------------------------------
def hand_built() -> EnvironmentMemory:
    memory = EnvironmentMemory()
    # 15 in-band records of "optimization" with regrets 0.00 .. 0.14 (p14 has the highest)
    for i in range(15):
        memory.add(rec(f"p{i}", win_rate=0.2 + 0.04 * i, regret=i / 100, step=i))
    # out of band or wrong skill, with huge regret: never positive seeds for "optimization"
    memory.add(rec("too_easy", win_rate=0.95, regret=0.9))
    memory.add(rec("too_hard", win_rate=0.05, regret=0.9))
    memory.add(rec("edge_high", win_rate=0.86, regret=0.9))
    memory.add(rec("other_skill", skill="causal_inference", win_rate=0.5, regret=0.9))
    memory.add(rec("no_regret", win_rate=0.5, regret=None))
    return memory


def test_positive_pool_is_the_top_regret_in_band_records():
    memory = hand_built()
    assert ids(memory.positive_pool("optimization", n=2)) == [f"p{i}" for i in range(14, 4, -1)]  # top 10
    assert ids(memory.positive_pool("optimization", n=4)) == [f"p{i}" for i in range(14, 2, -1)]  # top 12
    pool_all = memory.positive_pool("optimization", n=6)  # max(18, 10) > 16 candidates: all, no-regret last
    assert len(pool_all) == 16 and pool_all[-1].env_id == "no_regret"
    memory.add(rec("band_edges_low", win_rate=0.15, regret=0.5))
    memory.add(rec("band_edges_high", win_rate=0.85, regret=0.4))
    assert ids(memory.positive_pool("optimization"))[:2] == ["band_edges_low", "band_edges_high"]


def test_positive_seeds_draw_from_the_pool_at_random():
    memory = hand_built()
    top10 = {f"p{i}" for i in range(5, 15)}
    rng = random.Random(0)
    seen = Counter()
    for _ in range(400):
        seeds = memory.positive_seeds("optimization", rng=rng)
        assert len(seeds) == 2 and len(set(ids(seeds))) == 2
        assert set(ids(seeds)) <= top10
        seen.update(ids(seeds))
    assert set(seen) == top10
    again = [ids(memory.positive_seeds("optimization", rng=random.Random(7))) for _ in range(3)]
    assert again[0] == again[1] == again[2]
    assert ids(memory.positive_seeds("optimization")) == ["p14", "p13"]  # no rng: the best two
    assert ids(memory.positive_seeds("optimization", n=1)) == ["p14"]
    assert memory.positive_seeds("optimization", n=0) == []
    assert ids(memory.positive_seeds("causal_inference")) == ["other_skill"]
    assert memory.positive_seeds("logical_deduction") == []


def test_library_records_are_fallback_positive_seeds_only():
    memory = EnvironmentMemory()
    entries = [e for e in library() if e.skill == "optimization"]
    assert entries, "the library should have optimization environments"
    assert memory.seed_from_library(library()) == len(library())
    record = memory.get(f"library:{entries[0].name}")
    assert record.win_rate is None and record.regret is None and record.step == LIBRARY_STEP
    assert record.code == entries[0].source() and record.flavour == entries[0].flavour
    fallback = memory.positive_seeds("optimization", n=5, rng=random.Random(0))
    names = {f"library:{e.name}" for e in entries}
    assert set(ids(fallback)) <= names and len(fallback) == min(5, len(names))
    # out-of-band measured records do not displace the fallback ...
    memory.add(rec("solved_always", win_rate=1.0, regret=0.0))
    assert all(r.env_id.startswith("library:") for r in memory.positive_seeds("optimization", n=5))
    # ... a measured record inside the band does, and library records are then never chosen
    memory.add(rec("measured", win_rate=0.4, regret=-0.05))
    for seed in range(20):
        assert ids(memory.positive_seeds("optimization", rng=random.Random(seed))) == ["measured"]
    # library records are never negative examples
    assert memory.negative_seed("optimization").env_id == "solved_always"
    assert memory.negative_seed("pattern_recognition").env_id == "solved_always"


# ----- negative seed -------------------------------------------------------------------------------
def test_negative_seed_prefers_same_skill_then_same_family():
    memory = EnvironmentMemory()
    memory.add(rec("opt_mid", win_rate=0.5))
    memory.add(rec("opt_at_threshold_high", win_rate=0.9))
    memory.add(rec("opt_at_threshold_low", win_rate=0.1))
    assert memory.negative_seed("optimization") is None  # thresholds are strict
    memory.add(rec("tool_easy", skill="error_recovery", flavour="tool_use", win_rate=1.0))
    assert memory.negative_seed("optimization") is None  # a tool-use example never serves a game prompt
    memory.add(rec("causal_hard", skill="causal_inference", win_rate=0.0))
    assert memory.negative_seed("optimization").env_id == "causal_hard"  # any skill of the family
    memory.add(rec("opt_easy", win_rate=0.95))
    memory.add(rec("opt_hard", win_rate=0.02))
    assert memory.negative_seed("optimization").env_id == "opt_hard"  # same skill, newest without rng
    drawn = {memory.negative_seed("optimization", random.Random(s)).env_id for s in range(50)}
    assert drawn == {"opt_easy", "opt_hard"}
    assert memory.negative_seed("data_retrieval").env_id == "tool_easy"


def test_disabled_memory_gives_no_seeds():
    memory = hand_built()
    memory.add(rec("bad", win_rate=1.0))
    off = EnvironmentMemory(MemoryConfig(enabled=False))
    for record in memory.records:
        off.add(record)
    assert len(off) == len(memory)
    assert off.positive_seeds("optimization", rng=random.Random(0)) == []
    assert off.negative_seed("optimization") is None
    assert memory.negative_seed("optimization") is not None


# ----- persistence ---------------------------------------------------------------------------------
def test_save_load_round_trip_is_exact(tmp_path):
    memory = EnvironmentMemory(MemoryConfig(cap=10))
    memory.seed_from_library(library()[:2])
    memory.add(rec("floats", win_rate=0.1 + 0.2, regret=-1 / 3, step=12))
    memory.add(rec("unicode", code="s = 'naïve — ünïcode'\n\tx = {1: '\\n'}\n", win_rate=0.0, regret=None))
    path = tmp_path / "mem" / "memory.json"
    memory.save(path)
    loaded = EnvironmentMemory.load(path, MemoryConfig(cap=10))
    assert loaded.records == memory.records
    assert loaded.get("floats").win_rate == 0.1 + 0.2 and loaded.get("floats").regret == -1 / 3
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["cap"] == 10 and len(data["records"]) == 4
    assert [p.name for p in path.parent.iterdir()] == ["memory.json"]
    smaller = EnvironmentMemory.load(path, MemoryConfig(cap=2))
    assert smaller.records == memory.records[2:]


def test_load_rejects_broken_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        EnvironmentMemory.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        EnvironmentMemory.load(bad)
    bad.write_text(json.dumps({"records": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="format"):
        EnvironmentMemory.load(bad)
    bad.write_text(json.dumps({"format": 1, "records": [{"env_id": "x"}]}), encoding="utf-8")
    with pytest.raises(ValueError, match="record 0"):
        EnvironmentMemory.load(bad)


def test_memory_config_schema():
    config = from_dict(MemoryConfig, {})
    assert (config.cap, config.n_positive, config.band_low, config.band_high) == (200, 2, 0.15, 0.85)
    assert (config.negative_low, config.negative_high, config.pool_factor, config.pool_min) == (0.1, 0.9, 3, 10)
    with pytest.raises(ConfigError):
        from_dict(MemoryConfig, {"band_low": 0.9, "band_high": 0.2})
    with pytest.raises(ConfigError):
        from_dict(MemoryConfig, {"negative_high": 1.5})
    with pytest.raises(ConfigError):
        from_dict(MemoryConfig, {"cap": 0})
