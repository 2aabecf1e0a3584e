"""Mechanism families as a fixed-environment pool (baseline.pool_source: mechanisms) and the written-out
presentation (issue 7, item 3). Environments run only in the sandbox (the session ``pool``)."""

from __future__ import annotations

import re

import pytest
from scripted_backend import ScriptedBackend

import spade.envs.mechanisms as mechanisms
from spade.core.env_source import MECHANISM_PRESENTATIONS, check_config
from spade.core.pool_sources import MECHANISM_SKILLS, LibrarySource, MechanismSource, make_source
from spade.config import SpadeConfig, resolve_layers
from spade.configtools import ConfigError, from_dict
from spade.designer.memory import EnvironmentMemory
from spade.envs.library.registry import GAME_SKILLS
from spade.envs.mechanisms import (PRESENTATIONS, admit_instance, drivers_for, families, get_family, render,
                                   sample_instance)
from spade.envs.sandboxed import SandboxedEnv
from spade.envs.validate import Validator
from spade.seeding import derive_seed
from spade.core.selfplay import SelfPlay

TINY = {
    "model_card": "tiny-random",
    "seed": 7,
    "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2,
                 "design_attempts": 1, "backfill": False, "train_designer": False},
    "agent": {"max_turns": 2, "max_new_tokens": 8},
    "train": {"global_batch": 4},  # 4 / 2 slots = 2 no-hint plays per environment
    "corpus": {"enabled": False},
    "eval": {"heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2},
             "heldout_mechanisms": {"families": ["lp", "facility"], "instances": 2}},
}
POOL = {"baseline": {"mode": "fixed_pool", "pool_source": "mechanisms", "mechanism_families": ["lp", "facility"],
                     "mechanism_instances": 1}}


def config_with(*layers: dict):
    from spade.configtools import deep_merge

    data: dict = {}
    for layer in (TINY,) + layers:
        data = deep_merge(data, layer)
    return from_dict(SpadeConfig, resolve_layers(data))


def play(pool, source: str, actions: list) -> tuple:
    """(final reward, terminal info, steps) of ``actions`` (each wrapped in \\boxed{...}) from a fresh reset."""
    with SandboxedEnv.from_source(pool, source) as env:
        env.reset(0)
        for steps, line in enumerate(actions, 1):
            _, reward, terminated, truncated, info = env.step("\\boxed{" + line + "}")
            if terminated or truncated:
                return reward, info, steps
    raise AssertionError(f"{actions} did not end the episode")


# ----------------------------------------------------------------------------------------- written_out
def test_presentation_constants_agree():
    assert PRESENTATIONS == MECHANISM_PRESENTATIONS == ("agentic", "written", "written_out")
    assert set(MECHANISM_SKILLS) == set(families()) and set(MECHANISM_SKILLS.values()) <= set(GAME_SKILLS)


@pytest.mark.parametrize("name", sorted(families()))
def test_written_out_intro_shows_every_parameter_and_asks_for_one_plan(name):
    inst = sample_instance(name, 4)
    family = get_family(name)
    written = family.intro(inst.params, "written", None)
    out = render(inst, "written_out")
    intro = mechanisms.written_out_intro(family, inst.params)
    assert repr(intro) in out and "PRESENTATION = 'written_out'" in out
    # the written intro minus its per-turn instructions, then the plan instructions
    assert intro.startswith(written.split("One command per turn")[0].strip())
    assert "One command per turn" in written.splitlines()[-1]  # every family keeps its per-turn text last
    assert "One command per turn" not in intro and "in a single reply" in intro
    assert mechanisms.WRITTEN_OUT_PLAN[name] in intro


@pytest.mark.parametrize("name", sorted(families()))
def test_written_out_scores_equal_the_stateful_presentations(pool, name):
    """Same theta: optimal, default and idle drivers give the same utility and score in all three forms."""
    inst = sample_instance(name, 3)
    outcomes = {}
    for presentation in PRESENTATIONS:
        report = admit_instance(inst, pool, presentation)
        assert report.admitted, (presentation, report.message)
        outcomes[presentation] = sorted({(r.driver, r.reward, r.utility, r.u_star) for r in report.replays})
        steps = {r.driver: r.steps for r in report.replays}
        if presentation == "written_out":
            assert steps == {"optimal": 1, "default": 1, "idle": 1}  # one turn each
    assert outcomes["written_out"] == outcomes["written"] == outcomes["agentic"]
    assert outcomes["agentic"] == sorted({("optimal", 1.0, inst.u_star, inst.u_star),
                                          ("default", 0.0, inst.u0, inst.u_star),
                                          ("idle", 0.0, inst.u_idle, inst.u_star)})
    assert drivers_for(inst, "written_out")["optimal"] == ["; ".join(inst.optimal_actions)]


