"""Issue 14 items 2, 3, 4 and 7: the batch structure of one rollout as the reference code takes it, the final
set's flush, the plateau input, the memory's win rate and dropped plays. Hand-computed expectations.

Reference behaviour (authors' code, read for this): ceil(global_batch / valid environments) no-hint plays per
environment and step (192 / 24 = 8), G = 16 hinted plays at the regeneration step; one optimizer step of
global_batch samples, designer samples first, the surplus agent samples cut from the tail; designer weight
min(agent samples / designer samples * k, 50); the last set flushed at the final rollout.
"""

from __future__ import annotations

import pytest

from scripted_backend import RoleBackend
from spade.core.agent import EpisodeRecord
from spade.config import load_config
from spade.core.selfplay import Sample, SelfPlay
from spade.core.slots import EnvSlot


def _core(pool, tokenizer, overrides: dict, backend=None) -> SelfPlay:
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator

    config = load_config(overrides={"model_card": "tiny-random", **overrides})
    design = "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
    backend = backend or RoleBackend(tokenizer, design)
    return SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None)


def _record(env_id: str, seed: int, ret: float, outcome: str = "terminated") -> EpisodeRecord:
    return EpisodeRecord(env_id, seed, "no_hint", turns=1, generated_tokens=2, rewards=[ret], final_return=ret,
                         won=ret >= 1.0 - 1e-6, outcome=outcome, token_ids=[1, 2, 3], loss_mask=[0, 1, 1],
                         rollout_logprobs=[0.0, -0.5, -0.5])


@pytest.mark.slow
def test_paper_games_recipe_one_rollout_is_one_global_batch(pool, tiny_model):
    """The paper games recipe (24 slots, G 16, global batch 192, k 4) with a scripted model, 8 steps: every
    rollout is exactly 192 samples; at a step that trains designer samples they come first, weigh
    min(192 / 24 * 4, 50) = 32, and 24 agent samples (the last 3 environments x 8 plays) are cut; the set
    designed at step 4 is flushed at the final step 7, so its designer samples train there."""
    from spade.train.trainer import LocalTrainer

    model, tokenizer = tiny_model
    core = _core(pool, tokenizer, {"selfplay": {"total_steps": 8}, "agent": {"max_turns": 1},
                                   "corpus": {"enabled": False}, "train": {"micro_batch": 32}})
    assert (core.config.train.global_batch, core.config.selfplay.group_size) == (192, 16)
    trainer = LocalTrainer(core.config, model, tokenizer.pad_token_id or 0)
    for step in range(8):
        samples, metrics, closed = core.rollout(step)
        if step in (0, 7):  # the local trainer takes exactly one optimizer step for the rollout
            assert trainer.update(samples)["optimizer_steps"] == 1
        roles = [s.role for s in samples]
        assert len(samples) == 192, step
        assert metrics["no_hint_plays"] == 8 and metrics["episodes"] == 24 * 8
        if step in (4, 7):  # set 0 closes at the regeneration step 4; set 4 is flushed at the last step
            assert roles == ["designer"] * 24 + ["agent"] * 168
            assert {s.weight for s in samples if s.role == "designer"} == {32.0}
            assert metrics["designer_weight"] == 32.0 and metrics["trimmed_agent_samples"] == 24
            assert {row["step"] for row in closed} == {0 if step == 4 else 4} and len(closed) == 24
        else:
            assert roles == ["agent"] * 192 and metrics["trimmed_agent_samples"] == 0 and closed == []
        if step in (0, 4):  # the hint arm plays G = 16 per environment at the regeneration step
            assert all(len(e.hint_returns) == 16 and len(e.paired_returns) == 8 for e in core._envs())
    assert metrics["final_set_closed"] is True
    assert {r.env_id for r in core.memory.records if r.step == 4} == {e.env_id for e in core._envs()}


