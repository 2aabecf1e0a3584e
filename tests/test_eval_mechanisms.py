"""Held-out mechanism benchmark (heldout_mechanisms): scripted players with known scores, played in the sandbox.

The scripted backend recognises each episode and turn by its sampling seed (the runner samples turn t
of an item with ``derive_seed(item seed, 'turn', t)``), so a player can replay a known plan."""

from __future__ import annotations

import json

import pytest
from scripted_backend import ScriptedBackend

from spade.configtools import ConfigError, from_dict
from spade.evals.base import EvalContext, EvalRun, evaluate
from spade.evals.heldout_mechanisms import HeldoutMechanisms, HeldoutMechanismsConfig
from spade.envs.mechanisms import get_family, sample_instance
from spade.seeding import derive_seed

FAMILIES = ["scheduling", "lp"]
SEED = 5


def bench(**overrides) -> HeldoutMechanisms:
    return HeldoutMechanisms(from_dict(HeldoutMechanismsConfig, {"families": FAMILIES, "instances": 1,
                                                                 "max_turns": 8, **overrides}))


def player(benchmark: HeldoutMechanisms, plan):
    """A reply function: ``plan(family, seed, presentation)`` -> the action lines of that item, played in order
    (written_out items get them joined with '; ' in one reply); past the end it says nothing useful."""
    turns = {}
    for item in benchmark.items():
        job_seed = derive_seed(SEED, "eval", "heldout_mechanisms", item.id)
        lines = plan(item.payload["family"], item.payload["seed"], item.payload["presentation"])
        if item.payload["presentation"] == "written_out":
            lines = ["; ".join(lines)]
        for t in range(benchmark.config.max_turns):
            turns[derive_seed(job_seed, "turn", t)] = lines[t] if t < len(lines) else "thinking"
    return lambda text, seed: "My move: \\boxed{" + turns[seed] + "}"


def run(benchmark, reply, tiny_model, pool, tmp_path) -> dict:
    ctx = EvalContext(ScriptedBackend(tiny_model[1], reply), seed=SEED, benchmark="heldout_mechanisms",
                      max_new_tokens=256, pool_factory=lambda: pool)
    ctx.close = lambda: None  # the session pool outlives this evaluation
    result = evaluate(benchmark, ctx, EvalRun("test", 0, tmp_path / "out.json"), progress=False)
    return {row["metric"]: row["value"] for row in result["rows"]}


def test_items_and_config_errors():
    items = bench(instances=2).items()
    assert [i.id for i in items][:3] == ["scheduling/10000/written_out", "scheduling/10000/written",
                                         "scheduling/10000/agentic"]
    assert len(items) == 2 * 2 * 3 and {i.payload["seed"] for i in items} == {10_000, 10_001}
    assert {i.group for i in items} == set(FAMILIES)
    with pytest.raises(ConfigError, match=r"eval.heldout_mechanisms.presentations.*'informed'.*allowed"):
        from_dict(HeldoutMechanismsConfig, {"presentations": ["informed"]})
    with pytest.raises(ConfigError, match=r"repeats"):
        from_dict(HeldoutMechanismsConfig, {"presentations": ["written", "written"]})
    with pytest.raises(ConfigError, match=r"eval.heldout_mechanisms.families.*'tsp'.*allowed.*'knapsack'"):
        bench(families=["tsp"]).items()
    assert len(HeldoutMechanisms(HeldoutMechanismsConfig()).items()) == 7 * 2 * 3  # defaults: every family


def test_optimal_player_scores_one_and_finish_scores_zero(tiny_model, pool, tmp_path):
    benchmark = bench()
    optimal = run(benchmark, player(benchmark, lambda f, s, p: sample_instance(f, s).optimal_actions),
                  tiny_model, pool, tmp_path / "optimal")
    assert optimal["score"] == 1.0 and optimal["env_failure_rate"] == 0.0
    assert all(optimal[f"score/{p}"] == 1.0 for p in ("written_out", "written", "agentic"))
    assert optimal["score/scheduling"] == optimal["score/lp"] == 1.0
    assert optimal["gap/written_out-agentic"] == 0.0 and optimal["gap/written-agentic"] == 0.0
    for family in FAMILIES:  # finish commits nothing; these instances have idle utility below the default's
        inst = sample_instance(family, 10_000)
        assert inst.u_idle < inst.u0
    idle = run(benchmark, player(benchmark, lambda f, s, p: ["finish"]), tiny_model, pool, tmp_path / "idle")
    assert idle["score"] == 0.0 and idle["score/agentic"] == 0.0


def test_scores_per_presentation_family_and_gap(tiny_model, pool, tmp_path):
    """Optimal when the parameters are shown, a swapped schedule (partial score) when agentic on scheduling,
    and a player that never commits (truncated, 0) when agentic on lp."""
    benchmark = bench(seed_offset=10_001)
    inst = sample_instance("scheduling", 10_001)
    swapped = inst.optimal[:-2] + inst.optimal[-2:][::-1]
    # u* = -268, u0 = -280 and the swapped order costs 270: score (-270 + 280) / (-268 + 280) = 10 / 12
    assert (inst.u_star, inst.u0, get_family("scheduling").utility(inst.params, swapped)) == (-268.0, -280.0, -270.0)
    partial = 10 / 12

    def plan(family, seed, presentation):
        if presentation != "agentic":
            return sample_instance(family, seed).optimal_actions
        if family == "scheduling":
            return get_family(family).actions(inst.params, swapped)
        return []  # "thinking" every turn: never terminates

    metrics = run(benchmark, player(benchmark, plan), tiny_model, pool, tmp_path)
    # 6 items: 4 informed ones score 1, agentic scheduling scores `partial`, agentic lp 0 (truncated)
    assert metrics["score"] == pytest.approx((4 + partial) / 6)
    assert metrics["score/written_out"] == metrics["score/written"] == 1.0
    assert metrics["score/agentic"] == pytest.approx(partial / 2)
    assert metrics["score/scheduling"] == pytest.approx((2 + partial) / 3)
    assert metrics["score/lp"] == pytest.approx(2 / 3)
    assert metrics["gap/written_out-agentic"] == pytest.approx(((1 - partial) + 1) / 2)
    records = [json.loads(line) for line in (tmp_path / "out.items.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in records}
    assert by_id["lp/10001/agentic"]["turns"] == 8 and by_id["lp/10001/agentic"]["extra"]["outcome"] != "env_failure"
    assert by_id["lp/10001/written_out"]["turns"] == 1
    assert by_id["scheduling/10001/agentic"]["extra"]["params_hash"] == inst.params_hash
