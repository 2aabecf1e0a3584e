"""The GPU-hour estimator (spade.train.compute, `spade compute`) and the paper run configs (configs/paper/)."""

import json
from pathlib import Path

import pytest
import yaml

from spade.train import compute
from spade.cli import main
from spade.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
PAPER_CONFIGS = sorted((ROOT / "configs" / "paper").glob("*.yaml"))


def small_run(**selfplay):
    """A tiny run with round numbers: 2 slots, G = 2, global batch 4 (2 no-hint plays per slot), k = 2, 4 steps,
    2 turns of 10 tokens."""
    settings = dict(active_skills=2, envs_per_skill=1, group_size=2, regen_interval=2, total_steps=4,
                    design_attempts=1, backfill=True, train_designer=False, checkpoint_every=2)
    settings.update(selfplay)
    return load_config(overrides={
        "run_name": "small", "recipe": "games", "model_card": "smollm2-135m",
        "selfplay": settings, "train": {"global_batch": 4},
        "agent": {"max_turns": 2, "max_new_tokens": 10, "max_context_tokens": 1000},
        "designer": {"max_new_tokens": 100, "hint_max_new_tokens": 10},
        "corpus": {"games_max_words": 100},
        "memory": {"n_positive": 1},
        "eval": {"during_training": ["heldout_library"], "final": ["heldout_library"],
                 "select_by": ["heldout_library:win_rate"], "max_new_tokens": 10, "max_context_tokens": 1000,
                 "heldout_library": {"environments": ["crt_residue_puzzle", "knights_knaves_puzzle",
                                                      "sequence_next_terms"], "episodes": 4, "max_turns": 3}},
    })


def unit_assumptions(**overrides):
    """N_active = 1e6, no attention term, every fraction 1 (or 0.5 for validity), peak 1 TFLOP/s."""
    defaults = {key: 1.0 for key in compute.FRACTIONS}
    defaults.update(include_attention=False, old_logprob_forward=False, agent_prompt_tokens=100,
                    observation_tokens=20, design_valid_rate=0.5, designer_instruction_tokens=50, tokens_per_word=1.0,
                    memory_seed_tokens=10, hint_prompt_extra_tokens=5)
    defaults.update(overrides)
    return {
        "hardware": {"gpu": "test", "peak_tflops_bf16": 1.0},
        "defaults": defaults,
        "models": {"smollm2-135m": {"params_total_b": 0.001, "params_active_b": 0.001, "n_layers": 2, "d_attn": 10,
                                    "gpus": 2}},
        "benchmarks": {"heldout_library": {"turns": 1, "prompt_tokens": 40, "observation_tokens": 0}},
    }


def test_expected_attempts_and_filled_share():
    # p = 0.5, at most 3 tries: 1 + 0.5 + 0.25 = 1.75 tries; filled with probability 1 - 0.125
    assert compute.expected_attempts(0.5, 3) == pytest.approx(1.75)
    assert compute.filled_share(0.5, 3) == pytest.approx(0.875)
    assert compute.expected_attempts(1.0, 5) == pytest.approx(1.0)


def test_sequence_flops_with_and_without_attention():
    model = {"params_active_b": 0.001, "n_layers": 2, "d_attn": 10, "include_attention": False}
    assert compute.sequence_flops(100, model) == pytest.approx(2e6 * 100)
    model["include_attention"] = True  # + L d T^2 = 2 * 10 * 100^2
    assert compute.sequence_flops(100, model) == pytest.approx(2e8 + 2e5)


def test_episode_is_cut_at_the_context():
    # 10 turns of 100 tokens after a 100-token prompt = 1100 tokens; a 550-token context keeps half of the turns
    episode = compute.episode_length(10, 100, 100, 0, 550)
    assert episode.tokens == 550
    assert episode.generated == pytest.approx(500)
    uncut = compute.episode_length(2, 10, 100, 20, 1000)
    assert (uncut.tokens, uncut.generated) == (140, 20)


