"""The mechanism check (issue 39): its recomputations against the core's, its properties on hand-made rounds, and the
mutations of the designer update it must catch, each in a short real run (tests/mechanism_mutants.py)."""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from spade.analysis.mechanism import (MechanismInputError, Round, _mean, bootstrap, design_rounds, digit_accuracy,
                                      halves, heldout_rows, integrity, nonzero_rounds, properties, read_sets,
                                      recipe_regret, recipe_reward, slot_need, win_chance)
from spade.config import RewardConfig, load_config
from spade.configtools import deep_merge
from spade.core import rewards
from spade.envs.checks import TEMPLATE_MARKERS, check_source, template_source
from spade.paper.report import read_metrics

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MARKER = TEMPLATE_MARKERS["copy_span"]
MUTATIONS = ("zero_advantages", "band_outside", "flip_regret", "drop_designer", "wrong_set")


# ----- the check's own formulas agree with the core's ----------------------------------------------------------------
@pytest.mark.parametrize("regret_value", [-0.3, 0.0, 0.05, 0.15, 0.4])
@pytest.mark.parametrize("plateau_input", [0.0, 0.1, 0.3, 0.45, 0.6, 0.7, 0.9, 1.0])
def test_recipe_reward_is_the_cores(regret_value, plateau_input):
    config = RewardConfig()
    expected = rewards.designer_reward(regret_value, plateau_input, config.regret_weight, config.plateau_weight,
                                       config.regret_scale, config.band_low, config.band_high, config.ramp)
    assert math.isclose(recipe_reward(regret_value, plateau_input, config), expected, abs_tol=1e-12)


def test_recipe_regret_pairs_by_seed():
    slot = {"hint_seeds": [5, 6, 7], "hint_returns": [1.0, 0.0, 1.0], "paired_seeds": [7, 5, 9],
            "paired_returns": [0.0, 0.0, 1.0]}
    assert recipe_regret(slot) == pytest.approx(((1.0 - 0.0) + (1.0 - 0.0)) / 2)  # seeds 7 and 5; 9 has no hint
    assert recipe_regret({**slot, "hint_seeds": [1, 2, 3]}) is None


def test_slot_need_reads_the_designed_value():
    opening = template_source("copy_span", "test")
    assert opening.endswith(MARKER)
    assert slot_need(opening + "3", MARKER) == 3
    assert slot_need(opening + "3\n", MARKER) == 3
    assert slot_need(opening + "x", MARKER) is None
    assert slot_need(check_source("copy_span", "test"), MARKER) == 3  # the complete file ends NEED = 3


def _copy_span(need):
    """copy_span as a design that wrote ``need`` (our own trusted file, run in-process)."""
    namespace = {}
    exec(compile(template_source("copy_span", "test") + str(need), "copy_span", "exec"), namespace)
    return namespace["CopySpan"]()


def test_copy_span_wins_with_at_least_need_digits_right():
    env = _copy_span(2)
    env.reset(seed=0)
    row = env.row
    wrong = {"1": "2", "2": "3", "3": "4", "4": "1"}
    assert env.step(" ".join(row))[1:3] == (1.0, True)  # spaces are removed
    for right in range(5):
        env.reset(seed=0)
        reply = row[:right] + "".join(wrong[d] for d in row[right:])
        observation, reward, done, _, info = env.step(reply)
        assert (reward, done, info) == (1.0 if right >= 2 else 0.0, True, {"need": 2, "right": right})  # wins only
    assert env.step(row)[1] == 0.0  # the episode is over


def test_copy_span_chance_matches_its_docstring_and_win_chance():
    """A reply that ignores the row wins P(Binomial(4, 1/4) >= NEED) of the 256 rows: 175, 67, 13 and 1 of them."""
    for need, wins in ((1, 175), (2, 67), (3, 13), (4, 1)):
        env, won = _copy_span(need), 0
        for row in itertools.product("1234", repeat=4):
            env.row, env.done = "".join(row), False
            won += env.step("1234")[1] == 1.0
        assert won == wins and won / 256 == pytest.approx(win_chance(0.25, need))


