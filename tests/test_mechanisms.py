"""Mechanism families (issue 7, item 3): solvers, sampler, renderer and admission checks C1-C3."""

from __future__ import annotations

import re

import pytest

from spade.configtools import ConfigError, from_dict
from spade.envs.mechanisms import (
    AdmissionConfig,
    MechanismFamily,
    admit,
    admit_instance,
    drivers_for,
    families,
    get_family,
    register_mechanism,
    render,
    sample_instance,
)
from spade.envs.mechanisms.knapsack import KnapsackConfig
from spade.envs.mechanisms.stopping import continuation_values
from spade.envs.validate import Validator

FAMILIES = ("knapsack", "inventory", "scheduling", "tardiness", "facility", "lp", "stopping")

# Hand-solved instances: (family, params, u*, optimal decisions, default decisions, u0). Worked in comments.
HAND = [
    # Period 1 (credit 3): A(w2,v5) or B(w3,v4). Taking A leaves 1+3=4 for C(w3,v6)+D(w1,v2): 5+8=13.
    # Taking B leaves 3: best C alone, 4+6=10. Taking nothing: C+D=8. Default: B has the best midpoint
    # ratio (15/3) in period 1, C (6/3) in period 2 -> 4+6 = 10.
    ("knapsack", {"periods": 2, "budgets": [3, 3], "weights": [[2, 3], [3, 1]], "values": [[5, 4], [6, 2]],
                  "ranges": [[[0, 2], [10, 20]], [[4, 8], [0, 2]]], "labels": [["A", "B"], ["C", "D"]]},
     13.0, [[0], [0, 1]], [[1], [0]], 10.0),
    # Order 3 in period 1: sell 2 (10) - 3 - 2 fixed - 1 holding = 4; period 2 sells the leftover: 5. Total 9.
    # Order 2 then 1: 6 + 2 = 8. Default orders up to the midpoint 1, then 0: 5 - 1 - 2 = 2.
    ("inventory", {"periods": 2, "capacity": 3, "start_stock": 0, "price": 5, "unit_cost": 1, "fixed_cost": 2,
                   "holding": 1, "demands": [2, 1], "ranges": [[0, 2], [0, 0]]},
     9.0, [3, 0], [1, 0], 2.0),
    # p/w = 3, 0.25, 1 -> B, C, A completing at 1, 3, 6: 4*1 + 2*3 + 1*6 = 16. Default (midpoint weights
    # 1, 1, 1 -> SPT) runs B, C, A too, so u0 = u*: the sampler would reject this draw.
    ("scheduling", {"processing": [3, 1, 2], "weights": [1, 4, 2], "ranges": [[0, 2], [0, 2], [0, 2]],
                    "labels": ["A", "B", "C"]},
     -16.0, [1, 2, 0], [1, 2, 0], -16.0),
    # B, A, C: B ends 3 (due 3), A ends 5 (due 2, 3 late x 1), C ends 6 (due 6) -> 3.
    # EDD A, B, C: B ends 5, 2 late x 5 = 10.
    ("tardiness", {"processing": [2, 3, 1], "weights": [1, 5, 1], "due": [2, 3, 6],
                   "ranges": [[0, 2], [0, 10], [0, 2]], "labels": ["A", "B", "C"]},
     -3.0, [1, 0, 2], [0, 1, 2], -10.0),
    # Two sites on the two customers: both open costs 5 + 5 = 10; one open costs 5 + 10 = 15.
    # Default: midpoint costs 20 each: one site 20 + 10 = 30 < both 40 -> opens A only: true cost 15.
    ("facility", {"grid": 10, "sites": [[0, 0], [10, 0]], "customers": [[0, 0], [10, 0]], "demand": [1, 1],
                  "costs": [5, 5], "ranges": [[10, 30], [10, 30]], "labels": ["A", "B"], "probe_budget": 1},
     -10.0, [[0, 1]], [[0]], -15.0),
    # max 3x + 2y, x + y <= 4, x, y <= 3 -> x = 3, y = 1: 11. Default: midpoints 1 and 5 favour y: y = 3,
    # then x = 1: 3 + 6 = 9.
    ("lp", {"usage": [[1, 1]], "capacity": [4], "profit": [3, 2], "ranges": [[0, 2], [0, 10]], "upper": 3},
     11.0, [[3, 1]], [[1, 3]], 9.0),
    # Hindsight maximum 9 at round 2; the default accepts the first offer, 5.
    ("stopping", {"supports": [[1, 5, 9], [2, 9, 10], [3, 7, 8]], "offers": [5, 9, 7]},
     9.0, [0, 1], [1], 5.0),
]