def test_small_run_hand_computed():
    result = compute.estimate(small_run(), unit_assumptions(), "test.yaml")
    # agent episode: 100 prompt + 2 x 10 sampled + 1 x 20 observation = 140 tokens, 2e6 FLOPs per token
    # no-hint: 4 steps x global batch 4 (2 slots x 2 plays) = 16; hint arm: 2 regenerations x 2 x G 2 = 8 episodes
    rollout = result.components["rollout"]
    assert rollout.sequences == 24
    assert rollout.flops == pytest.approx(24 * 2e6 * 140)
    # decode share 20/140 at mfu 1, prefill share at mfu 1: hours = FLOPs / 1e12 / 3600
    assert rollout.gpu_hours == pytest.approx(24 * 2e6 * 140 / 1e12 / 3600)
    # training: the 16 no-hint episodes, forward + backward = 3 forwards, no old-policy or reference pass
    training = result.components["training"]
    assert training.sequences == 16
    assert training.flops == pytest.approx(3 * 16 * 2e6 * 140)
    # designer: 2 regenerations x 2 slots x 1 try; prompt 50 + 100 words + 2 seeds x 10 = 170, design 100 tokens;
    # hints: 2 x 2 on the code (100) + 5 + 10 generated = 115 tokens
    designer = result.components["designer"]
    assert designer.sequences == 4 + 4
    assert designer.flops == pytest.approx(2e6 * (4 * 270 + 4 * 115))
    # evaluation: steps 0, 2, 4 (final adds nothing new) x 3 environments x 4 episodes of 40 + 10 tokens
    evaluation = result.components["evaluation"]
    assert result.counts["evaluations"] == 3
    assert evaluation.sequences == 36
    assert evaluation.flops == pytest.approx(36 * 2e6 * 50)
    assert result.total_gpu_hours == pytest.approx(sum(c.gpu_hours for c in result.components.values()))
    assert result.wall_clock_hours == pytest.approx(result.total_gpu_hours / 2)


def test_switches_change_the_counts():
    base = compute.estimate(small_run(), unit_assumptions(), "test.yaml")
    # 'global_batch': G sizes the hint arm only (8 -> 16 episodes); 'groups': both arms (24 -> 48)
    double_group = compute.estimate(small_run(group_size=4), unit_assumptions(), "test.yaml")
    assert double_group.components["rollout"].sequences == 16 + 16
    groups = compute.estimate(small_run(batch_structure="groups"), unit_assumptions(), "test.yaml")
    groups_double = compute.estimate(small_run(batch_structure="groups", group_size=4), unit_assumptions(), "test.yaml")
    assert groups_double.components["rollout"].flops == pytest.approx(2 * groups.components["rollout"].flops)
    # designer training adds the valid designs: without backfill, 2 slots x 0.5 filled x 2 regenerations = 2
    trained = compute.estimate(small_run(train_designer=True, backfill=False), unit_assumptions(), "test.yaml")
    assert trained.counts["designer_samples_trained"] == pytest.approx(2)
    # half the slots are filled: the global batch of 4 plays goes to the filled one ('global_batch'), and the 2
    # designer samples take 2 of the trained places; 'groups' plays G = 2 on the filled slot and trains them all
    assert trained.counts["agent_episodes_no_hint"] == pytest.approx(4 * 4)
    assert trained.counts["agent_samples_trained"] == pytest.approx(4 * 4 - 2)
    old = compute.estimate(small_run(train_designer=True, backfill=False, batch_structure="groups"), unit_assumptions(),
                           "test.yaml")
    assert old.counts["agent_episodes_no_hint"] == old.counts["agent_samples_trained"] == pytest.approx(4 * 1 * 2)
    # old-policy forward and the KL reference each add one forward pass per trained token
    extra = compute.estimate(load_config(overrides={**_as_overrides(small_run()), "train": {"global_batch": 4, "kl_coef": 0.005}}),
                             unit_assumptions(old_logprob_forward=True), "test.yaml")
    assert extra.components["training"].flops == pytest.approx(5 / 3 * base.components["training"].flops)
    # two feedback revisions: each slot tries up to 1 x (1 + 2) = 3 times at p = 0.5 -> (1 - 0.5^3) / 0.5 = 1.75 tries
    revised = compute.estimate(load_config(overrides={**_as_overrides(small_run()), "designer_feedback": {"revisions": 2}}),
                               unit_assumptions(), "test.yaml")
    assert base.counts["design_attempts"] == pytest.approx(2 * 2 * 1.0)
    assert revised.counts["design_attempts"] == pytest.approx(2 * 2 * 1.75)


def _as_overrides(config):
    from dataclasses import asdict

    data = asdict(config)
    data.pop("model")
    return data


def test_unknown_model_names_the_file_and_the_known_models():
    config = load_config(overrides={"model_card": "qwen3-8b"})
    with pytest.raises(ConfigError, match=r"'qwen3-8b'.*test\.yaml.*known: smollm2-135m"):
        compute.estimate(config, unit_assumptions(), "test.yaml")