def test_written_out_partial_and_broken_plans(pool):
    # scheduling, seed 3: the optimal order with its last two jobs swapped is a worse but complete plan
    inst = sample_instance("scheduling", 3)
    family = get_family("scheduling")
    swapped = inst.optimal[:-2] + inst.optimal[-2:][::-1]
    expected = inst.score(family.utility(inst.params, swapped))
    assert 0.0 < expected < 1.0  # a partial score, so the comparison below is not trivially 0 or 1
    lines = family.actions(inst.params, swapped)
    for presentation in ("written", "agentic"):
        reward, info, steps = play(pool, render(inst, presentation), lines)
        assert (reward, info["utility"], steps) == (pytest.approx(expected), family.utility(inst.params, swapped),
                                                    len(lines))
    reward, info, steps = play(pool, render(inst, "written_out"), ["; ".join(lines)])
    assert (reward, info["utility"], steps) == (pytest.approx(expected), family.utility(inst.params, swapped), 1)

    # knapsack: a plan cut after period 1 = period 1 then 'finish' in the stateful form (rest counts as nothing)
    knap = sample_instance("knapsack", 3)
    first = knap.optimal_actions[:1]
    cut = play(pool, render(knap, "written_out"), first)
    stateful = play(pool, render(knap, "written"), first + ["finish"])
    assert cut[0] == stateful[0] and cut[1]["utility"] == stateful[1]["utility"] == get_family("knapsack").utility(
        knap.params, knap.optimal[:1])
    # a command that is not allowed stops the plan there; later commands are not played
    bad = play(pool, render(knap, "written_out"), [first[0] + "; inspect A; " + "; ".join(knap.optimal_actions[1:])])
    assert bad[1]["utility"] == cut[1]["utility"] and bad[2] == 1
    # no \boxed plan at all: one terminal turn, nothing committed
    with SandboxedEnv.from_source(pool, render(knap, "written_out")) as env:
        env.reset(0)
        text, reward, terminated, truncated, info = env.step("I would take everything.")
    assert (reward, terminated, truncated, info["committed"]) == (0.0, True, False, 0) and "No plan found" in text


def test_written_out_passes_the_validator(pool):
    report = Validator(pool).validate(render(sample_instance("stopping", 1), "written_out"))
    assert report.valid, report.message


# ----------------------------------------------------------------------------------------- config
def test_pool_source_defaults_to_the_library_and_checks_its_keys():
    plain = config_with({"baseline": {"mode": "fixed_pool"}})
    assert plain.baseline.pool_source == "library" and isinstance(make_source(plain), LibrarySource)
    with pytest.raises(ConfigError, match=r"baseline.mechanism_families.*'no_such'.*allowed.*'facility'"):
        MechanismSource(config_with(POOL, {"baseline": {"mechanism_families": ["lp", "no_such"]}}))
    with pytest.raises(ConfigError, match=r"baseline.mechanism_families.*'no_such'.*allowed"):
        check_config(config_with(POOL, {"baseline": {"mechanism_families": ["no_such"]}}))
    with pytest.raises(ConfigError, match=r"baseline.pool_source.*'fixed_pool' only"):
        check_config(config_with({"baseline": {"pool_source": "mechanisms"}}))
    with pytest.raises(ConfigError, match=r"baseline.pool_source.*allowed values"):
        config_with({"baseline": {"pool_source": "mechanism"}})
    with pytest.raises(ConfigError, match=r"baseline.mechanism_presentation.*allowed values"):
        config_with(POOL, {"baseline": {"mechanism_presentation": "informed"}})
    with pytest.raises(ConfigError, match=r"selfplay.flavour.*tool_use"):
        check_config(config_with(POOL, {"selfplay": {"flavour": "tool_use", "skills": ["api_orchestration"]}}))
    check_config(config_with(POOL))  # valid


# ----------------------------------------------------------------------------------------- the source
def test_mechanism_source_entries_seeds_and_provenance(pool):
    config = config_with(POOL, {"baseline": {"mechanism_instances": 2, "pool_seed_offset": 3}})
    source = make_source(config, pool)
    assert isinstance(source, MechanismSource)
    entries = source.entries()
    heldout = {10_000, 10_001}  # eval.heldout_mechanisms: seed_offset 10_000, 2 instances
    assert [e.provenance["family"] for e in entries] == ["lp", "lp", "facility", "facility"]
    for entry in entries:
        p = entry.provenance
        assert p["seed"] == derive_seed(7 + 3, "mechanism-pool", p["family"], p["draw"]) and p["seed"] not in heldout
        inst = sample_instance(p["family"], p["seed"])
        assert entry.code == render(inst, "agentic")
        assert entry.name == f"{p['family']}-{p['seed']}"
        assert entry.origin == f"mechanism:{p['family']}:{p['seed']}:{inst.params_hash}"
        assert entry.skill == MECHANISM_SKILLS[p["family"]]
        assert (p["attempt"], p["params_hash"], p["u_star"], p["u0"], p["u_idle"]) == (
            inst.attempt, inst.params_hash, inst.u_star, inst.u0, inst.u_idle)
        assert p["params_hash"] not in {sample_instance(p["family"], s).params_hash for s in heldout}
        assert p["admission"]["admitted"] and len(p["admission"]["replays"]) == 6
        assert p["family_draws"] == {"drawn": 2, "kept": 2, "heldout_collisions": 0, "rejected": {}}
    assert [e.provenance["draw"] for e in entries] == [0, 1, 0, 1]
    again = MechanismSource(config, pool).entries()
    assert [(e.origin, e.code) for e in again] == [(e.origin, e.code) for e in entries]  # a pure function of the seed
    moved = MechanismSource(config_with(POOL, {"baseline": {"mechanism_instances": 2}}), pool).entries()
    assert {e.origin for e in moved}.isdisjoint({e.origin for e in entries})  # pool_seed_offset moves the seeds


