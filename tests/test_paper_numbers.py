"""Quoted numbers (spade.paper.numbers, paper/scripts/num_*.py) on hand-made run folders with known answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from paper_scripts import load_script

from spade.paper import numbers as pn
from spade.paper.report import ReportInputError, sidecar_path

ROOT = Path(__file__).resolve().parents[1]
REPORTED = ROOT / "paper" / "reported"
PROV = {"config_hash": "0123456789abcdef", "git_commit": "abc123", "seed": 7, "eval_seed": 99}
B30 = "Qwen3-30B-A3B-Instruct-2507"
# the 8 Table 1 columns as (benchmark, metric)
GAMES = [("aime", "avg@32/2025"), ("aime", "avg@32/2026"), ("gpqa_diamond", "accuracy"), ("livecodebench", "pass@1"),
         ("reasoning_gym_hard", "math"), ("reasoning_gym_hard", "algorithmic"), ("reasoning_gym_hard", "cognition"),
         ("reasoning_gym_hard", "logic")]
BASE_30 = [0.61, 0.73, 0.70, 0.43, 0.45, 0.18, 0.23, 0.67]  # percent sum 400: average 50.0
SPADE_30 = [0.63, 0.75, 0.76, 0.47, 0.64, 0.32, 0.38, 0.73]  # sum 468: average 58.5, gain +8.5
GRPO_30 = [0.60, 0.72, 0.70, 0.44, 0.48, 0.20, 0.25, 0.69]  # sum 408: average 51.0, SPADE margin +7.5


# ----- fixtures ---------------------------------------------------------------------------------------------
def write_evals(runs_root: Path, run: str, step: int, values: list[float], parts=GAMES) -> None:
    by_bench: dict[str, list] = {}
    for (bench, metric), value in zip(parts, values):
        by_bench.setdefault(bench, []).append({"run": run, "step": step, "benchmark": bench, "metric": metric,
                                               "value": value, "n": 10, "stderr": 0.01})
    for bench, rows in by_bench.items():
        path = runs_root / run / "eval" / bench / f"step_{step:06d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run": run, "rows": rows, "provenance": PROV}))
    trained(runs_root, run)


def trained(runs_root: Path, run: str, card: str = "qwen3-30b-a3b-instruct-2507", steps: int = 400) -> None:
    """summary.json as a trainer writes it: the model card and step budget (a 30B run at the paper's 400 steps)."""
    (runs_root / run).mkdir(parents=True, exist_ok=True)
    (runs_root / run / "summary.json").write_text(json.dumps({"run": run, "model_card": card, "steps": steps,
                                                              "provenance": PROV}))


def select(runs_root: Path, run: str, step: int) -> None:
    (runs_root / run / "selected_checkpoint.json").write_text(json.dumps({"run": run, "step": step}))


def write_mapping(path: Path, numbers: dict, **top) -> Path:
    path.write_text(yaml.safe_dump({"default_step": "selected", **top, "numbers": numbers}, sort_keys=False))
    return path


def write_sets(runs_root: Path, run: str, sets: dict) -> Path:
    folder = runs_root / run
    (folder / "envs").mkdir(parents=True, exist_ok=True)
    for step, envs in sets.items():
        (folder / "envs" / f"set_{step:05d}.json").write_text(json.dumps({"environments": envs}))
    trained(runs_root, run)
    return folder


def env(step, env_id, code="", win_rate=0.5, source="designer", valid=True, rewards=(0.0,), reports=(), **extra):
    return {"step": step, "env_id": env_id, "skill": "logic", "source": source, "code": code, "class_name": None,
            "valid": valid, "wins": None, "episodes": 8 if valid else 0, "win_rate": win_rate,
            "distinct_rewards": list(rewards), "reports": list(reports), **extra}


def report(reason="ok", changes=(), valid=None):
    return {"reason": reason, "valid": reason == "ok" if valid is None else valid, "changes": list(changes)}


def macros(tex: str) -> dict[str, str]:
    return dict(re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*?)\}  %", tex, flags=re.MULTILINE))