@pytest.mark.parametrize("name,params,u_star,optimal,default,u0", HAND, ids=[h[0] for h in HAND])
def test_solvers_on_hand_instances(name, params, u_star, optimal, default, u0):
    family = get_family(name)
    value, plan = family.solve(params)
    assert value == u_star and plan == optimal
    assert family.brute_force(params) == u_star
    assert family.utility(params, plan) == u_star
    assert family.default_policy(params) == default
    assert family.utility(params, default) == u0


def test_registry_has_every_family_and_rejects_duplicates():
    assert set(FAMILIES) <= set(families())
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism(get_family("knapsack"))

    class Broken(MechanismFamily):
        name = "broken_family"
        env_functions = ()

    with pytest.raises(ValueError, match="lacks environment functions"):
        register_mechanism(Broken())
    with pytest.raises(ValueError, match="unknown mechanism family 'nope'.*allowed"):
        get_family("nope")


def test_configs_validate():
    with pytest.raises(ConfigError, match="periods"):
        from_dict(KnapsackConfig, {"periods": 0})
    with pytest.raises(ConfigError, match="unknown config key"):
        from_dict(KnapsackConfig, {"horizon": 3})
    with pytest.raises(ValueError, match="needs a KnapsackConfig"):
        sample_instance("knapsack", 0, get_family("lp").config_cls())
    with pytest.raises(ValueError, match="no draw in 3 attempts"):
        sample_instance("knapsack", 0, KnapsackConfig(max_attempts=3, min_gap=1000.0))
    with pytest.raises(ValueError, match="presentation 'spoken'"):
        render(sample_instance("lp", 0), "spoken")


@pytest.mark.parametrize("name", FAMILIES)
def test_sampled_instances_match_brute_force_and_beat_default(name):
    family = get_family(name)
    for seed in range(4):
        inst = sample_instance(name, seed)
        assert family.brute_force(inst.params) == pytest.approx(inst.u_star, abs=1e-9)
        assert inst.u_star - inst.u0 > inst.config["min_gap"] * max(1.0, abs(inst.u_star))
        assert inst.u_idle <= inst.u0
        assert family.utility(inst.params, inst.optimal) == inst.u_star
        again = sample_instance(name, seed)
        assert again.to_dict() == inst.to_dict() and again.params_hash == inst.params_hash
    assert sample_instance(name, 0).params_hash != sample_instance(name, 1).params_hash


def test_stopping_known_distribution_value():
    # V3 = (3+7+8)/3 = 6; V2 = (6+9+10)/3 = 25/3; V1 = (25/3 + 25/3 + 9)/3 = 77/9.
    values = continuation_values([[1, 5, 9], [2, 9, 10], [3, 7, 8]])
    assert values[:3] == pytest.approx([77 / 9, 25 / 3, 6.0])
    extras = get_family("stopping").extras({"supports": [[1, 5, 9], [2, 9, 10], [3, 7, 8]], "offers": [5, 9, 7]})
    assert extras["threshold_policy_utility"] == 9.0  # rejects 5 < 25/3, accepts 9 >= 6