def test_one_rollout_trains_in_one_optimizer_step(tiny_model):
    """The local trainer takes one optimizer step for a rollout of global_batch samples ('global_batch')."""
    from spade.train.trainer import LocalTrainer

    model, tokenizer = tiny_model
    config = load_config(overrides={"model_card": "tiny-random", "train": {"global_batch": 6, "micro_batch": 4}})
    samples = [Sample("designer", [1, 2, 3, 4], [0, 1, 1, 1], [0.0, -1.0, -1.0, -1.0], 0.5, 32.0, True)] + [
        Sample("agent", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], a) for a in (1.0, -1.0, 0.5, -0.5, 0.0)]
    stats = LocalTrainer(config, model, tokenizer.pad_token_id or 0).update(samples)
    assert stats["optimizer_steps"] == 1 and stats["tokens"] == 3 + 5 * 2


def test_plays_per_environment_follow_the_valid_count(pool, tiny_model):
    """m = ceil(global_batch / valid environments): 192 / 24 = 8, 192 / 20 = 10 (reference); 'groups': G."""
    _, tokenizer = tiny_model
    core = _core(pool, tokenizer, {})
    slots = [EnvSlot(f"e{i}", "logical_deduction", 0, "designer", valid=i < 20) for i in range(24)]
    assert core.no_hint_plays(slots) == 10
    assert core.no_hint_plays([replace_valid(s) for s in slots]) == 8
    assert core.no_hint_plays([EnvSlot("x", "logical_deduction", 0, "designer")]) == 0
    groups = _core(pool, tokenizer, {"selfplay": {"batch_structure": "groups"}})
    assert groups.no_hint_plays(slots) == 16


def replace_valid(slot: EnvSlot) -> EnvSlot:
    from dataclasses import replace

    return replace(slot, valid=True)


def test_designer_weight_games_32_tool_use_capped_at_50(pool, tiny_model):
    """min(192 / 24 * 4, 50) = 32 (games); min(192 / 24 * 8, 50) = 50 (tool use, k 8); with 12 designer samples
    min(192 / 12 * 4, 50) = 50; 'groups' keeps min(G * k, 50) = 50 for games."""
    _, tokenizer = tiny_model
    slots = [EnvSlot(f"e{i}", "logical_deduction", 0, "designer", valid=True) for i in range(24)]

    def designer(n):
        return [Sample("designer", [1, 2], [0, 1], [0.0, -1.0], 0.1, 50.0, True) for _ in range(n)]

    games = _core(pool, tokenizer, {})
    assert games.weigh_designer(designer(24), slots) == 32.0
    assert games.weigh_designer(designer(12), slots) == 50.0
    tool_use = _core(pool, tokenizer, {"recipe": "tool_use"})
    assert tool_use.config.selfplay.regen_interval == 8 and tool_use.weigh_designer(designer(24), slots) == 50.0
    groups = _core(pool, tokenizer, {"selfplay": {"batch_structure": "groups"}})
    kept = designer(24)
    assert groups.weigh_designer(kept, slots) == 50.0 and kept[0].weight == 50.0  # left as close_set set it
    assert games.weigh_designer(designer(24), slots, returned=96) == 16.0  # 96 plays came back: 96 / 24 * 4