def run_script(group: str, mapping: Path, runs_root: Path, out_dir: Path) -> tuple[dict, dict]:
    out = out_dir / f"{group}.tex"
    load_script(f"num_{group}").main(["--mapping", str(mapping), "--runs-root", str(runs_root), "--reported-dir",
                                      str(REPORTED), "--out", str(out)])
    return macros(out.read_text()), json.loads(sidecar_path(out).read_text())


# ----- benchmark numbers (Tables 1, 6) ---------------------------------------------------------------------
def test_games_gain_and_margins_from_run_folders(tmp_path):
    runs_root = tmp_path / "runs"
    write_evals(runs_root, "g30", 0, BASE_30)
    write_evals(runs_root, "g30", 100, SPADE_30)
    write_evals(runs_root, "g30", 300, [0.99] * 8)  # a later checkpoint the selection did not pick
    select(runs_root, "g30", 100)
    write_evals(runs_root, "grpo30", 200, GRPO_30)
    mapping = write_mapping(tmp_path / "map.yaml", {"games_gain": {"backbones": {"30B": {
        "reported": B30, "base": "g30", "spade": "g30", "fixed_env_grpo": {"run": "grpo30", "step": 200},
        "fixed_env_rlve": "rlve30"}}}})  # rlve30 has no folder
    got, sidecar = run_script("games_gain", mapping, runs_root, tmp_path / "out")
    assert got["NumGamesAvgBaseThirtyB"] == "50.0" and got["NumGamesAvgBaseThirtyBReported"] == "50.2"
    assert got["NumGamesAvgSpadeThirtyB"] == "58.5" and got["NumGamesAvgSpadeThirtyBReported"] == "58.3"
    assert got["NumGamesGainSpadeThirtyB"] == "+8.5" and got["NumGamesGainSpadeThirtyBReported"] == "+8.1"
    assert got["NumGamesAvgGrpoThirtyB"] == "51.0"
    assert got["NumGamesMarginGrpoThirtyB"] == "+7.5" and got["NumGamesMarginGrpoThirtyBReported"] == "+6.9"
    assert got["NumGamesAvgRlveThirtyB"] == r"\textit{not run}"
    assert got["NumGamesMarginRlveThirtyB"] == r"\textit{not run}"
    assert got["NumGamesMarginRlveThirtyBReported"] == "+5.3"  # 58.3 - 53.0
    missing = {m["macro"]: m for m in sidecar["missing"]}
    assert set(missing) == {"NumGamesAvgRlveThirtyB", "NumGamesMarginRlveThirtyB"}
    assert "rlve30" in missing["NumGamesAvgRlveThirtyB"]["reason"]
    spade = next(n for n in sidecar["numbers"] if n["macro"] == "NumGamesAvgSpadeThirtyB")
    assert spade["detail"]["steps"] == [100] and spade["value"] == pytest.approx(58.5)
    assert sidecar["runs"]["g30"]["config_hash"] == PROV["config_hash"]
    assert any(i["path"].endswith("g30/eval/aime/step_000100.json") for i in sidecar["inputs"])


