"""Designer skills, domains, variants and the round-robin skill schedule."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spade.designer import skills as sk
from spade.envs.library.registry import GAME_SKILLS, TOOL_USE_SKILLS

SIX = ("a", "b", "c", "d", "e", "f")


def test_skill_tables_match_the_library_lists():
    assert tuple(s for s in sk.SKILLS if sk.SKILLS[s].kind == "game") == GAME_SKILLS
    assert tuple(s for s in sk.SKILLS if sk.SKILLS[s].kind == "tool_use") == TOOL_USE_SKILLS
    for skill in sk.SKILLS.values():
        text = skill.description
        assert text and text[0].isupper() and text.endswith(".")
        assert text.count(". ") == 0, f"{skill.id}: description should be one sentence"
        assert skill.name and skill.id == sk.get_skill(skill.id).id
    assert sk.skill_kind("optimization") == "game"
    assert sk.skill_kind("error_recovery") == "tool_use"
    with pytest.raises(KeyError, match="unknown skill"):
        sk.get_skill("juggling")


def test_ten_domains_and_four_weighted_variants():
    assert len(sk.DOMAINS) == 10 and len(set(sk.DOMAIN_IDS)) == 10
    names = " ".join(d.name.lower() for d in sk.DOMAINS.values())
    for word in ("retail", "flight", "telecom", "banking", "calendar", "file", "cart", "support", "smart home", "task"):
        assert word in names
    assert all(d.description.endswith(".") for d in sk.DOMAINS.values())
    assert {v: sk.VARIANTS[v].weight for v in sk.VARIANT_IDS} == {
        "execute": 3, "read_then_write": 2, "missing_value": 1, "with_irrelevant": 1,
    }
    assert "decline_request" in sk.get_variant("with_irrelevant").description
    assert "read tool" in sk.get_variant("missing_value").description
    with pytest.raises(KeyError):
        sk.get_domain("space_station")
    with pytest.raises(KeyError):
        sk.get_variant("chaos")


def test_round_robin_three_of_six_alternates_halves():
    rounds = [sk.active_skills(r, SIX, 3) for r in range(5)]
    assert rounds == [("a", "b", "c"), ("d", "e", "f"), ("a", "b", "c"), ("d", "e", "f"), ("a", "b", "c")]
    assert sk.active_skills(1, GAME_SKILLS, 3) == GAME_SKILLS[3:]


def test_round_robin_wraps_when_per_round_does_not_divide():
    assert [sk.active_skills(r, SIX, 4) for r in range(4)] == [
        ("a", "b", "c", "d"), ("e", "f", "a", "b"), ("c", "d", "e", "f"), ("a", "b", "c", "d"),
    ]
    five = SIX[:5]
    assert [sk.active_skills(r, five, 2) for r in range(6)] == [
        ("a", "b"), ("c", "d"), ("e", "a"), ("b", "c"), ("d", "e"), ("a", "b"),
    ]
    # every skill gets the same number of activations over a full cycle
    counts = Counter(s for r in range(5) for s in sk.active_skills(r, five, 2))
    assert set(counts.values()) == {2}


def test_round_robin_edge_cases():
    assert sk.active_skills(7, ("x", "y"), 2) == ("x", "y")
    assert sk.active_skills(3, ("x", "y"), 5) == ("x", "y")  # clamped: each skill once
    assert sk.active_skills(2, SIX, 1) == ("c",)
    for bad in [(-1, SIX, 3), (0, (), 3), (0, SIX, 0), (0, SIX, True), (1.0, SIX, 3)]:
        with pytest.raises(ValueError):
            sk.active_skills(*bad)


def test_variant_draws_follow_three_two_one_one():
    rng = random.Random(1234)
    counts = Counter(sk.sample_variant(rng) for _ in range(7000))
    expected = {"execute": 3000, "read_then_write": 2000, "missing_value": 1000, "with_irrelevant": 1000}
    assert set(counts) == set(expected)
    for variant, target in expected.items():
        assert abs(counts[variant] - target) <= 150, (variant, counts[variant])


def test_samplers_are_deterministic_and_cover_everything():
    a = [sk.sample_variant(random.Random(5)) for _ in range(3)]
    assert len(set(a)) == 1
    one, two = random.Random(9), random.Random(9)
    assert [sk.sample_domain(one) for _ in range(50)] == [sk.sample_domain(two) for _ in range(50)]
    rng = random.Random(0)
    domains = Counter(sk.sample_domain(rng) for _ in range(2000))
    assert set(domains) == set(sk.DOMAIN_IDS)
    assert min(domains.values()) > 120  # roughly uniform: 200 expected each