@pytest.mark.parametrize("count, weight", [("returned", 3.0), ("planned", 4.0)])
def test_designer_weight_counts_the_plays_that_came_back(pool, tiny_model, monkeypatch, count, weight):
    """train.designer_upweight_count 'returned' (reference): the step's up-weight counts the no-hint plays that came
    back (an environment failure is dropped): 2 slots x 4 plays, 2 failed -> min(6 / 4 designer samples x k 2, 50)
    = 3; 'planned' counts the 8 plays planned when the step began -> 4."""
    _, tokenizer = tiny_model
    core = _core(pool, tokenizer, {"selfplay": {"regen_interval": 2, "total_steps": 8},
                                   "train": {"global_batch": 8, "designer_upweight_count": count}})
    slots = [EnvSlot(f"e{i}", "logical_deduction", 0, "designer", valid=True) for i in range(2)]
    matured = [Sample("designer", [1, 2], [0, 1], [0.0, -1.0], 0.1, 1.0, True) for _ in range(4)]
    def begin_step(step):  # a regeneration step's matured designer samples, weighed as the real one weighs them
        core.weigh_designer(matured, slots)
        return slots, matured, [], {"step": step}

    monkeypatch.setattr(core, "begin_step", begin_step)
    monkeypatch.setattr(core, "end_step", lambda *args: None)
    outcomes = ["terminated", "env_failure", "terminated", "terminated"]
    monkeypatch.setattr(core, "play", lambda chosen, step, arm, n: {
        s.env_id: [_record(s.env_id, g, float(g % 2), outcome=outcomes[g] if s.env_id == "e0" else
                           ("env_failure" if g == 3 else "terminated")) for g in range(n)] for s in chosen})
    samples, _, _ = core.rollout(2)
    assert core.no_hint_plays(slots) == 4 and [s.role for s in samples].count("agent") == 4  # 8 - 4 designer
    assert {s.weight for s in samples if s.role == "designer"} == {weight}


def test_assemble_puts_designer_first_and_cuts_the_agent_tail(pool, tiny_model):
    _, tokenizer = tiny_model
    core = _core(pool, tokenizer, {"train": {"global_batch": 5}})
    designer = [Sample("designer", [1], [1], [0.0], 0.0) for _ in range(2)]
    agent = [Sample("agent", [1], [1], [0.0], float(i)) for i in range(6)]
    samples, metrics = core.assemble(designer, agent)
    assert [s.role for s in samples] == ["designer", "designer", "agent", "agent", "agent"]
    assert [s.advantage for s in samples[2:]] == [0.0, 1.0, 2.0] and metrics["trimmed_agent_samples"] == 3
    groups = _core(pool, tokenizer, {"train": {"global_batch": 5}, "selfplay": {"batch_structure": "groups"}})
    samples, metrics = groups.assemble(designer, agent)
    assert len(samples) == 8 and samples[-1].role == "designer" and metrics["trimmed_agent_samples"] == 0


def test_paired_regret_uses_the_seeds_both_arms_played(pool, tiny_model):
    """G = 4 hinted plays on seeds 10..13, m = 2 no-hint plays on seeds 10, 11: paired regret =
    mean((1 - 0), (0.5 - 0.5)) = 0.5; unpaired (reference) = mean(1, .5, 1, 1) - mean(0, .5) = 0.875 - 0.25."""
    _, tokenizer = tiny_model
    slot = EnvSlot("e", "logical_deduction", 0, "designer", valid=True, hint_returns=[1.0, 0.5, 1.0, 1.0],
                   hint_seeds=[10, 11, 12, 13])
    core = _core(pool, tokenizer, {})
    core.record_play(slot, [_record("e", 10, 0.0), _record("e", 11, 0.5)], 0)
    assert slot.regret == pytest.approx(0.5)
    unpaired = _core(pool, tokenizer, {"agent": {"paired_arms": False}})
    other = EnvSlot("e", "logical_deduction", 0, "designer", valid=True, hint_returns=[1.0, 0.5, 1.0, 1.0])
    unpaired.record_play(other, [_record("e", 20, 0.0), _record("e", 21, 0.5)], 0)
    assert other.regret == pytest.approx(0.625)


def test_same_problem_gives_each_group_one_reset_seed_per_step(pool, tiny_model):
    """selfplay.same_problem: every play of one slot at one step, either arm, resets with one seed; another step or
    another slot gets another; off (reference), a play resets with its own episode seed (reset_seed None)."""
    _, tokenizer = tiny_model
    slots = [EnvSlot(name, "logical_deduction", 0, "designer", valid=True, code="x", class_name="X")
             for name in ("e0", "e1")]
    core = _core(pool, tokenizer, {"selfplay": {"same_problem": True}})

    def problems(slot, step):
        return {core.job(slot, seed, arm, step).reset_seed for arm in ("no_hint", "hint")
                for seed in core.episode_seeds(step, slot, arm, 4)}

    assert len(problems(slots[0], 2)) == len(problems(slots[1], 2)) == 1
    assert len(problems(slots[0], 2) | problems(slots[1], 2) | problems(slots[0], 3)) == 3
    off = _core(pool, tokenizer, {})
    assert {off.job(slots[0], seed, "no_hint", 2).reset_seed for seed in off.episode_seeds(2, slots[0], "no_hint")} \
        == {None}