def test_toy_numbers_carry_a_mark_and_their_paragraph_a_banner(tmp_path):
    """The toy run mapped onto the 30B numbers: every value of ours from it reads "<value>\\textsuperscript{toy}", the
    group's \\NumGamesGainScale macro (printed at the top of the paragraph in paper/main.tex) holds the banner, and
    the sidecar names the run's scale; from a 30B run at 400 steps the macro is empty."""
    runs_root = tmp_path / "runs"
    write_evals(runs_root, "toy", 0, BASE_30)
    write_evals(runs_root, "toy", 4, SPADE_30)
    select(runs_root, "toy", 4)
    trained(runs_root, "toy", card="smollm2-135m", steps=4)
    mapping = write_mapping(tmp_path / "map.yaml", {"games_gain": {"backbones": {"30B": {
        "reported": B30, "base": "toy", "spade": "toy", "fixed_env_grpo": None, "fixed_env_rlve": None}}}})
    got, sidecar = run_script("games_gain", mapping, runs_root, tmp_path / "out")
    assert got["NumGamesAvgSpadeThirtyB"] == r"58.5\textsuperscript{toy}" and got["NumGamesAvgSpadeThirtyBReported"] == "58.3"
    assert got["NumGamesGainSpadeThirtyB"] == r"+8.5\textsuperscript{toy}"
    assert got["NumGamesAvgGrpoThirtyB"] == r"\textit{not run}"  # nothing to mark
    assert "TOY SCALE, NOT COMPARABLE: values of ours come from run toy: smollm2-135m, 4 steps" in got["NumGamesGainScale"]
    spade = next(n for n in sidecar["numbers"] if n["macro"] == "NumGamesAvgSpadeThirtyB")
    assert spade["toy_scale"] == ["smollm2-135m, 4 steps"]
    trained(runs_root, "toy", card="qwen3-30b-a3b-instruct-2507", steps=400)
    got, _ = run_script("games_gain", mapping, runs_root, tmp_path / "out")
    assert got["NumGamesAvgSpadeThirtyB"] == "58.5" and got["NumGamesGainScale"] == ""


def test_designer_reward_no_data_when_a_benchmark_is_missing(tmp_path):
    runs_root = tmp_path / "runs"
    write_evals(runs_root, "g30", 100, SPADE_30)
    select(runs_root, "g30", 100)
    write_evals(runs_root, "lp30", 50, GRPO_30[4:], parts=GAMES[4:])  # AIME, GPQA, LCB never evaluated
    select(runs_root, "lp30", 50)
    mapping = write_mapping(tmp_path / "map.yaml", {"designer_reward": {"hint_regret": "g30",
                                                                        "learning_potential": "lp30"}})
    got, sidecar = run_script("designer_reward", mapping, runs_root, tmp_path / "out")
    assert got["NumDesignerAvgRegret"] == "58.5" and got["NumDesignerAvgRegretReported"] == "58.3"
    assert got["NumDesignerAvgLearningPotential"] == r"\textit{no data}"
    assert got["NumDesignerAvgLearningPotentialReported"] == "55.9"
    assert got["NumDesignerRegretMargin"] == r"\textit{no data}" and got["NumDesignerRegretMarginReported"] == "+2.4"
    reason = {m["macro"]: m["reason"] for m in sidecar["missing"]}["NumDesignerAvgLearningPotential"]
    assert "aime" in reason


# ----- environment-archive numbers ---------------------------------------------------------------------------
PHYSICS_REVEAL = '''
class Cart:
    """A cart on an inclined plane with friction: find its acceleration and velocity."""
    def reset(self, seed=None):
        return "A cart slides down. Use F = m * a to find the acceleration.", {}
    def step(self, action):
        return "", 0.0, True, False, {}
'''
PHYSICS_HIDDEN = PHYSICS_REVEAL.replace("Use F = m * a to find the acceleration.", "Its speed is v = 12 m/s.")
NOT_PHYSICS = '''
class Guess:
    """Guess a hidden number."""
    def reset(self, seed=None):
        return "Guess x. Hint: y = a + b", {}
    def step(self, action):
        return "", 0.0, True, False, {}
'''