def test_bad_assumptions_file(tmp_path):
    data = unit_assumptions()
    data["defaults"]["mfu_train"] = 1.5
    path = tmp_path / "compute.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="mfu_train must be in"):
        compute.load_assumptions(path)
    data["defaults"]["mfu_train"] = 0.3
    data["models"]["smollm2-135m"]["typo"] = 1
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="unknown key.*typo"):
        compute.load_assumptions(path)


def test_the_shipped_assumptions_cover_every_model_card_and_benchmark():
    from spade.evals.registry import registry

    assumptions = compute.load_assumptions()
    cards = {p.stem for p in (ROOT / "configs" / "models").glob("*.yaml")
             if yaml.safe_load(p.read_text())["source"] != "tiny-random"}  # the tiny test models run on no GPU
    assert "smollm2-135m" in cards and "tiny-random-copy" not in cards
    assert cards <= set(assumptions["models"])
    assert set(registry()) <= set(assumptions["benchmarks"])


def test_paper_configs_load_and_estimate():
    assumptions = compute.load_assumptions()
    assert PAPER_CONFIGS, "configs/paper/ is empty"
    for path in PAPER_CONFIGS:
        config = load_config(path)
        assert config.run_name == path.stem
        estimate = compute.estimate(config, assumptions)
        assert estimate.total_gpu_hours > 0, path
        # every paper run trains Table 5's 400 steps but the tool-use 4B one, which follows its script (issue 40)
        assert estimate.counts["steps"] == (500 if path.stem == "spade_tool_use_4b" else 400), path
    eight = load_config(ROOT / "configs" / "paper" / "spade_games_8b.yaml")
    assert (eight.designer.max_new_tokens, eight.train.kl_coef) == (20000, 0.005)
    two = load_config(ROOT / "configs" / "paper" / "ablation_two_skills_30b.yaml")
    assert len(two.selfplay.skills) == 2 and two.selfplay.active_skills * two.selfplay.envs_per_skill == 24


def mapped_run_names() -> set:
    """Every run name the paper-scale mapping files name (tables, figures, numbers, the comparison), read by the
    loaders the rules use."""
    from spade.paper import figures as paper_figures
    from spade.paper.table_runs import load_table_runs, mapped_runs

    tables = load_table_runs(ROOT / "paper" / "table_runs.yaml")
    names = {r for t in ("table1", "table2", "table3", "table6", "table7", "table8") for r in mapped_runs(tables, t)}
    figures = paper_figures.load_figure_runs(ROOT / "paper" / "figure_runs.yaml")
    names |= {r for f in paper_figures.FIGURE_KINDS for r in paper_figures.figure_runs(figures, f)}
    numbers_file = ROOT / "paper" / "number_runs.yaml"
    if numbers_file.is_file():  # the quoted-number mapping (rules/paper_numbers.smk)
        from spade.paper import numbers as paper_numbers

        numbers = paper_numbers.load_number_runs(numbers_file)
        names |= {r for g in paper_numbers.GROUPS for r in paper_numbers.group_runs(numbers, g)}
    from spade.paper import comparison as paper_comparison  # the environment-source comparison (rules/paper_comparison.smk)

    names |= set(paper_comparison.comparison_runs(paper_comparison.load_comparison_runs(
        ROOT / "paper" / "comparison_runs.yaml")))
    return {n for n in names if n}


def test_every_mapped_run_has_a_config():
    named = mapped_run_names()
    configs = {p.stem for p in PAPER_CONFIGS}
    assert "spade_games_30b" in named and "fixed_env_rlve_30b" in named
    assert named <= configs, named - configs
    assert configs <= named  # no config for a run no artifact reads


def test_cli_json_and_markdown(capsys):
    path = str(ROOT / "configs" / "paper" / "spade_games_4b.yaml")
    assert main(["compute", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["run"] == "spade_games_4b" and data[0]["gpus_suggested"] == 8
    assert data[0]["total_gpu_hours"] == pytest.approx(sum(data[0]["gpu_hours"].values()))
    assert main(["compute", path, "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| run | model |") and lines[2].startswith("| spade_games_4b |")


def test_cli_unknown_model(tmp_path, capsys):
    run = tmp_path / "run.yaml"
    run.write_text("run_name: x\nmodel_card: tiny-random\n")
    assert main(["compute", str(run)]) == 2
    err = capsys.readouterr().err
    assert "tiny-random" in err and "compute.yaml" in err and "qwen3-8b" in err