def test_failed_plays_are_dropped_from_the_group(pool, tiny_model):
    """Returns 1, 0 and a failure: 'drop' z-scores (1, 0) -> (+1, -1) and books 2 plays; 'zero' z-scores
    (1, 0, 0): mean 1/3, std sqrt(2)/3 -> (sqrt 2, -1/sqrt 2, -1/sqrt 2)."""
    _, tokenizer = tiny_model
    records = [_record("e", 1, 1.0), _record("e", 2, 0.0), _record("e", 3, 0.0, outcome="env_failure")]
    core = _core(pool, tokenizer, {})
    slot = EnvSlot("e", "logical_deduction", 5, "designer", valid=True)
    advantages = core.record_play(slot, records, 6)
    assert advantages[:2] == [pytest.approx(1.0), pytest.approx(-1.0)] and advantages[2] is None
    assert (slot.episodes, slot.wins, slot.dropped) == (2, 1, 1)
    metrics = core._play_metrics([slot], records, [])
    assert metrics["dropped_plays"] == 1 and metrics["env_failures"] == 1 and metrics["agent_win_rate"] == 0.5
    zero = _core(pool, tokenizer, {"agent": {"failed_plays": "zero"}})
    slot = EnvSlot("e", "logical_deduction", 5, "designer", valid=True)
    assert zero.record_play(slot, records, 6) == [pytest.approx(2 ** 0.5), pytest.approx(-(2 ** -0.5)),
                                                   pytest.approx(-(2 ** -0.5))]
    assert (slot.episodes, slot.dropped) == (3, 0)


def test_plateau_reads_the_mean_return_and_memory_the_positive_share(pool, tiny_model):
    """Partial rewards: 8 plays of return 0.5 over the window, none a full win, regret 0.
    plateau_input mean_return: plateau(0.5) = 1 -> reward 0.6; win_rate: plateau(0) = 0 (0.4 below the band,
    beyond the 0.25 ramp) -> reward 0. Memory: 4 regeneration-step plays, 3 with return > 0 -> 0.75 ('regen_positive');
    'window_win': 0 full wins of 8 -> 0.0."""
    _, tokenizer = tiny_model
    sample = {"token_ids": [5, 6], "loss_mask": [0, 1], "rollout_logprobs": [0.0, -1.0]}

    def slot():
        return EnvSlot("p", "logical_deduction", 0, "designer", code="x", valid=True, wins=0, episodes=8,
                       return_sum=4.0, regen_positive=3, regen_episodes=4, regret=0.0, designer_sample=sample)

    reference = _core(pool, tokenizer, {})
    closed = slot()
    reference.close_set([closed])
    assert closed.designer_reward == pytest.approx(0.6)
    assert reference.memory.records[-1].win_rate == pytest.approx(0.75)
    previous = _core(pool, tokenizer, {"reward": {"plateau_input": "win_rate"}, "memory": {"win_rate": "window_win"}})
    closed = slot()
    previous.close_set([closed])
    assert closed.designer_reward == pytest.approx(0.0)
    assert previous.memory.records[-1].win_rate == 0.0