def test_copy_span_holds_out_rows_training_never_draws():
    """32 of the 256 rows are held out, each digit 8 times per position; training draws none of them, the held-out
    split only them, and the evaluation's instance i plays the i-th at the difficulty it names."""
    namespace = {}
    exec(compile(check_source("copy_span", "test"), "copy_span", "exec"), namespace)
    held, env_class = namespace["HELD_OUT"], namespace["CopySpan"]
    assert len(held) == len(set(held)) == 32
    assert all(sorted(row[i] for row in held) == sorted("1234" * 8) for i in range(4))
    train, heldout = env_class(), env_class(split="heldout")
    for seed in range(2000):
        train.reset(seed=seed), heldout.reset(seed=seed)
        assert train.row not in held and heldout.row in held
    assert len({env_class().reset(seed=s)[0] for s in range(2000)}) == 256 - 32  # every other row is drawn
    env = env_class(split="heldout", need=4, instance=33)
    observation, info = env.reset(seed=0)
    assert env.row == held[1] and info == {"need": 4} and observation.startswith("Copy the row, at least 4 digits")
    assert env.step(held[1][:3] + "0")[1] < 1.0  # NEED 4 asks for every digit
    with pytest.raises(ValueError, match="split must be 'train' or 'heldout', got 'test'"):
        env_class(split="test")
    for need in (0, 5, 9):  # a difficulty no reply can win (or every reply wins) is no design of this template
        with pytest.raises(ValueError, match=f"NEED must be 1 to 4, got {need}"):
            _copy_span(need)


def test_heldout_benchmark_items_cover_every_need():
    from spade.configtools import ConfigError
    from spade.evals.heldout import MechanismCheckHeldout, MechanismCheckHeldoutConfig

    items = MechanismCheckHeldout(MechanismCheckHeldoutConfig()).items()
    assert len(items) == 4 * 32 and items[0].id == "need1/000" and items[-1].id == "need4/031"
    assert {item.group for item in items} == {"need1", "need2", "need3", "need4"}
    source, kind, kwargs = MechanismCheckHeldout(MechanismCheckHeldoutConfig())._item_environment(items[-1])
    assert source == check_source("copy_span", "test") and kwargs == {"split": "heldout", "need": 4, "instance": 31}
    with pytest.raises(ConfigError, match=r"eval.mechanism_check_heldout.needs.*got \[0, 2\]"):
        MechanismCheckHeldout(MechanismCheckHeldoutConfig(needs=[0, 2])).items()
    with pytest.raises(ConfigError, match=r"eval.mechanism_check_heldout.environment.*'symbol_copy'.*\['copy_span'\]"):
        MechanismCheckHeldout(MechanismCheckHeldoutConfig(environment="symbol_copy")).items()


def test_heldout_benchmark_plays_its_rows_in_the_sandbox_and_refuses_a_need_the_template_refuses(tiny_model, pool):
    """The benchmark's items reach the sandboxed template as (split, need, instance): a reply that copies the first
    held-out row wins that row's items at every NEED and no other row's at NEED 4. A NEED the template refuses stops
    the evaluation with the keys and the template's message; it is not scored 0. Mutation seen failing: without the
    check in ``MechanismCheckHeldout.play`` the NEED-5 items come back as two losses."""
    from test_learning_check import EchoBackend

    from spade.configtools import ConfigError
    from spade.evals.base import EvalContext
    from spade.evals.heldout import MechanismCheckHeldout, MechanismCheckHeldoutConfig

    namespace = {}
    exec(compile(check_source("copy_span", "test"), "copy_span", "exec"), namespace)
    first = namespace["HELD_OUT"][0]
    _, tokenizer = tiny_model
    ctx = EvalContext(EchoBackend(tokenizer, first), seed=0, benchmark="mechanism_check_heldout", max_new_tokens=4,
                      max_context_tokens=2048, pool_factory=lambda: pool)
    bench = MechanismCheckHeldout(MechanismCheckHeldoutConfig(instances=2))
    records = {r.id: r.score for r in bench.play(bench.items(), ctx)}
    assert [records[f"need{n}/000"] for n in (1, 2, 3, 4)] == [1.0] * 4 and records["need4/001"] == 0.0
    assert all(any(f"at least {n} digits right:\n{first}" in p for p in ctx.backend.prompts) for n in (1, 2, 3, 4))
    refused = MechanismCheckHeldout(MechanismCheckHeldoutConfig(needs=[5], instances=2))
    with pytest.raises(ConfigError, match=r"eval.mechanism_check_heldout.needs.*2 of 2 items failed.*NEED must be "
                                          r"1 to 4, got 5"):
        refused.play(refused.items(), ctx)


