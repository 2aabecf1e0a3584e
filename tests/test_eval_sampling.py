"""Evaluation sampling per benchmark (eval.sampling): the reference's settings reach each benchmark's generate call,
'shared' replaces them with eval.*, k samples / trials are averaged per question / task by hand, and item records of
other sampling settings are not reused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scripted_backend import ScriptedBackend
from spade.config import load_config
from spade.evals.base import EvalContext, EvalRun, ItemRecord, evaluate
from spade.evals.config import benchmark_sampling, describe_sampling
from spade.evals.evaluate import context_sampling, make_benchmark
from spade.evals.tau2 import Tau2, Tau2Config

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "evals"

# The reference's evaluation settings, written out by hand from its files (docs/EVALUATION.md#sampling-per-benchmark):
# (temperature, top_p, top_k, max_new_tokens)
REFERENCE = {
    "aime": (0.7, 0.8, 20, 32768),  # eval_configs/eval_aime_avg32.yaml:4-7
    "gpqa_diamond": (0.7, 0.95, 0, 32768),  # eval_offline/configs/games.yaml:14-16
    "livecodebench": (0.2, 0.95, 0, 16384),  # games.yaml:22-24
    "reasoning_gym_hard": (0.6, 0.8, 20, 8192),  # _games_gem.yaml:14-15, gem_evaluator.py:296-297
    "gem_games": (0.6, 0.8, 20, 8192),
    "bfcl_multi_turn": (0.0, 1.0, 0, 4096),  # tool_use.yaml:9; bfcl_eval's 4096 cap
    "tau2": (0.0, 0.8, 20, 16384),  # _tool_use_tau2.yaml:6-9
    "acebench": (0.7, 1.0, 0, 16384),  # tool_use.yaml:20-22
}
SHARED = {"temperature": 0.25, "top_p": 0.9, "top_k": 7, "max_new_tokens": 99}


def settings(config, name) -> tuple:
    s = benchmark_sampling(config.eval, name)
    return s["temperature"], s["top_p"], s["top_k"], s["max_new_tokens"]


def test_defaults_are_the_reference_and_shared_replaces_them():
    config = load_config()
    assert config.eval.sampling == "reference"
    for name, expected in REFERENCE.items():
        assert settings(config, name) == expected, name
        assert benchmark_sampling(config.eval, name)["source"] == "reference"
    # the held-out suites have no reference setting: the shared keys, in both modes
    assert settings(config, "heldout_library") == (0.6, 1.0, 0, 8192)
    shared = load_config(overrides={"eval": {"sampling": "shared", **SHARED}})
    for name in [*REFERENCE, "heldout_library", "heldout_mechanisms"]:
        assert settings(shared, name) == (0.25, 0.9, 7, 99), name
        assert benchmark_sampling(shared.eval, name)["source"] == "shared"
    assert (config.eval.gpqa_diamond.samples, config.eval.tau2.trials, config.eval.aime.samples) == (8, 4, 32)


def test_every_paper_run_states_reference_sampling_and_its_dry_run_lists_it():
    for path in sorted((ROOT / "configs" / "paper").glob("*.yaml")):
        assert "\n  sampling: reference" in path.read_text(encoding="utf-8"), path.name
        config = load_config(path)
        lines = describe_sampling(config.eval)
        assert lines[0] == "evaluation sampling: eval.sampling = reference"
        for name in dict.fromkeys([*config.eval.during_training, *config.eval.final]):
            line = next(line for line in lines if line.startswith(f"  {name}:"))
            if name in REFERENCE:
                t, p, k, n = REFERENCE[name]
                assert f"temperature {t:g}, top_p {p:g}, top_k {k}, max_new_tokens {n}" in line and "(reference)" in line
    games = describe_sampling(load_config(ROOT / "configs" / "paper" / "spade_games_30b.yaml").eval)
    assert "  aime: temperature 0.7, top_p 0.8, top_k 20, max_new_tokens 32768, samples 32 (reference)" in games
    tools = describe_sampling(load_config(ROOT / "configs" / "paper" / "spade_tool_use_8b.yaml").eval)
    assert "  tau2: temperature 0, top_p 0.8, top_k 20, max_new_tokens 16384, trials 4 (reference)" in tools
    assert load_config(ROOT / "configs" / "default.yaml").eval.sampling == "shared"  # the toy keeps its 48 tokens


def test_openrlhf_dry_run_prints_the_evaluation_sampling(tmp_path, capsys):
    from spade.cli import main

    rc = main(["train", "--config", str(ROOT / "configs" / "paper" / "spade_tool_use_8b.yaml"), "--backend",
               "openrlhf", "--dry-run", "--model", str(tmp_path / "m"), "--corpus", "c.jsonl",
               "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0 and "# evaluation sampling: eval.sampling = reference" in out
    assert "#   bfcl_multi_turn: temperature 0, top_p 1, top_k 0, max_new_tokens 4096 (reference)" in out


def offline_config(tmp_path, **eval_keys):
    """Each offline-playable benchmark cut to one item."""
    return load_config(overrides={"eval": {
        "aime": {"years": [2025], "paths": {2025: str(FIXTURES / "aime" / "aime_2025.jsonl")}, "samples": 1,
                 "max_problems": 1},
        "gpqa_diamond": {"path": str(FIXTURES / "gpqa" / "gpqa_diamond.csv"), "samples": 1, "max_questions": 1},
        "reasoning_gym_hard": {"tasks": ["leg_counting"], "episodes_per_task": 1, "max_turns": 1},
        "gem_games": {"games": ["game:GuessTheNumber-v0-easy"], "episodes": 1, "max_turns": 1,
                      "nltk_data_dir": str(tmp_path / "nltk")},
        "bfcl_multi_turn": {"categories": ["base"], "max_entries_per_category": 1, "max_steps_per_turn": 1},
        **eval_keys}})


@pytest.mark.parametrize("mode", ["reference", "shared"])
@pytest.mark.parametrize("name", ["aime", "gpqa_diamond", "reasoning_gym_hard", "gem_games", "bfcl_multi_turn"])
def test_each_benchmark_generates_with_its_settings(tiny_model, tmp_path, name, mode):
    config = offline_config(tmp_path, sampling=mode, **SHARED)
    backend = ScriptedBackend(tiny_model[1], lambda prompt, seed: "\\boxed{1}")
    # a context far longer than any prompt: a turn's token budget is then the setting itself
    ctx = EvalContext(backend, seed=3, benchmark=name, max_context_tokens=1_000_000, **context_sampling(config.eval, name))
    benchmark = make_benchmark(config, name)
    benchmark.play(benchmark.items()[:1], ctx)
    expected = REFERENCE[name] if mode == "reference" else (0.25, 0.9, 7, 99)
    assert backend.calls and {(p.temperature, p.top_p, p.top_k, p.max_new_tokens) for _, p, _ in backend.calls} \
        == {expected}


def test_hf_context_takes_the_benchmarks_settings(tiny_model_dir):
    from spade.evals.evaluate import hf_context

    ctx = hf_context(load_config(), tiny_model_dir, "bfcl_multi_turn", 2)
    assert (ctx.temperature, ctx.top_p, ctx.top_k, ctx.max_new_tokens, ctx.sampling_source) == \
        (0.0, 1.0, 0, 4096, "reference")
    params = ctx.params()
    assert (params.temperature, params.top_p, params.top_k, params.max_new_tokens) == (0.0, 1.0, 0, 4096)


def test_tau2_pass1_over_trials_by_hand():
    """retail: task 0 passes 3 of 4 trials, task 1 passes 1 of 4; telecom: task 7 passes 4 of 4. pass^1/retail =
    mean over tasks (0.75 + 0.25) / 2 = 0.5 = 4 / 8 passes, the reference's passes / (tasks x trials); its stderr is
    over the 2 tasks: std([0.75, 0.25]) / sqrt(2) = 0.25; n counts tasks. pass^1/avg = (0.5 + 1.0) / 2."""
    outcomes = {("retail", "0"): [1, 1, 0, 1], ("retail", "1"): [0, 0, 1, 0], ("telecom", "7"): [1, 1, 1, 1]}
    records = [ItemRecord(f"{domain}/{task}/{trial}", "", "", float(passed), group=domain, extra={"reward": passed})
               for (domain, task), trials in outcomes.items() for trial, passed in enumerate(trials)]
    rows = {m.name: m for m in Tau2(Tau2Config(trials=4)).aggregate(records)}
    assert rows["pass^1/retail"].value == pytest.approx(0.5) and rows["pass^1/retail"].n == 2
    assert rows["pass^1/retail"].stderr == pytest.approx(0.25)
    assert rows["pass^1/telecom"].value == 1.0 and rows["pass^1/telecom"].n == 1
    assert rows["pass^1/avg"].value == pytest.approx(0.75) and rows["pass^1/avg"].n == 3
    assert math.isnan(rows["pass^1/avg"].stderr)  # telecom has one task: no stderr


class _Once:
    """One single-turn item per name; records what was played."""

    def __init__(self):
        from spade.evals.base import Benchmark

        class Bench(Benchmark):
            name = "echo_test"
            config_cls = type(None)

            def items(inner):
                from spade.evals.base import Item
                return [Item(f"q{i}", {}) for i in range(3)]

            def play(inner, items, ctx):
                from spade.evals.userdata import sample_replies
                self.played += [item.id for item in items]
                sample_replies(ctx, [[{"role": "user", "content": item.id}] for item in items],
                               [ctx.item_seed(item.id) for item in items])
                return [ItemRecord(item.id, "", "", 1.0) for item in items]

        self.played: list = []
        self.bench = Bench(None)


def test_records_are_keyed_by_sampling(tiny_model, tmp_path):
    """Records of the same model sampled at another temperature (or top-k) are played again; same settings reuse them
    (the mutation: a key without the sampling reuses all 3 records of temperature 0.6 at 0.0)."""
    out = tmp_path / "r.json"

    def run(**sampling):
        once = _Once()
        ctx = EvalContext(ScriptedBackend(tiny_model[1], lambda p, s: "x"), seed=1, benchmark="echo_test", **sampling)
        result = evaluate(once.bench, ctx, EvalRun("toy", 0, out, 3, model_identity="m"), progress=False)
        return once.played, result

    played, result = run(temperature=0.6)
    assert len(played) == 3 and result["sampling"]["temperature"] == 0.6
    assert run(temperature=0.6)[0] == []
    played, result = run(temperature=0.0)
    assert len(played) == 3 and result["sampling"] == {"temperature": 0.0, "top_p": 1.0, "top_k": 0,
                                                       "max_new_tokens": 256, "max_context_tokens": 32768,
                                                       "source": ""}
    assert len(run(temperature=0.0, top_k=20)[0]) == 3
    assert json.loads((tmp_path / "r.items.model").read_text())["sampling"]["top_k"] == 20