def test_tool_use_keeps_table_5_and_the_scripts_values_are_one_switch_away():
    """Item 9: the reference's tool-use scripts use KL 0.005 on every backbone and all 6 skills per regeneration;
    Table 5 says KL 0 (0.005 for Qwen3-8B) and 3 of 6 skills, and is explicit, so it stays the default."""
    from spade.config import CONFIG_DIR

    for size, kl in (("4b", 0.0), ("8b", 0.005), ("30b", 0.0)):
        config = load_config(CONFIG_DIR / "paper" / f"spade_tool_use_{size}.yaml")
        assert (config.train.kl_coef, config.selfplay.active_skills, len(config.selfplay.skills)) == (kl, 3, 6), size
        assert config.selfplay.regen_interval == 8 and config.designer.hint_max_new_tokens == 2048, size
    scripts = load_config(CONFIG_DIR / "paper" / "spade_tool_use_30b.yaml",
                          overrides={"train": {"kl_coef": 0.005}, "selfplay": {"active_skills": 6}})
    assert (scripts.train.kl_coef, scripts.selfplay.active_skills) == (0.005, 6)


def test_regret_window_is_the_reference_4b_tool_use_reward(pool, tiny_model):
    """designer.reward 'regret_window' (reference regret_based, delayed_env_rewards.py:304-366): max(0, hinted mean -
    the window's mean no-hint return), centred per skill, no plateau. a: 0.75 - 2/8 = 0.5; b: 0 - 4/8 < 0 -> 0;
    advantages +0.25, -0.25. The blend ('regret', regret 0) pays the plateau instead: a 0.6 x plateau(0.25) = 0.24,
    b 0.6 x plateau(0.5) = 0.6. The tool-use 4B paper run uses it, with its script's 500 steps and log-prob T 0.7."""
    from spade.config import CONFIG_DIR

    _, tokenizer = tiny_model
    sample = {"token_ids": [5, 6], "loss_mask": [0, 1], "rollout_logprobs": [0.0, -1.0]}

    def slots():
        return [EnvSlot("a", "optimization", 0, "designer", code="x", valid=True, episodes=8, return_sum=2.0,
                        hint_returns=[1.0, 1.0, 1.0, 0.0], regret=0.0, designer_sample=dict(sample)),
                EnvSlot("b", "optimization", 0, "designer", code="x", valid=True, episodes=8, return_sum=4.0,
                        hint_returns=[0.0, 0.0], regret=0.0, designer_sample=dict(sample))]

    window = slots()
    samples = _core(pool, tokenizer, {"designer": {"reward": "regret_window"}}).close_set(window)
    assert [s.designer_reward for s in window] == [pytest.approx(0.5), 0.0]
    assert [s.advantage for s in samples] == [pytest.approx(0.25), pytest.approx(-0.25)]
    blend = slots()
    _core(pool, tokenizer, {}).close_set(blend)
    assert [s.designer_reward for s in blend] == [pytest.approx(0.24), pytest.approx(0.6)]
    four = load_config(CONFIG_DIR / "paper" / "spade_tool_use_4b.yaml")
    assert (four.designer.reward, four.selfplay.total_steps, four.train.logprob_temperature) == ("regret_window", 500,
                                                                                                 0.7)