def test_digit_accuracy_is_the_maximum_likelihood():
    assert win_chance(0.25, 1) == pytest.approx(1 - 0.75 ** 4) and win_chance(0.6, 4) == pytest.approx(0.6 ** 4)
    assert win_chance(0.5, 2) == pytest.approx(11 / 16)  # 6 + 4 + 1 of the 16 equally likely rows of right/wrong
    assert digit_accuracy([(4, 1296, 10000)]) == pytest.approx(0.6, abs=1e-3)  # 0.6 ** 4 = 0.1296
    assert digit_accuracy([(1, 9375, 10000)]) == pytest.approx(0.5, abs=1e-3)  # 1 - 0.5 ** 4
    both = digit_accuracy([(4, 1296, 10000), (1, 9744, 10000)])  # both say 0.6 (1 - 0.4 ** 4 = 0.9744)
    assert both == pytest.approx(0.6, abs=2e-3)
    assert digit_accuracy([]) is None and digit_accuracy([(3, 0, 0)]) is None
    assert digit_accuracy([(5, 0, 10), (0, 10, 10)]) is None  # never / always won: says nothing of p
    # a fine grid reaches p = 0.99999, where 1 - win_chance rounds to 0: the losses' own terms keep the likelihood finite
    assert digit_accuracy([(1, 99, 100)], grid=100_000) == pytest.approx(1 - 0.01 ** 0.25, abs=1e-4)
    assert digit_accuracy([(1, 100, 100)]) == 0.999


def test_bootstrap_and_halves():
    diff, low, high = bootstrap(lambda lists: _mean(lists[1]) - _mean(lists[0]), [[0.1, 0.2, 0.1], [0.5, 0.6, 0.55]])
    assert diff == pytest.approx(0.55 - 0.4 / 3) and 0 < low <= diff <= high
    diff, low, high = bootstrap(lambda lists: _mean(lists[1]) - _mean(lists[0]), [[0.1, 0.9], [0.1, 0.9]])
    assert diff == 0 and low < 0 < high
    assert halves([1, 2, 3, 4, 5]) == ([1, 2], [3, 4, 5]) and halves([1]) == ([1], [1])


def _round(step, needs, win_rates, rewards_, plays=()):
    return Round(step, tuple(needs), tuple(win_rates), tuple(rewards_), tuple(plays))