def test_learnable_share_reward_levels_and_formula_reveal(tmp_path):
    runs_root = tmp_path / "runs"
    write_sets(runs_root, "r", {
        0: [env(0, "a", PHYSICS_REVEAL, 0.5, rewards=(0.0, 1.0)), env(0, "b", PHYSICS_HIDDEN, 0.9, rewards=(0.0,)),
            env(0, "c", NOT_PHYSICS, 0.1, rewards=(0.0, 0.5, 1.0)),
            env(0, "d", "", None, valid=False)],  # empty slot: counts 0 in the learnable share
        2: [env(2, "e", PHYSICS_REVEAL, 0.3, rewards=(0.0, 0.25, 0.5, 1.0)),
            env(2, "f", PHYSICS_REVEAL, 0.4, source="backfill:x", rewards=(0.0, 0.5))],  # not designer output
    })
    mapping = write_mapping(tmp_path / "map.yaml", {
        "learnable_share": {"run": "r"}, "formula_reveal": {"run": "r"}, "reward_levels": {"run": "r"}},
        phases={"early": [0, 1], "mid": [2, 2], "late": [3, 4]})
    got, sidecar = run_script("learnable_share", mapping, runs_root, tmp_path / "out")
    assert got["NumLearnableShareEarly"] == "0.25"  # 1 learnable (a) of 4 slots
    assert got["NumLearnableShareMid"] == "1.00"  # e and f of 2 slots
    assert got["NumLearnableShareEarlyReported"] == "0.16" and got["NumLearnableShareLateReported"] == "0.31"
    assert got["NumLearnableShareLate"] == r"\textit{no data}"
    assert [m["macro"] for m in sidecar["missing"]] == ["NumLearnableShareLate"]

    got, sidecar = run_script("formula_reveal", mapping, runs_root, tmp_path / "out")
    assert got["NumFormulaRevealEarly"] == r"50\,\%"  # a reveals, b does not; c is not physics
    assert got["NumFormulaPhysicsEnvsEarly"] == "2"
    assert got["NumFormulaRevealMid"] == r"100\,\%"  # e only: f was backfilled
    assert got["NumFormulaRevealEarlyReported"] == r"25\,\%" and got["NumFormulaRevealLateReported"] == r"5\,\%"
    assert got["NumFormulaRevealLate"] == r"\textit{no data}"

    got, _ = run_script("reward_levels", mapping, runs_root, tmp_path / "out")
    assert got["NumRewardLevelsEarly"] == "2.0"  # (2 + 1 + 3) / 3 played valid environments
    assert got["NumPartialLevelsEarly"] == "0.3"  # (0 + 0 + 1) / 3
    assert got["NumRewardLevelsLate"] == r"\textit{no data}" and got["NumRewardLevelsLateReported"] == "5.8"
    assert got["NumPartialLevelsEarlyReported"] == "2.2"


def test_executability_classes():
    reports = [report("ok"), report("load_failed", ["took first ```python block (1 fenced block(s) found)"]),
               report("ok", ["removed 1 stray fence line(s)"]),
               report("ok", ["removed 2 stray fence line(s)", "escaped lone '}' in f-string on line 3"]),
               report("no_env_class", ["escaped literal braces {x} in f-string on line 9"]),
               report("ok", [("escaped literal braces {answer} in f-string on line 4 ('answer' is not defined in "
                              "the module)")]),  # made to code that already compiled: raw
               report("syntax_error"), report("empty"), report("too_large"), report("syntax_error")]
    attempt_executability = load_script("num_valid_env_rate").attempt_executability
    got = attempt_executability(reports)
    assert (got["raw"], got["fence"], got["brace"], got["failed"], got["attempts"]) == (3, 1, 2, 4, 10)
    assert got["raw_share"] == 0.3 and got["after_fence_share"] == 0.4 and got["brace_share"] == 0.2
    assert got["compiled_share"] == 0.6
    with pytest.raises(ReportInputError, match="reason"):
        attempt_executability([{"valid": True}])