def test_presentations_differ_only_in_what_is_shown():
    inst = sample_instance("inventory", 2)
    agentic, written = render(inst, "agentic"), render(inst, "written")
    demands = ", ".join(f"P{t + 1}: {d}" for t, d in enumerate(inst.params["demands"]))
    assert demands in written and demands not in agentic
    assert "PROBE_BUDGET = None" in agentic and f"U_STAR = {inst.u_star!r}" in agentic
    assert render(inst, "agentic") == agentic  # rendering is deterministic
    facility = render(sample_instance("facility", 0), "agentic")
    assert "PROBE_BUDGET = 2" in facility


@pytest.mark.parametrize("name", FAMILIES)
def test_rendered_env_passes_validator_and_admission(pool, name):
    inst = sample_instance(name, 3)
    source = render(inst, "agentic")
    report = Validator(pool).validate(source)
    assert report.valid, report.message
    admission = admit_instance(inst, pool, "agentic")
    assert admission.admitted, admission.message
    scores = {(r.driver, r.replay): r.reward for r in admission.replays}
    assert scores == {("optimal", 0): 1.0, ("optimal", 1): 1.0, ("default", 0): 0.0, ("default", 1): 0.0,
                      ("idle", 0): 0.0, ("idle", 1): 0.0}
    assert all(r.utility <= inst.u_star for r in admission.replays)
    assert admit_instance(inst, pool, "written").admitted


def test_probe_budget_is_enforced(pool):
    from spade.envs.sandboxed import SandboxedEnv

    inst = sample_instance("facility", 0)
    with SandboxedEnv.from_source(pool, render(inst, "agentic")) as env:
        env.reset(0)
        first = env.step("\\boxed{inspect A B C}")[0]
    assert f"costs exactly {inst.params['costs'][0]}" in first
    assert f"costs exactly {inst.params['costs'][1]}" in first
    assert "C stays hidden" in first and "Probes left: 0" in first


def _tamper(source: str, pattern: str, replacement: str) -> str:
    changed, count = re.subn(pattern, replacement, source, count=1, flags=re.MULTILINE)
    assert count == 1, pattern
    return changed


def test_admission_rejects_broken_environments(pool):
    inst = sample_instance("knapsack", 5)
    source, drivers = render(inst, "agentic"), drivers_for(inst)
    fast = AdmissionConfig(check_solution=False)

    wrong_star = _tamper(source, r"^U_STAR = .*$", f"U_STAR = {inst.u_star - 1!r}")
    report = admit(wrong_star, drivers, pool, fast, reference_u_star=inst.u_star)
    assert not report.admitted
    assert {"c3_reference_mismatch", "c3_exceeds_optimum", "c3_optimal_not_reproduced"} <= set(report.reasons)

    lower_default = _tamper(source, r"^U_ZERO = .*$", f"U_ZERO = {inst.u0 - 1!r}")
    assert admit(lower_default, drivers, pool, fast).reasons == ("c2_default_out_of_region",)

    crashing = _tamper(source, r"score = min\(1\.0", "score = 1 / 0 + min(1.0")
    assert admit(crashing, drivers, pool, fast).reasons == ("c1_exception",)

    stuck = dict(drivers, optimal=["inspect A"])
    assert admit(source, stuck, pool, fast).reasons == ("c1_no_terminal",)

    jitter = _tamper(source, r"u = float\(utility\(PARAMS, self.decisions\)\)",
                     "u = float(utility(PARAMS, self.decisions)) - __import__('time').perf_counter_ns() % 997 / 1e4")
    assert "c3_replay_mismatch" in admit(jitter, drivers, pool, fast).reasons

    wrong_plan = _tamper(source, r"^OPTIMAL_ACTIONS = .*$", f"OPTIMAL_ACTIONS = {inst.default_actions!r}")
    assert admit(wrong_plan, drivers, pool).reasons == ("c3_solution_mismatch",)

    assert admit("this is not python", drivers, pool).reasons == ("invalid",)
    with pytest.raises(ValueError, match="missing"):
        admit(source, {"optimal": []}, pool)