def test_mechanism_source_skips_heldout_and_rejected_instances(pool, monkeypatch):
    config = config_with(POOL, {"baseline": {"mechanism_families": ["lp"], "mechanism_instances": 1}})
    source = MechanismSource(config, pool)
    # draw 0 lands on an evaluated seed (10_001 of eval.heldout_mechanisms): skipped, draw 1 is kept
    monkeypatch.setattr(source, "pool_seed", lambda family, index: 10_001 if index == 0 else 500 + index)
    (entry,) = source.entries()
    assert (entry.provenance["seed"], entry.provenance["draw"]) == (501, 1)
    assert entry.provenance["family_draws"] == {"drawn": 2, "kept": 1, "heldout_collisions": 1, "rejected": {}}

    # the first rendering has a wrong u0, so C2 rejects it; the next seed is admitted
    real_render, calls = mechanisms.render, []

    def tampered(instance, presentation="agentic"):
        calls.append(instance.seed)
        code = real_render(instance, presentation)
        if len(calls) == 1:
            code = re.sub(r"^U_ZERO = .*$", f"U_ZERO = {instance.u0 - 1!r}", code, count=1, flags=re.MULTILINE)
        return code

    monkeypatch.setattr(mechanisms, "render", tampered)
    source = MechanismSource(config, pool)
    monkeypatch.setattr(source, "pool_seed", lambda family, index: 600 + index)
    (entry,) = source.entries()
    assert entry.provenance["seed"] == 601
    assert source.stats["lp"] == {"drawn": 2, "kept": 1, "heldout_collisions": 0,
                                  "rejected": {"c2_default_out_of_region": 1}}
    # without admission the broken rendering is kept
    calls.clear()
    loose = MechanismSource(config_with(POOL, {"baseline": {"mechanism_families": ["lp"], "mechanism_instances": 1,
                                                            "mechanism_admission": False}}), pool)
    monkeypatch.setattr(loose, "pool_seed", lambda family, index: 600 + index)
    (kept,) = loose.entries()
    assert kept.provenance["seed"] == 600 and kept.provenance["admission"] is None
    # every rendering broken: the family fails after 4 draws per wanted instance, naming the reason
    monkeypatch.setattr(mechanisms, "render", lambda inst, presentation="agentic": real_render(inst, presentation)
                        .replace("score = min(1.0", "score = 1 / 0 + min(1.0"))
    with pytest.raises(RuntimeError, match=r"family 'lp' kept 0 of 1 .* after 4 pool seeds.*c1_exception"):
        MechanismSource(config, pool).entries()


def test_fixed_pool_of_mechanisms_trains_the_agent_only(pool, tiny_model):
    _, tokenizer = tiny_model
    config = config_with(POOL)
    backend = ScriptedBackend(tokenizer, lambda text, seed: "\\boxed{finish}")
    core = SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None)
    samples, metrics, closed = core.rollout(0)
    envs = core._envs()
    assert metrics["env_source"] == "fixed_pool" and metrics["design_attempts"] == 0 and metrics["slots"] == 2
    assert {e.source.rsplit(":", 2)[0] for e in envs} == {"mechanism:lp", "mechanism:facility"}
    assert {e.class_name for e in envs} == {"LpMechanism", "FacilityMechanism"} and all(e.valid for e in envs)
    assert {e.skill for e in envs} == {"mathematical_reasoning", "spatial_reasoning"}
    for env in envs:  # the archive keeps the instance's provenance beside the validation report
        entry = env.reports[0]["pool_entry"]
        assert env.source == f"mechanism:{entry['family']}:{entry['seed']}:{entry['params_hash']}"
        assert env.reports[0]["valid"] and entry["admission"]["admitted"]
    # 'finish' commits nothing: idle utility <= u0, so every episode scores 0
    assert metrics["agent_mean_return"] == 0.0 and metrics["episodes"] == 4
    assert all(s.role == "agent" for s in samples)