def test_properties_on_hand_made_rounds():
    """A designer whose sets stay learnable and whose difficulty rises with the agent's accuracy passes against a
    control whose sets are not learnable; each property then fails on its own breakage."""
    wins = lambda i: 4 + i  # the agent's wins at NEED 1 (of 20) rise round by round
    trained = [_round(2 * i, [1 + i // 3] * 2, [0.5, 0.5 if i > 3 else 0.9], [0.4 + 0.01 * i] * 2,
                      plays=[(1, wins(i), 20)]) for i in range(12)]  # NEED 3 in the third quarter, 4 in the last
    control = [_round(2 * i, [2, 2], [0.0, 0.0], [0.1, 0.1], plays=[(1, wins(i), 20)]) for i in range(12)]
    metrics = [{"step": 2 * i + 2, "designer_batch_sets": [2 * i], "designer_batch_nonzero": 2} for i in range(12)]
    rows, ok = properties({0: (trained, metrics)}, {0: (control, [])})
    assert ok, rows
    assert [name[:3] for name, *_ in rows] == ["1. ", "(a)", "(b)", "(c)"]
    zero = [{**line, "designer_batch_nonzero": 0} for line in metrics]
    settled = [_round(r.step, [2, 2], r.win_rates, r.rewards, r.plays) for r in trained]  # one NEED throughout
    falling = [_round(r.step, trained[-1 - i].needs, r.win_rates, r.rewards, r.plays)
               for i, r in enumerate(trained)]  # the agent's accuracy rises, the designed difficulty falls
    unlearnt = [_round(r.step, r.needs, r.win_rates, r.rewards, trained[-1 - i].plays)
                for i, r in enumerate(trained)]  # the difficulty rises while the agent's accuracy falls
    spread = {9: [1, 1], 10: [4, 4], 11: [2, 3]}  # the last quarter's mean NEED 2.5 against the third's 2, but one
    noisy = [_round(r.step, spread.get(i, [2, 2]), r.win_rates, r.rewards, r.plays)  # resample in 27 is all 1.0
             for i, r in enumerate(trained)]
    for broken, failing in (({0: (trained, zero)}, "1."), ({0: (settled, metrics)}, "(c)"),
                            ({0: (falling, metrics)}, "(c)"), ({0: (unlearnt, metrics)}, "(c)"),
                            ({0: (noisy, metrics)}, "(c)")):
        rows, ok = properties(broken, {0: (control, [])})
        assert not ok and any(name.startswith(failing) and not holds for name, *_, holds in rows), rows
    rows, ok = properties({0: (trained, metrics)}, {0: (trained, [])})  # a control as good as the designer
    assert {name[:3] for name, *_, holds in rows if not holds} == {"(a)", "(b)"}, rows  # (c) reads the trained run


def test_heldout_rows_pair_items_and_pool_seeds():
    """(d): per seed the paired difference is above 0; pooled, its interval resampling items within seeds excludes 0;
    a seed with the control ahead fails its row, and items that differ between runs stop the check."""
    ids = [f"need{n}/{i:03d}" for n in (1, 2) for i in range(20)]
    base = dict.fromkeys(ids, 0.0)
    control = {i: float(k % 4 == 0) for k, i in enumerate(ids)}  # a quarter won
    trained = {i: float(k % 2 == 0) for k, i in enumerate(ids)}  # a half won, those of the control among them
    rows, ok = heldout_rows({0: trained, 1: trained}, {0: control, 1: control}, base)
    assert ok and [row[1] for row in rows] == [0, 1, "all"], rows
    assert rows[-1][2] == "+0.250" and "the controls learnt +0.250 over the base model" in rows[-1][3]
    # paired: 10 of 40 items differ, all one way; unpaired, the same means would give an interval down to about 0
    low, high = map(float, re.search(r"items \[([-+.\d]+), ([-+.\d]+)\]", rows[0][3]).groups())
    assert 0.1 < low < 0.25 < high < 0.45, rows[0]
    rows, ok = heldout_rows({0: trained, 1: control}, {0: control, 1: trained}, base)
    assert not ok and [row[-1] for row in rows] == [True, False, False], rows
    with pytest.raises(MechanismInputError, match="same items"):
        heldout_rows({0: trained}, {0: dict(list(control.items())[1:])}, base)


def test_nonzero_rounds_counts_trained_sets():
    metrics = [{"step": 2, "designer_batch_sets": [0], "designer_batch_nonzero": 3},
               {"step": 4, "designer_batch_sets": [2], "designer_batch_nonzero": 0}, {"step": 5}]
    assert nonzero_rounds(metrics) == (1, 2)


# ----- short real runs, unmutated and mutated --------------------------------------------------------------------------
def mechanism_config(tmp: Path, train_designer: bool = True) -> Path:
    """configs/default.yaml's first mechanism run, cut to 6 steps (3 design rounds)."""
    data = yaml.safe_load((ROOT / "configs/default.yaml").read_text())
    run = data["mechanism_check"]["toy_mechanism_s0"]
    base = {k: v for k, v in data.items() if k not in ("learning_check", "mechanism_check", "toy_tool_use",
                                                       "toy_ablations", "paper")}
    merged = deep_merge(deep_merge(base, run), {"run_name": "mechanism_test", "selfplay": {
        "total_steps": 6, "checkpoint_every": 6, "train_designer": train_designer},
        "results_dir": str(tmp / "results")})
    path = tmp / f"mechanism_{train_designer}.yaml"
    path.write_text(yaml.safe_dump(merged))
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mechanism")
    config = mechanism_config(tmp)
    model = tmp / "model"
    subprocess.run([PYTHON, "-m", "spade.cli", "model", "prepare", "--config", str(config), "--out", str(model)],
                   check=True, cwd=ROOT, capture_output=True)
    return tmp, config, model


def train(prepared, mutation: str, name: str | None = None) -> Path:
    tmp, config, model = prepared
    run_dir = tmp / (name or mutation)
    done = subprocess.run([PYTHON, str(ROOT / "tests/mechanism_mutants.py"), mutation, "train", "--backend", "local",
                           "--config", str(config), "--model", str(model), "--corpus", "", "--run-dir", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def verdict(run_dir: Path, config: Path) -> tuple[list, tuple]:
    metrics = read_metrics(run_dir / "metrics.jsonl")
    return integrity(read_sets(run_dir), metrics, load_config(config), trained=True), nonzero_rounds(metrics)


@pytest.fixture(scope="module")
def unmutated(prepared) -> Path:
    return train(prepared, "none")


def test_unmutated_run_passes_the_integrity_rows(prepared, unmutated):
    run_dir = unmutated
    failures, (nonzero, trained) = verdict(run_dir, prepared[1])
    assert failures == []
    assert trained == 3 and nonzero >= 2  # sets 0, 2 and 4 trained; the template's rewards differ within a set
    rounds = design_rounds(read_sets(run_dir), MARKER)
    assert [r.step for r in rounds] == [0, 2, 4]
    assert all(r.mean_need is not None and r.accuracy is not None for r in rounds)


def wall_clock(key: str) -> bool:
    """The fields that time the work (phase seconds, tokens per second, a validation's milliseconds): the only
    ones that may differ between two runs of one config."""
    return key.endswith(("_seconds", "_per_s", "elapsed_ms"))


def without_clock(value):
    """``value`` (parsed JSON) with every ``wall_clock`` field removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_clock(v) for k, v in value.items() if not wall_clock(k)}
    if isinstance(value, list):
        return [without_clock(v) for v in value]
    return value


def test_two_runs_of_one_config_agree_bit_for_bit(prepared, unmutated):
    """train.deterministic (issue 48): the same config trained twice on one machine gives the same metrics at every
    step, the same environment sets and the same final weights and optimizer state, bit for bit. Mutation seen
    failing: the option's default set to false (torch's atomic index_put backward; the runs parted at step 3)."""
    again = train(prepared, "none", name="none_again")
    first, second = read_metrics(unmutated / "metrics.jsonl"), read_metrics(again / "metrics.jsonl")
    assert len(first) == len(second) == 6
    for a, b in zip(first, second):
        differ = sorted(k for k in a.keys() | b.keys() if not wall_clock(k) and a.get(k) != b.get(k))
        assert not differ, (a["step"], {k: (a.get(k), b.get(k)) for k in differ})
    sets = sorted(p.name for p in (unmutated / "envs").glob("set_*.json"))
    assert sets and sets == sorted(p.name for p in (again / "envs").glob("set_*.json"))
    for name in sets:
        read = (json.loads((run / "envs" / name).read_text()) for run in (unmutated, again))
        assert without_clock(next(read)) == without_clock(next(read)), name
    from safetensors.torch import load_file

    final = "checkpoints/step_000006"
    weights = load_file(unmutated / final / "model.safetensors"), load_file(again / final / "model.safetensors")
    assert weights[0].keys() == weights[1].keys()
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key
    states = [torch.load(run / final / "optimizer.pt", weights_only=True)["state"] for run in (unmutated, again)]
    assert states[0] and states[0].keys() == states[1].keys()
    for param in states[0]:
        for key, value in states[0][param].items():
            assert torch.equal(value, states[1][param][key]), (param, key)


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_mutation_fails_the_check(prepared, mutation):
    failures, (nonzero, trained) = verdict(train(prepared, mutation), prepared[1])
    caught = {
        "zero_advantages": nonzero == 0,  # property 1: no design round trained with a nonzero advantage
        "band_outside": any("designer reward" in f and "recipe gives" in f for f in failures),
        "flip_regret": any("regret" in f and "Eq. 3" in f for f in failures),
        "drop_designer": trained == 0 and any("delayed update" in f for f in failures),
        "wrong_set": any("delayed update" in f for f in failures),
    }
    assert caught[mutation], (failures, nonzero, trained)


def test_a_designer_drawing_its_difficulty_uniformly_fails_a_and_c(prepared):
    """Issue 48's added mutation: the designed NEED drawn uniformly (its samples still train) holds no more learnable
    environments than the control's (a), and its difficulty does not rise (c)."""
    tmp, _, model = prepared
    uniform = train(prepared, "uniform_designer")
    control = train((tmp, mechanism_config(tmp, train_designer=False), model), "none", name="control")
    runs = [(design_rounds(read_sets(run), MARKER), read_metrics(run / "metrics.jsonl")) for run in (uniform, control)]
    assert {slot_need for r in runs[0][0] for slot_need in r.needs} <= {1, 2, 3, 4}
    rows, ok = properties({0: runs[0]}, {0: runs[1]})
    assert {name[:3] for name, *_, holds in rows if not holds} >= {"(a)", "(c)"}, rows


def test_control_config_differs_only_in_designer_training(tmp_path):
    """The default config's mechanism pairs: each control is its trained run with selfplay.train_designer false."""
    data = yaml.safe_load((ROOT / "configs/default.yaml").read_text())["mechanism_check"]
    for seed in range(3):
        trained, control = data[f"toy_mechanism_s{seed}"], data[f"toy_mechanism_control_s{seed}"]
        assert trained["seed"] == control["seed"] == seed
        assert trained["selfplay"]["train_designer"] and not control["selfplay"]["train_designer"]
        assert {**control, "selfplay": {**control["selfplay"], "train_designer": True}} == trained