def test_valid_env_rate_and_executability_from_archives(tmp_path):
    runs_root = tmp_path / "runs"
    write_sets(runs_root, "r", {
        0: [env(0, "a", reports=[report("syntax_error"), report("ok", ["removed 1 stray fence line(s)"])]),
            env(0, "b", source="backfill:x", reports=[report("reset_failed"), report("syntax_error")])],
        4: [env(4, "c", reports=[report("ok")]), env(4, "d", valid=False, reports=[
            report("step_failed", ["escaped unmatched '{' in f-string on line 2"])])],
    })
    mapping = write_mapping(tmp_path / "map.yaml", {"valid_env_rate": {"run": "r"}})
    got, sidecar = run_script("valid_env_rate", mapping, runs_root, tmp_path / "out")
    # 6 attempts, 2 valid: 33.3 %, Wilson 95 % [9.68 %, 70.00 %]
    assert got["NumDesignAttempts"] == "6" and got["NumValidEnvRate"] == r"33.3\,\%"
    assert got["NumValidEnvRateLow"] == r"9.7\,\%" and got["NumValidEnvRateHigh"] == r"70.0\,\%"
    assert got["NumValidEnvRateReported"] == "---"
    # raw: ok (c), reset_failed -> 2 of 6; fence: +1 -> 3 of 6; brace: 1 of 6; failed: 2
    assert got["NumExecRaw"] == r"33.3\,\%" and got["NumExecRawReported"] == r"84.9\,\%"
    assert got["NumExecAfterFence"] == r"50.0\,\%" and got["NumExecAfterFenceReported"] == r"90.3\,\%"
    assert got["NumExecBraceFurther"] == r"+16.7\,\%" and got["NumExecBraceFurtherReported"] == r"+7.4\,\%"
    assert got["NumExecCompiled"] == r"66.7\,\%"
    assert sidecar["missing"] == []


def test_vendi_per_n_reuses_table8_with_given_embedders(tmp_path):
    runs_root = tmp_path / "runs"
    write_sets(runs_root, "c", {0: [env(0, x, f"class E{x}: pass") for x in "abc"]})
    mapping = write_mapping(tmp_path / "map.yaml", {"vendi_per_n": {
        "corpus": "c", "no_corpus": None, "vendi": {"size": 2, "draws": 3, "balance_by": "none", "seed": 0}}})
    same = {"sbert": lambda texts: np.ones((len(texts), 4)), "tfidf_lsa": lambda texts: np.ones((len(texts), 4))}
    _, numbers, _ = pn.build_group(load_script("num_vendi_per_n").GROUP, mapping, runs_root, REPORTED, embedders=same)
    got = {n.macro: n.shown() for n in numbers}
    assert got["NumVendiPerNCorpus"] == "0.50"  # identical environments: Vendi score 1, per 2 environments
    assert got["NumVendiEnvsCorpus"] == "3"
    assert got["NumVendiPerNNoCorpus"] == r"\textit{not run}" and got["NumVendiEnvsNoCorpus"] == r"\textit{not run}"
    reported = {n.macro: n.shown_reported() for n in numbers}
    assert reported["NumVendiPerNCorpus"] == "0.68" and reported["NumVendiPerNNoCorpus"] == "0.04"


def test_missing_run_prints_not_run_and_is_listed(tmp_path):
    mapping = write_mapping(tmp_path / "map.yaml", {"reward_levels": {"run": "gone"}},
                            phases={"early": [0, 1], "late": [2, 3]})
    got, sidecar = run_script("reward_levels", mapping, tmp_path / "runs", tmp_path / "out")
    assert {v for k, v in got.items() if not k.endswith(("Reported", "Scale"))} == {r"\textit{not run}"}
    assert len(sidecar["missing"]) == 4 and all("gone" in m["reason"] for m in sidecar["missing"])
    text = (tmp_path / "out" / "reward_levels.tex").read_text()
    assert text.startswith("% Quoted numbers 'reward_levels'") and "paper_number_reward_levels" in text
    assert str(tmp_path) not in text and str(Path.cwd()) not in text  # no path of this machine in the PDF's input
    assert "gone (not run)" in text and text.isascii()