def test_designer_samples_carry_their_advantage_group_and_pending_groups_count_them(pool, tiny_model):
    """close_set labels each designer sample 'set<design step>:<skill>' and centres its advantage on the skill's mean,
    so a group's advantages sum to 0 (what the OpenRLHF packs rely on). Regret 0, reward 0.6 x plateau(mean return):
    4/8 -> plateau(0.5) = 1 -> 0.6; 8/8 -> plateau(1.0) = max(0, 1 - 0.4 / 0.25) = 0 -> 0; 2/8 -> plateau(0.25) =
    1 - 0.15 / 0.25 = 0.4 -> 0.24. logical_deduction: 0.6, 0 (mean 0.3) -> +0.3, -0.3; optimization: 0.24 alone -> 0.
    pending_designer_groups counts the same groups before the set closes: valid designer slots per skill (an invalid
    candidate and a backfilled slot give no sample), plus penalised invalid candidates when they train."""
    _, tokenizer = tiny_model
    sample = {"token_ids": [5, 6], "loss_mask": [0, 1], "rollout_logprobs": [0.0, -1.0]}

    def slots():
        def slot(env_id, skill, returns, source="designer", valid=True):
            return EnvSlot(env_id, skill, 4, source, code="x", valid=valid, episodes=8, return_sum=returns, regret=0.0,
                           regen_episodes=4, regen_positive=2, designer_sample=dict(sample) if valid else None)

        return [slot("a", "logical_deduction", 4.0), slot("b", "logical_deduction", 8.0), slot("c", "optimization", 2.0),
                slot("d", "logical_deduction", 0.0, valid=False), slot("e", "optimization", 4.0, source="backfill:knapsack_selection")]

    core = _core(pool, tokenizer, {})
    assert core.pending_designer_groups(slots()) == [2, 1]  # logical_deduction 2 (a, b), optimization 1 (c)
    designer = core.close_set(slots())
    assert [(s.group, s.role) for s in designer] == [("set4:logical_deduction", "designer")] * 2 + [("set4:optimization", "designer")]
    assert [s.advantage for s in designer] == [pytest.approx(0.3), pytest.approx(-0.3), pytest.approx(0.0)]
    invalid = [{**sample, "skill": "logical_deduction"}, {**sample, "skill": "spatial_reasoning"}]
    core.state.invalid_samples = invalid  # discarded: no sample, no group
    assert core.pending_designer_groups(slots()) == [2, 1]
    penalised = _core(pool, tokenizer, {"designer": {"invalid": "penalty"}})
    penalised.state.invalid_samples = invalid  # each trains with the penalty -1 in its skill's group
    assert penalised.pending_designer_groups(slots()) == [3, 1, 1]
    assert [s.group for s in penalised.close_set(slots())] == ["set4:logical_deduction"] * 2 + ["set4:optimization"] + [
        "set4:logical_deduction", "set4:spatial_reasoning"]
    assert _core(pool, tokenizer, {"selfplay": {"train_designer": False}}).pending_designer_groups(slots()) == []


@pytest.mark.parametrize("aggregation", ["seq_mean_token_mean", "token_mean"])
def test_the_step_loss_does_not_depend_on_micro_batches(tiny_model, aggregation):
    """train.loss_aggregation over a whole optimizer step: micro batches of 1 or of the whole step give the same loss
    and weights (each micro batch's mean weighted by its share of the step's samples or tokens); on uneven lengths the
    two aggregations differ."""
    import copy

    from spade.train.trainer import LocalTrainer

    model, tokenizer = tiny_model
    samples = [Sample("agent", [1, 2, 3, 4, 5, 6, 7], [0, 1, 1, 1, 1, 1, 1], [0.0] + [-1.0] * 6, 1.0),
               Sample("agent", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], -1.0),
               Sample("agent", [1, 4], [0, 1], [0.0, -1.0], 0.5),
               Sample("agent", [1, 5, 6], [0, 1, 1], [0.0, -1.0, -1.0], 0.0)]  # advantage 0: skipped, still counted
    results = {}
    for micro in (1, 4):
        config = load_config(overrides={"model_card": "tiny-random", "train": {
            "global_batch": 4, "micro_batch": micro, "learning_rate": 1e-2, "loss_aggregation": aggregation}})
        stats = LocalTrainer(config, copy.deepcopy(model), tokenizer.pad_token_id or 0).update(samples)
        results[micro] = (stats["loss"], stats["grad_norm"])  # the norm of the step's summed gradient, before Adam
    assert results[1][0] == pytest.approx(results[4][0], rel=1e-5, abs=1e-7)
    assert results[1][1] == pytest.approx(results[4][1], rel=1e-4)
    other = "token_mean" if aggregation == "seq_mean_token_mean" else "seq_mean_token_mean"
    config = load_config(overrides={"model_card": "tiny-random", "train": {
        "global_batch": 4, "micro_batch": 4, "learning_rate": 1e-2, "loss_aggregation": other}})
    other_loss = LocalTrainer(config, copy.deepcopy(model), tokenizer.pad_token_id or 0).update(samples)["loss"]
    assert abs(other_loss - results[4][0]) > 1e-4
