"""The local trainer: learning on a trivially learnable environment, and exact resume."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spade.core.agent import AgentConfig, EpisodeJob, EpisodeRunner
from spade.config import load_config
from spade.configtools import ConfigError
from spade.inference.generation_hf import HFBackend
from spade.inference.models import load_model
from spade.core.selfplay import Sample, derive_seed
from spade.train.trainer import LocalTrainer, train_run
from scripted_backend import RoleBackend

LETTERS = '''
class Letters:
    """Reward = share of the letter 'a' among the first 12 characters of the answer."""

    def __init__(self, max_turns=1, **kwargs):
        self.reset()

    def reset(self, seed=None):
        return "Write some letters.", {}

    def step(self, action):
        text = action[:12]
        return "done", sum(c == "a" for c in text) / 12, True, False, {}

    def solution(self):
        return "a" * 12
'''


def test_grpo_raises_reward_on_a_learnable_environment(pool, tiny_model_dir):
    model, tokenizer = load_model(tiny_model_dir)
    config = load_config(overrides={"model_card": "tiny-random", "train": {"learning_rate": 3e-3, "global_batch": 16,
                                                                            "micro_batch": 16}})
    trainer = LocalTrainer(config, model, tokenizer.eos_token_id)
    runner = EpisodeRunner(HFBackend(model, tokenizer), pool,
                           AgentConfig(max_turns=1, max_new_tokens=6, temperature=1.0, cut_turns="continue"),
                           {"game": "Answer."})  # the replies are cut at 6 tokens: Letters scores them
    means = []
    for step in range(30):
        jobs = [EpisodeJob("letters", LETTERS, "Letters", "game", g) for g in range(16)]
        records = runner.run(jobs, seed=derive_seed(0, "learn", step))
        returns = [r.final_return for r in records]
        mean = sum(returns) / len(returns)
        std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
        samples = [Sample("agent", r.token_ids, r.loss_mask, r.rollout_logprobs, (r.final_return - mean) / (std + 1e-8))
                   for r in records]
        trainer.update(samples)
        means.append(mean)
    early, late = sum(means[:5]) / 5, sum(means[-5:]) / 5
    assert late > early + 0.08 and late > 2 * early, means


TINY_RUN = {
    "model_card": "tiny-random",
    "run_name": "tiny",
    "selfplay": {"active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "total_steps": 4,
                 "checkpoint_every": 2, "design_attempts": 1, "backfill": True},
    "designer": {"max_new_tokens": 8, "hint_max_new_tokens": 4},
    "agent": {"max_new_tokens": 6, "max_turns": 2, "max_context_tokens": 8192},
    "corpus": {"enabled": False},
    "memory": {"enabled": False},
    "train": {"learning_rate": 1e-3, "global_batch": 8, "micro_batch": 4},
    "eval": {"heldout_library": {"environments": ["crt_residue_puzzle"], "episodes": 2}},
}


def untimed(record: dict) -> dict:
    """A metrics line without its timings (spade.core.phases: they differ between identical runs; token counts do not)."""
    return {k: v for k, v in record.items() if not k.endswith(("_seconds", "_tokens_per_s"))}


@pytest.mark.slow
def test_resume_gives_the_same_metrics(tiny_model_dir, tmp_path):
    config = load_config(overrides=TINY_RUN)
    train_run(config, tiny_model_dir, None, tmp_path / "straight")
    assert train_run(config, tiny_model_dir, None, tmp_path / "resumed", stop_after=2) == {"stopped_at": 2}
    train_run(config, tiny_model_dir, None, tmp_path / "resumed")  # picks up from checkpoints/step_000002
    straight = [json.loads(line) for line in (tmp_path / "straight/metrics.jsonl").read_text().splitlines()]
    resumed = [json.loads(line) for line in (tmp_path / "resumed/metrics.jsonl").read_text().splitlines()]
    assert len(straight) == 4 and [untimed(r) for r in straight] == [untimed(r) for r in resumed]
    assert all(r["step_seconds"] > 0 and r["phase_no_hint_arm_decode_tokens"] > 0 for r in straight)  # spade.core.phases
    assert "phase_checkpoint_seconds" in straight[1] and "phase_checkpoint_seconds" not in straight[0]
    first = straight[0]
    assert first["regenerated"] and first["backfilled_share"] == 1.0 and first["design_attempts"] == 2
    rejected = list((tmp_path / "straight/rejected").glob("*/report.json"))  # the tiny designer writes no code
    assert rejected and all(json.loads(p.read_text())["valid"] is False for p in rejected)
    sets = sorted(p.name for p in (tmp_path / "straight/envs").glob("set_*.json"))
    assert sets == ["set_00000.json", "set_00002.json"]


def test_a_run_folder_of_another_config_is_started_over(tiny_model_dir, tmp_path):
    """Snakemake reruns a train job whose config changed in the same run folder: its checkpoints are not resumed
    (they were, before: the learning check once went on from the old 80-step run's weights and environment set)."""
    config = load_config(overrides=TINY_RUN)
    assert train_run(config, tiny_model_dir, None, tmp_path / "run", stop_after=2) == {"stopped_at": 2}
    assert (tmp_path / "run/checkpoints/step_000002").is_dir()
    base_eval = tmp_path / "run/eval/heldout_library/step_000000.json"  # another job's result, of the base model
    base_eval.parent.mkdir(parents=True)
    base_eval.write_text("{}")
    changed = load_config(overrides={**TINY_RUN, "train": {**TINY_RUN["train"], "learning_rate": 2e-3}})
    assert train_run(changed, tiny_model_dir, None, tmp_path / "run", stop_after=1) == {"stopped_at": 1}
    lines = (tmp_path / "run/metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0]  # resumed, it would have run step 2 after steps 0, 1
    assert not (tmp_path / "run/checkpoints/step_000002").exists() and base_eval.is_file()


def test_the_resume_key(tiny_model_dir, tmp_path):
    """A checkpoint resumes under the same config with more steps, not under another config or base model."""
    from spade.inference.models import TINY_RANDOM, prepare_model
    from spade.train.trainer import resume_key

    config = load_config(overrides=TINY_RUN)
    longer = load_config(overrides={**TINY_RUN, "selfplay": {**TINY_RUN["selfplay"], "total_steps": 8}})
    changed = load_config(overrides={**TINY_RUN, "agent": {**TINY_RUN["agent"], "temperature": 0.7}})
    assert resume_key(config, tiny_model_dir) == resume_key(longer, tiny_model_dir)
    assert resume_key(config, tiny_model_dir) != resume_key(changed, tiny_model_dir)
    other = prepare_model(dataclasses.replace(TINY_RANDOM, seed=1), tmp_path / "other")
    assert resume_key(config, tiny_model_dir)["base_weights_sha256"] != resume_key(config, other)["base_weights_sha256"]


def test_closing_a_set_rewards_the_designer(pool, tiny_model):
    """Hand-computed: designer reward = 0.4 * floored regret + 0.6 * plateau(window mean return), on 0/1 returns
    (where the mean return is the win rate)."""
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.validate import Validator
    from spade.core.selfplay import SelfPlay
    from spade.core.slots import EnvSlot

    model, tokenizer = tiny_model
    config = load_config(overrides={"model_card": "tiny-random", "selfplay": {"group_size": 4, "regen_interval": 2}})
    memory = EnvironmentMemory(config.memory)
    core = SelfPlay(config, HFBackend(model, tokenizer), Validator(pool), memory, None)
    sample = {"token_ids": [5, 6, 7], "loss_mask": [0, 1, 1], "rollout_logprobs": [0.0, -1.0, -2.0]}
    # A: win rate 4/8 = 0.5 (inside the band -> plateau 1), regret 0.15 (-> 1): reward 0.4 + 0.6 = 1.0
    # B: win rate 8/8 = 1.0 (0.4 above the band, beyond the 0.25 ramp -> 0), regret 0: reward 0.0
    a = EnvSlot("a", "logical_deduction", 0, "designer", code="x", valid=True, wins=4, episodes=8, regret=0.15,
                return_sum=4.0, designer_sample=sample)
    b = EnvSlot("b", "logical_deduction", 0, "designer", code="y", valid=True, wins=8, episodes=8, regret=0.0,
                return_sum=8.0, designer_sample=sample)
    backfilled = EnvSlot("c", "logical_deduction", 0, "backfill:knapsack_selection", code="z", valid=True,
                         wins=0, episodes=8)
    samples = core.close_set([a, b, backfilled])
    assert (a.designer_reward, b.designer_reward) == (pytest.approx(1.0), pytest.approx(0.0))
    assert [s.advantage for s in samples] == [pytest.approx(0.5), pytest.approx(-0.5)]  # mean-centred per skill
    # close_set's own weight is the 'groups' one: min(N_RA / N_envs * k, 50) with N_RA = 3 envs * G 4 = 12,
    # N_envs 3, k 2 -> 8 ('global_batch' re-weighs once the step's plays are known: tests/test_batch_structure.py)
    assert all(s.weight == pytest.approx(8.0) and s.delayed and s.role == "designer" for s in samples)
    assert {r.env_id for r in memory.records} == {"a", "b"}  # backfilled environments are not the designer's


def test_designer_path_valid_environments_hints_and_regret(pool, tiny_model):
    """The paper-scale path: the designer's own valid environments fill the set (no backfill)."""
    from spade.designer.memory import EnvironmentMemory
    from spade.envs.library.registry import get_env
    from spade.envs.validate import Validator
    from spade.core.selfplay import SelfPlay

    _, tokenizer = tiny_model
    design = "Here it is:\n```python\n" + get_env("knapsack_selection").source() + "```\n"
    config = load_config(overrides={"model_card": "tiny-random", "selfplay": {
        "active_skills": 1, "envs_per_skill": 2, "group_size": 2, "regen_interval": 2, "backfill": False},
        "agent": {"max_turns": 2}, "corpus": {"enabled": False}, "train": {"global_batch": 4}})
    backend = RoleBackend(tokenizer, design)
    core = SelfPlay(config, backend, Validator(pool), EnvironmentMemory(config.memory), None)
    samples, metrics, closed = core.rollout(0)
    assert metrics["valid_env_rate"] == 1.0 and metrics["backfilled_share"] == 0.0 and metrics["slots"] == 2
    assert backend.roles()[:2] == ["design", "design"] and backend.roles()[2:4] == ["hint", "hint"]
    envs = core._envs()
    assert all(e.source == "designer" and e.hint == "Count carefully." for e in envs)
    assert all(e.regret == 0.0 and len(e.hint_returns) == 2 for e in envs)  # same answers with and without hint
    assert metrics["mean_regret"] == 0.0 and closed == []
    # 2 envs x m = global batch 4 / 2 envs = 2 plays, no hint-arm samples
    assert {s.role for s in samples} == {"agent"} and len(samples) == 4
    core.rollout(1)
    samples, metrics, closed = core.rollout(2)  # the first set closes: designer samples mature now
    designer = [s for s in samples if s.role == "designer"]
    assert len(designer) == 2 and all(s.delayed for s in designer) and [e["step"] for e in closed] == [0, 0]
    assert metrics["closed_set_step"] == 0 and metrics["closed_mean_designer_reward"] is not None


def test_resume_restores_a_metrics_line_the_checkpoint_kept(tiny_model_dir, tmp_path):
    """The process died after writing checkpoint step_000002 and before appending step 1's metrics line: the resumed
    run puts the line back from the checkpoint (without the checkpoint's own time) and goes on from step 2."""
    config = load_config(overrides=TINY_RUN)
    run_dir = tmp_path / "run"
    train_run(config, tiny_model_dir, None, run_dir, stop_after=2)
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n")  # step 1's line lost
    train_run(config, tiny_model_dir, None, run_dir)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    kept = {k: v for k, v in untimed(json.loads(lines[1])).items() if not k.startswith("phase_checkpoint_")}
    assert untimed(records[1]) == kept and "phase_checkpoint_seconds" not in records[1]


def test_zero_advantage_samples_skip_forward_and_backward_but_not_the_step(tiny_model_dir):
    """Without a KL term a sample of advantage 0 contributes exactly 0: skipping its forward and backward gives the
    update of a near-zero advantage (1e-30) kept in the batch; a step of only such samples still applies AdamW's
    weight decay on a zero gradient, w <- w (1 - lr wd), as the full backward did."""
    import torch

    config = load_config(overrides={**TINY_RUN, "train": {**TINY_RUN["train"], "weight_decay": 0.1}})

    def updated(advantages):
        model, _ = load_model(tiny_model_dir)
        trainer = LocalTrainer(config, model, pad_id=0)
        samples = [Sample("agent", [1, 5 + i, 9, 4 + i, 7], [0, 0, 1, 1, 1], [0.0, 0.0, -1.0, -1.5, -2.0], a)
                   for i, a in enumerate(advantages)]
        stats = trainer.update(samples)
        return {k: v.detach().clone() for k, v in model.state_dict().items()}, stats

    base, _ = load_model(tiny_model_dir)
    skipped, stats = updated([0.0, 1.0, 0.0, -1.0])
    kept, kept_stats = updated([1e-30, 1.0, 1e-30, -1.0])
    assert stats["skipped_zero_advantage"] == 2 and kept_stats["skipped_zero_advantage"] == 0
    assert stats["forward_tokens"] == 10 and kept_stats["forward_tokens"] == 20
    for name, value in skipped.items():  # Adam (lr 1e-3) turns float rounding of near-zero gradients into ~1e-6
        assert torch.allclose(value, kept[name], atol=1e-5), name
    assert max(float((skipped[n] - v).abs().max()) for n, v in base.state_dict().items()) > 5e-4  # the update moved
    idle, stats = updated([0.0, 0.0])
    decay = 1 - config.train.learning_rate * config.train.weight_decay
    assert stats["forward_tokens"] == 0 and stats["optimizer_steps"] == 1
    for name, value in base.state_dict().items():
        assert torch.allclose(idle[name], value * decay, atol=1e-7), name


def test_micro_batch_groups_split_by_length_by_hand():
    """A sample over twice its group's first length starts a new group; groups hold at most `size`."""
    from spade.train.trainer import micro_batch_groups

    assert micro_batch_groups([5, 6, 11, 12, 13, 30], 3) == [[0, 1], [2, 3, 4], [5]]
    assert micro_batch_groups([5, 6, 11, 12, 13, 30], 3, split_lengths=False) == [[0, 1, 2], [3, 4, 5]]
    assert [len(g) for g in micro_batch_groups([34] * 42 + [2839] * 12, 12)] == [12, 12, 12, 6, 12]


def test_micro_batch_groups_by_length_give_the_fixed_groups_update(tiny_model_dir):
    """The step's gradient is the sum over micro batches however they are cut: split by length (a design prompt's
    samples apart from the short agent samples) or in fixed groups, the update agrees to float rounding, and the
    split pads far less."""
    import torch

    config = load_config(overrides={**TINY_RUN, "train": {**TINY_RUN["train"], "micro_batch": 4}})
    prompt = list(range(5, 65))
    samples = [Sample("agent", [1, 5 + i, 9, 4 + i, 7], [0, 0, 1, 1, 1], [0.0, 0.0, -1.0, -1.5, -2.0],
                      1.0 if i % 2 else -1.0) for i in range(6)]
    samples += [Sample("designer", prompt + [10 + i], [0] * 60 + [1], [0.0] * 60 + [-2.0], 0.5 - 0.25 * i)
                for i in range(4)]
    updated = {}
    for split in (False, True):
        model, _ = load_model(tiny_model_dir)
        trainer = LocalTrainer(config, model, pad_id=0)
        trainer.split_lengths = split
        stats = trainer.update(samples)
        updated[split] = ({k: v.detach().clone() for k, v in model.state_dict().items()}, stats)
    (fixed, fixed_stats), (split, split_stats) = updated[False], updated[True]
    for name, value in fixed.items():
        assert torch.allclose(value, split[name], atol=1e-6), name
    assert fixed_stats["loss"] == pytest.approx(split_stats["loss"], abs=1e-6)
    assert split_stats["padded_tokens"] < fixed_stats["padded_tokens"]


@pytest.mark.parametrize("frozen", [[], ["embeddings"]])
def test_train_frozen_keeps_the_named_weights_fixed(tiny_model_dir, frozen):
    """train.frozen ['embeddings'] (the mechanism runs, issue 48): an update (weight decay on) leaves the input
    embeddings bit for bit and moves the rest; [] (every paper config) moves the embeddings too."""
    import torch

    config = load_config(overrides={**TINY_RUN, "train": {**TINY_RUN["train"], "weight_decay": 0.1, "frozen": frozen}})
    model, _ = load_model(tiny_model_dir)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    samples = [Sample("agent", [1, 5 + i, 9, 4 + i, 7], [0, 0, 1, 1, 1], [0.0, 0.0, -1.0, -1.5, -2.0], a)
               for i, a in enumerate([1.0, -1.0])]
    LocalTrainer(config, model, pad_id=0).update(samples)
    moved = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    embeddings = "model.embed_tokens.weight"
    assert (embeddings in moved) == (frozen == [])
    assert "lm_head.weight" in moved and "model.layers.0.self_attn.q_proj.weight" in moved


def test_train_frozen_refuses_an_unknown_entry():
    with pytest.raises(ConfigError, match=r"'train.frozen' has 'lm_head'; allowed entries: \['embeddings'\]"):
        load_config(overrides={"train": {"frozen": ["lm_head"]}})


@pytest.mark.parametrize("setting, expected", [(1.0, 1.0), (None, 0.6), (0.8, 0.8)])
def test_training_logprobs_are_taken_at_train_logprob_temperature(tiny_model_dir, setting, expected):
    """train.logprob_temperature: the reference samples at 0.6 and takes training log-probs at 1.0 (the default);
    null = the agent's sampling temperature. The trainer's log-probs are log_softmax(logits / T)."""
    import torch

    config = load_config(overrides={"model_card": "tiny-random", "agent": {"temperature": 0.6},
                                    "train": {"logprob_temperature": setting}})
    model, _ = load_model(tiny_model_dir)
    trainer = LocalTrainer(config, model, pad_id=0)
    ids = torch.tensor([[1, 5, 9, 4, 7]])
    with torch.no_grad():
        got = trainer._logprobs(model, ids, torch.ones_like(ids), torch.ones_like(ids))  # every token trained
        logits = model(input_ids=ids).logits[:, :-1].float()
        want = torch.log_softmax(logits / expected, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
    assert torch.allclose(got[:, 1:], want, atol=1e-5)
    assert got[0, 0] == 0


def test_logprob_temperature_must_be_positive():
    from spade.configtools import ConfigError

    with pytest.raises(ConfigError, match="train.logprob_temperature' must be > 0 or null.*got 0.0"):
        load_config(overrides={"train": {"logprob_temperature": 0}})


def test_masked_episodes_keep_their_place_in_the_step_but_train_nothing(tiny_model_dir):
    """agent.truncated_episodes 'mask' (the reference's compact filter): a sample whose loss mask is zeroed adds 0 to
    the loss and needs no forward pass, but still counts in the step's sequence mean, as a sample of advantage 0
    does; leaving it out of the step would make the others weigh 1/2 instead of 1/3."""
    import torch

    config = load_config(overrides=TINY_RUN)

    def updated(samples):
        model, _ = load_model(tiny_model_dir)
        stats = LocalTrainer(config, model, pad_id=0).update(samples)
        return {k: v.detach().clone() for k, v in model.state_dict().items()}, stats

    def sample(i, advantage, mask=(0, 0, 1, 1, 1)):
        return Sample("agent", [1, 5 + i, 9, 4 + i, 7], list(mask), [0.0, 0.0, -1.0, -1.5, -2.0], advantage)

    pair = [sample(0, 1.0), sample(1, -1.0)]
    masked, stats = updated(pair + [sample(2, 0.7, mask=(0,) * 5)])
    zero, _ = updated(pair + [sample(2, 0.0)])
    alone, _ = updated(pair)
    assert stats["skipped_zero_advantage"] == 1 and stats["forward_tokens"] == 10
    assert all(torch.allclose(masked[n], zero[n], atol=1e-7) for n in masked)
    assert max(float((masked[n] - alone[n]).abs().max()) for n in masked) > 1e-6


def test_loss_masked_selects_the_episodes_the_environment_did_not_end():
    import types

    from spade.core.agent import EpisodeRecord, loss_masked
    from spade.core.selfplay import SelfPlay

    config = load_config(overrides={"agent": {"truncated_episodes": "mask"}})
    for outcome, masked in [("terminated", False), ("truncated", True), ("turn_limit", True), ("cut_turn", True),
                            ("context_limit", True), ("env_failure", False)]:
        record = EpisodeRecord("e", 0, "no_hint", outcome=outcome, token_ids=[1, 2, 3], loss_mask=[0, 1, 1],
                               rollout_logprobs=[0.0, -1.0, -1.0])
        assert loss_masked(record, config.agent) is masked, outcome
        sample = SelfPlay.agent_sample(types.SimpleNamespace(config=config), record, 0.5)
        assert (sample.loss_mask, sample.advantage) == (([0, 0, 0] if masked else [0, 1, 1]), 0.5), outcome
        assert not loss_masked(record, load_config().agent)  # 'train' (games default): nothing masked


@pytest.mark.parametrize("scope", ["all", "delayed"])
def test_tis_weighs_fresh_samples_only_with_train_tis_samples_all(tiny_model_dir, monkeypatch, scope):
    """train.tis_samples: 'all' (reference: slime's vanilla TIS weighs every sample) gives a fresh agent sample the
    weights min(exp(training log-prob - rollout log-prob), cap), not 1, when the rollout log-probs were taken at the
    sampling temperature 0.6 and the training ones at 1.0; 'delayed' weighs the delayed designer sample only."""
    import torch

    import spade.train.trainer as trainer_module

    seen = []
    real = trainer_module.grpo_loss

    def spy(logprobs, old, advantages, mask, *args):
        seen.append((old.clone(), mask.clone(), args[4]))  # (..., eps_high, kl_coef, ref, tis, ...)
        return real(logprobs, old, advantages, mask, *args)

    monkeypatch.setattr(trainer_module, "grpo_loss", spy)
    config = load_config(overrides={"model_card": "tiny-random", "agent": {"temperature": 0.6},
                                    "train": {"tis_samples": scope, "micro_batch": 2, "global_batch": 2}})
    model, _ = load_model(tiny_model_dir)
    trainer = LocalTrainer(config, model, pad_id=0)
    ids = [1, 5, 9, 4, 7, 3]
    with torch.no_grad():  # the sampler's log-probs at 0.6, on the four trained tokens
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
        tempered = torch.log_softmax(logits / 0.6, dim=-1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
    rollout = [0.0, 0.0] + tempered[1:].tolist()
    mask = [0, 0, 1, 1, 1, 1]
    fresh = Sample("agent", ids, mask, rollout, advantage=1.0)
    delayed = Sample("designer", ids, mask, rollout, advantage=-1.0, delayed=True)
    trainer.update([fresh, delayed], one_step=True)  # equal lengths: the micro batch keeps this order
    (old, trained, tis), = seen
    expected = torch.exp(old - torch.tensor([rollout, rollout])).clamp(max=2.0)
    on = trained.bool()
    assert tis is not None
    assert torch.allclose(tis[1][on[1]], expected[1][on[1]])  # the delayed sample: weighted either way
    fresh_row = tis[0][on[0]]
    if scope == "all":
        assert torch.allclose(fresh_row, expected[0][on[0]]) and (fresh_row - 1).abs().max() > 1e-3
    else:
        assert torch.equal(fresh_row, torch.ones_like(fresh_row))


def test_logprobs_share_a_forward_pass_and_skip_untrained_positions(tiny_model):
    """sequence_logprobs (the trainer's) equals the whole-logits log-probs at every trained token, with their gradients, and is 0
    elsewhere; samples that differ in their last token only (one-token design replies to one prompt) go through the
    decoder once, and only trained positions go through the head."""
    import torch
    from spade.core.losses import token_logprobs
    from spade.train import trainer as trainer_module

    model, _ = tiny_model
    torch.manual_seed(0)
    vocab = model.config.vocab_size
    prompt = torch.randint(3, vocab, (40,))
    ids = torch.stack([torch.cat([prompt, torch.tensor([t])]) for t in (5, 6, 7, 5)] + [torch.randint(3, vocab, (41,))])
    attention = torch.ones_like(ids)
    mask = torch.zeros(5, 41)
    mask[:4, -1] = 1  # the four replies' one token
    mask[4, 30:] = 1  # the other sample's last 11 tokens
    rows = []
    decoder = model.get_decoder()
    hook = decoder.register_forward_hook(lambda module, args, kwargs, out: rows.append(kwargs["input_ids"].shape[0]),
                                         with_kwargs=True)
    head_rows = []
    head = model.get_output_embeddings()
    real_linear = torch.nn.functional.linear

    def counting_linear(x, weight, *rest):
        if weight is head.weight:
            head_rows.append(x.reshape(-1, x.shape[-1]).shape[0])
        return real_linear(x, weight, *rest)

    try:
        torch.nn.functional.linear = counting_linear
        fast = trainer_module.sequence_logprobs(model, ids, attention, mask, 0.7)
    finally:
        torch.nn.functional.linear = real_linear
        hook.remove()
    assert rows == [2]  # one pass for the four replies, one for the other sample
    assert sum(head_rows) == int(mask.sum())  # 4 + 11 trained positions, not 5 x 40
    plain = token_logprobs(model(input_ids=ids, attention_mask=attention).logits[:, :-1].float(), ids[:, 1:], 0.7)
    plain = torch.cat([torch.zeros(5, 1), plain], dim=1) * mask
    assert torch.allclose(fast, plain, atol=1e-5)
    assert (fast[mask == 0] == 0).all()
    assert len({round(float(v), 6) for v in fast.detach()[:4, -1]}) == 3  # tokens 5, 6, 7: the shared pass keeps each target
    weights = [p for p in model.parameters() if p.requires_grad]
    scale = torch.randn(5, 41)
    for a, b in zip(torch.autograd.grad((fast * scale).sum(), weights), torch.autograd.grad((plain * scale).sum(),
                                                                                            weights)):
        assert torch.allclose(a, b, atol=1e-4)