# ----- the mapping, names and formatting ---------------------------------------------------------------------
@pytest.mark.parametrize("numbers, top, key", [
    ({"reward_levels": {"run": "r", "colour": 1}}, {}, "numbers.reward_levels.colour"),
    ({"games": {}}, {}, "numbers.games"),
    ({}, {"phase": {}}, "phase"),
    ({"games_gain": {"backbones": {"30B": {"reported": B30, "base": "a", "spade": "a", "fixed_env_grpo": None,
                                           "fixed_env_rlve": None, "extra": 1}}}}, {},
     "numbers.games_gain.backbones.30B.extra"),
    ({"learnable_share": {"run": "r", "phases": {"Early": [0, 1]}}}, {}, "numbers.learnable_share.phases.Early"),
    ({"valid_env_rate": {"run": "r", "confidence": 2}}, {}, "numbers.valid_env_rate.confidence"),
    ({"designer_reward": {"hint_regret": {"run": "a", "step": "best"}, "learning_potential": None}}, {},
     "numbers.designer_reward.hint_regret.step"),
])
def test_mapping_errors_name_file_key_and_allowed(tmp_path, numbers, top, key):
    path = write_mapping(tmp_path / "map.yaml", numbers, **top)
    with pytest.raises(ReportInputError) as err:
        pn.load_number_runs(path)
    assert str(path) in str(err.value) and f"'{key}'" in str(err.value)
    if "known" in str(err.value):
        assert "(known: " in str(err.value)


def test_group_missing_from_mapping(tmp_path):
    path = write_mapping(tmp_path / "map.yaml", {})
    with pytest.raises(ReportInputError, match="numbers.valid_env_rate' is missing"):
        pn.build_group(load_script("num_valid_env_rate").GROUP, path, tmp_path, REPORTED)


def test_macro_words_and_formatting():
    assert pn.macro_word("30B") == "ThirtyB" and pn.macro_word("4B") == "FourB" and pn.macro_word("8B") == "EightB"
    assert pn.macro_word("early") == "Early" and pn.macro_word("121B") == "OneHundredTwentyOneB"
    with pytest.raises(ReportInputError):
        pn.macro_word("3/4")
    assert pn.format_value(8.06, 1, signed=True) == "+8.1"
    assert pn.format_value(-2.34, 1, signed=True) == "$-$2.3"
    assert pn.format_value(-0.01, 1) == "0.0" and pn.format_value(-0.01, 1, signed=True) == "+0.0"


def test_shipped_mappings_load_and_name_the_same_runs_as_the_tables():
    paper = pn.load_number_runs(ROOT / "paper" / "number_runs.yaml")
    toy = pn.load_number_runs(ROOT / "paper" / "toy" / "number_runs.yaml")
    assert set(paper["numbers"]) == set(toy["numbers"]) == set(pn.GROUPS)
    from spade.paper.table_runs import BENCHMARK_TABLES, load_table_runs, mapped_runs

    tables = load_table_runs(ROOT / "paper" / "table_runs.yaml")
    table_runs = {r for t in BENCHMARK_TABLES + ("table7", "table8") for r in mapped_runs(tables, t)}
    for group in pn.GROUPS:
        assert set(pn.group_runs(paper, group)) <= table_runs, group
        assert set(pn.group_runs(toy, group)) <= {"toy", "toy_tool_use"}, group  # the tool-use toy: tool_use_gain
    assert set(pn.group_runs(toy, "tool_use_gain")) == {"toy_tool_use"}
    rows = (REPORTED / pn.QUOTED_CSV).read_text().splitlines()
    assert rows[0] == "key,value,unit,where" and len(rows) == 12  # 10 quoted numbers and the figure 18 reference line


def test_main_tex_prints_every_groups_toy_banner():
    """paper/main.tex opens each paragraph of quoted numbers with its group's banner macro, and only with those."""
    used = set(re.findall(r"\\(Num[A-Za-z]+Scale)\b", (Path(__file__).resolve().parents[1] / "paper" / "main.tex").read_text()))
    assert used == {pn.scale_macro(load_script(f"num_{group}").GROUP) for group in pn.GROUPS}
