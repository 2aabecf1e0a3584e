"""Paper tables 1, 2, 3, 5, 6, 7 and 8 (paper/scripts/table*_*.py and the spade.paper modules they share) on hand-made
inputs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from paper_scripts import load_script

from spade.paper.benchmark_tables import TABLE1, TABLE2, TABLE6, build_benchmark_table
from spade.paper.env_tables import mean_pairwise_distance
from spade.paper.report import (
    NOT_RUN,
    TIDY_COLUMNS,
    ReportInputError,
    sidecar_path,
    write_csv_atomic,
)
from spade.paper.table_runs import (
    BENCHMARK_TABLES,
    COLUMN_METRICS,
    ResultIndex,
    load_results,
    load_table_runs,
    mapped_runs,
    run_fingerprint,
)
from spade.paper.tables import BLANK, DIFF, NOT_COMPUTED, OURS, PUBLISHED, render_latex, render_markdown

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "paper" / "scripts"
REPORTED = ROOT / "paper" / "reported"
RECIPES = ROOT / "configs" / "recipes"
PROV = {"config_hash": "0123456789abcdef", "git_commit": "abc123", "seed": 7, "eval_seed": 99}
GAMES = ["aime25", "aime26", "gpqa_diamond", "lcb_v6", "rg_math", "rg_algorithmic", "rg_cognition", "rg_logic"]
B30, B4 = "Qwen3-30B-A3B-Instruct-2507", "Qwen3-4B-Instruct-2507"
STEMS = {"table1": "table1_games", "table2": "table2_tool_use", "table3": "table3_ablations",
         "table6": "table6_ablations_full", "table7": "table7_env_quality", "table8": "table8_diversity"}


# ----- helpers -------------------------------------------------------------------------------------------
def tidy_csv(path: Path, rows: list[tuple]) -> Path:
    """A tidy results table of (run, step, paper column or (benchmark, metric), value) rows."""
    records = []
    for run, step, column, value in rows:
        benchmark, metric = COLUMN_METRICS[column] if isinstance(column, str) else column
        records.append({"run": run, "step": step, "benchmark": benchmark, "metric": metric, "value": value, "n": 10,
                        "stderr": 0.01, **PROV})
    write_csv_atomic(pd.DataFrame(records, columns=TIDY_COLUMNS), path)
    return path


def write_mapping(path: Path, tables: dict, **top) -> Path:
    path.write_text(yaml.safe_dump({"default_step": "selected", **top, "tables": tables}, sort_keys=False))
    return path


def trained(runs_root: Path, run: str, card: str = "qwen3-30b-a3b-instruct-2507", steps: int = 400) -> None:
    """The run's summary.json as a trainer writes it: its model card and step budget (spade.paper.scale)."""
    folder = runs_root / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"run": run, "model_card": card, "steps": steps, "provenance": PROV}))


def select(runs_root: Path, run: str, step: int) -> None:
    folder = runs_root / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "selected_checkpoint.json").write_text(json.dumps({"run": run, "step": step}))


def md_groups(text: str) -> dict:
    """Markdown table -> {first label cell(s): [ours cells, reported cells, diff cells]} (kind cell included)."""
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in text.splitlines()
            if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    n_labels = header.index("Source")
    groups, current = {}, None
    for row in body:
        if any(row[:n_labels]):
            current = tuple(row[:n_labels])
            groups[current] = []
        groups[current].append(row[n_labels:])
    return groups


def check_latex(tex: str) -> None:
    """Basics of valid booktabs LaTeX: rules, balanced braces, one cell count, escaped specials, ASCII only."""
    assert tex.isascii()
    body = [line for line in tex.splitlines() if not line.startswith("%")]
    text = "\n".join(body)
    for command in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}", r"\end{tabular}"):
        assert command in text
    assert text.index(r"\toprule") < text.index(r"\midrule") < text.index(r"\bottomrule")
    assert text.count("{") == text.count("}")
    spec = re.search(r"\\begin\{tabular\}\{([lrc]+)\}", text).group(1)
    for line in body:
        assert not re.search(r"(?<!\\)[_%#]", line), line  # every underscore, percent and hash escaped
        if line.endswith(r"\\"):  # a table row: one cell per column
            assert len(re.split(r"(?<!\\)&", line)) == len(spec), line
        else:
            assert not re.search(r"(?<!\\)&", line), line


def table1_mapping(tmp_path: Path, **row_overrides) -> Path:
    rows = []
    for backbone in (B4, "Qwen3-8B", B30):
        for method in ("base", "fixed_env_grpo", "fixed_env_rlve", "spade_games"):
            entry = {"reported": {"backbone": backbone, "method": method}, "run": None}
            if method != "base":
                entry["base"] = {"backbone": backbone, "method": "base"}
            rows.append(entry)
    rows[8].update(run="g30", step="base")  # 30B base
    rows[9].update(run="grpo30", step=200)  # 30B Fixed-env GRPO, an explicit step
    rows[11].update(run="g30")  # 30B SPADE: the selected checkpoint
    for index, update in row_overrides.items():
        rows[int(index.lstrip("r"))].update(update)
    return write_mapping(tmp_path / "map.yaml", {"table1": {"rows": rows}})


BASE_30 = [0.61, 0.73, 0.70, 0.43, 0.45, 0.18, 0.23, 0.67]  # percent sum 400: average 50.0
SPADE_30 = [0.63, 0.75, 0.76, 0.47, 0.64, 0.32, 0.38, 0.73]  # sum 468: average 58.5, gain 8.5


@pytest.fixture()
def games_results(tmp_path):
    rows = [("g30", 0, c, v) for c, v in zip(GAMES, BASE_30)]
    rows += [("g30", 100, c, v) for c, v in zip(GAMES, SPADE_30)]
    rows += [("g30", 300, c, 0.99) for c in GAMES]  # a later checkpoint the selection did not pick
    rows += [("grpo30", 200, c, 0.5) for c in GAMES[4:]]  # AIME, GPQA and LCB never evaluated
    runs_root = tmp_path / "runs"
    select(runs_root, "g30", 100)
    trained(runs_root, "g30")
    trained(runs_root, "grpo30")
    return tidy_csv(tmp_path / "results.csv", rows), runs_root


def build(spec, mapping_path, results_csv, runs_root, reported=None):
    mapping = load_table_runs(mapping_path)
    tidy, _ = load_results([results_csv] if results_csv else [], runs_root, mapped_runs(mapping, spec.name))
    reported = reported or REPORTED / f"{STEMS[spec.name]}.csv"
    return build_benchmark_table(spec, mapping, reported, ResultIndex(tidy), runs_root)


# ----- Table 1: cells, reported values, differences, marks ------------------------------------------------
def test_table1_cells_reported_and_differences(tmp_path, games_results):
    results, runs_root = games_results
    table, cells = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    groups = md_groups(render_markdown(table))

    ours, reported, diff = groups[(B30, "spade_games")]
    assert ours[0] == "ours, run g30, step 100"  # the selected checkpoint, not the later step 300
    assert ours[1:] == ["63.0", "75.0", "76.0", "47.0", "64.0", "32.0", "38.0", "73.0", "58.5", "8.5"]
    assert reported == ["reported", "62.8", "74.4", "75.8", "47.3", "63.3", "32.1", "37.7", "72.8", "58.3", "8.1"]
    assert diff == ["Δ (ours − reported)", "+0.2", "+0.6", "+0.2", "-0.3", "+0.7", "-0.1", "+0.3", "+0.2", "+0.2",
                    "+0.4"]

    ours, reported, diff = groups[(B30, "base")]
    assert ours[1:] == ["61.0", "73.0", "70.0", "43.0", "45.0", "18.0", "23.0", "67.0", "50.0", "—"]
    assert diff[9] == "-0.2" and diff[10] == "—"  # 50.0 - 50.2; no gain for the base row

    ours, _, diff = groups[(B30, "fixed_env_grpo")]
    assert ours[0] == "ours, run grpo30, step 200"
    assert ours[1:5] == [NOT_RUN] * 4 and ours[5:9] == ["50.0"] * 4
    assert ours[9:] == [NOT_RUN, NOT_RUN]  # the average needs all eight columns
    assert diff[1] == NOT_RUN and diff[5] == "+1.9"  # 50.0 - 48.1

    for method in ("base", "fixed_env_grpo", "fixed_env_rlve", "spade_games"):  # no run mapped
        ours, reported, diff = groups[(B4, method)]
        assert set(ours[1:]) <= {NOT_RUN, "—"} and NOT_RUN in ours
        assert reported[1] == {"base": "47.4", "fixed_env_grpo": "47.1", "fixed_env_rlve": "49.6",
                               "spade_games": "48.9"}[method]
    assert groups[("Qwen3-8B", "fixed_env_rlve")][0][1] == NOT_RUN

    # provenance: one record per cell of ours, traced to the results file and the run's config and commit
    cell = next(c for c in cells if c["row"] == f"backbone={B30}, method=spade_games" and c["column"] == "aime25")
    assert cell["shown"] == "63.0" and cell["reported"] == 62.8
    (result,) = cell["results"]
    assert result["source"] == str(results) and result["step"] == 100 and result["config_hash"] == PROV["config_hash"]
    assert result["git_commit"] == "abc123" and result["seed"] == 7 and result["eval_seed"] == 99
    assert any("no run mapped" in m for m in table.missing)
    assert any("no result at step 200 for aime:avg@32/2025" in m for m in table.missing)


def test_table1_latex_is_booktabs_and_escaped(tmp_path, games_results):
    results, runs_root = games_results
    table, _ = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    tex = render_latex(table, "paper/scripts/table1_games.py")
    check_latex(tex)
    assert r"fixed\_env\_grpo" in tex and r"\textit{not run}" in tex and r"$\Delta$" in tex
    assert "$-$0.3" in tex  # negative differences get a real minus sign


def test_toy_values_under_a_paper_backbone_carry_the_banner_and_no_difference(tmp_path, games_results):
    """The toy mapping puts a SmolLM2-135M, 4-step run on the 30B rows: every value of ours names its run and scale,
    the table opens with the toy-scale banner (Markdown, LaTeX caption, sidecar) and no Δ is computed for it."""
    results, runs_root = games_results
    trained(runs_root, "g30", card="smollm2-135m", steps=4)  # same results, now a toy run
    table, _ = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    text = render_markdown(table)
    groups = md_groups(text)
    ours, _, diff = groups[(B30, "spade_games")]
    assert ours[0] == "ours, run g30, step 100; TOY SCALE: smollm2-135m, 4 steps, not comparable"
    assert ours[1] == "63.0" and set(diff[1:]) == {"—"}
    base, _, base_diff = groups[(B30, "base")]
    assert "TOY SCALE: smollm2-135m" in base[0] and set(base_diff[1:]) == {"—"}  # the wrong model, even untrained
    grpo, _, grpo_diff = groups[(B30, "fixed_env_grpo")]
    assert "TOY SCALE" not in grpo[0] and grpo_diff[5] == "+1.9"  # a paper-scale run keeps its difference
    banner = "TOY SCALE, NOT COMPARABLE: values of ours come from run g30: smollm2-135m, 4 steps"
    assert text.split("\n")[2].startswith(f"> **{banner}") and "Qwen3-30B-A3B-Instruct-2507, 400 steps" in text
    latex = render_latex(table)
    assert r"\caption{\textbf{TOY SCALE, NOT COMPARABLE" in latex
    # the same run at the paper's scale: no banner, differences back
    trained(runs_root, "g30")
    table, _ = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    assert not table.banner and md_groups(render_markdown(table))[(B30, "spade_games")][2][1] == "+0.2"


def test_a_run_without_its_scale_counts_as_not_comparable(tmp_path, games_results):
    results, runs_root = games_results
    (runs_root / "g30" / "summary.json").unlink()  # e.g. trained before summary.json named its model card
    table, _ = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    ours = md_groups(render_markdown(table))[(B30, "spade_games")][0]
    assert ours[0].endswith("TOY SCALE: model unknown, steps unknown, not comparable") and table.banner


def test_step_rules_last_and_replicates(tmp_path, games_results):
    results, runs_root = games_results
    rows = [("g30b", 100, c, v + 0.02) for c, v in zip(GAMES, SPADE_30)]
    second = tidy_csv(tmp_path / "second.csv", rows)
    select(runs_root, "g30b", 100)
    trained(runs_root, "g30b")
    mapping = table1_mapping(tmp_path, r11={"run": ["g30", "g30b"]}, r10={"run": "g30", "step": "last"})
    m = load_table_runs(mapping)
    tidy, _ = load_results([results, second], runs_root, mapped_runs(m, "table1"))
    table, _ = build_benchmark_table(TABLE1, m, REPORTED / "table1_games.csv", ResultIndex(tidy), runs_root)
    groups = md_groups(render_markdown(table))
    ours = groups[(B30, "spade_games")][0]
    assert ours[0] == "ours, run g30, run g30b, step 100, mean of 2 runs" and ours[1] == "64.0"  # mean of 63 and 65
    assert groups[(B30, "fixed_env_rlve")][0][:2] == ["ours, run g30, step 300", "99.0"]  # last = largest step


def test_selected_checkpoint_missing_or_malformed(tmp_path, games_results):
    results, runs_root = games_results
    (runs_root / "g30" / "selected_checkpoint.json").unlink()
    table, _ = build(TABLE1, table1_mapping(tmp_path), results, runs_root)
    ours = md_groups(render_markdown(table))[(B30, "spade_games")][0]
    assert set(ours[1:]) == {NOT_RUN}  # never falls back to another checkpoint
    assert any("selected_checkpoint.json" in m for m in table.missing)
    (runs_root / "g30" / "selected_checkpoint.json").write_text(json.dumps({"step": "best"}))
    with pytest.raises(ReportInputError, match=r"selected_checkpoint.json: key 'step'"):
        build(TABLE1, table1_mapping(tmp_path), results, runs_root)


# ----- Tables 2, 3 and 6 ----------------------------------------------------------------------------------
def test_table2_published_rows_and_averages(tmp_path):
    values = {"bfcl_base": 0.66, "bfcl_miss_func": 0.44, "bfcl_miss_param": 0.38, "bfcl_long_ctx": 0.48,
              "tau2_retail": 0.62, "tau2_airline": 0.50, "tau2_telecom": 0.35, "ace_multi_step": 0.70,
              "ace_multi_turn": 0.54}
    results = tidy_csv(tmp_path / "r.csv", [("tu30", 0, c, v) for c, v in values.items()])
    rows = []
    for size in ("Qwen3-4B-Instruct-2507", "Qwen3-8B", B30):
        rows.append({"reported": {"section": "ours", "model": f"{size} (base)"}, "run": None, "step": "base"})
        rows.append({"reported": {"section": "ours", "model": f"{size} + SPADE (tool use)"}, "run": None,
                     "base": {"section": "ours", "model": f"{size} (base)"}})
    rows[4]["run"] = "tu30"
    trained(tmp_path / "runs", "tu30")
    mapping = write_mapping(tmp_path / "map.yaml", {"table2": {"rows": rows}})
    table, _ = build(TABLE2, mapping, results, tmp_path / "runs")
    text = render_markdown(table)
    assert "| AgentScaler-30B-A3B | reported (published) | — |" in text
    published = [line for line in table.lines() if line.kind == PUBLISHED]
    assert len(published) == 7 and not any(l.kind == OURS and l.labels[0].startswith("AWM") for l in table.lines())
    groups = {tuple(l.labels): l for l in table.lines() if l.kind == OURS}
    ours = groups[(f"{B30} (base)",)].cells
    assert ours[4] == "49.0" and ours[8] == "49.0" and ours[11] == "62.0" and ours[12] == "53.3" and ours[13] == "—"
    diff = next(l for l in table.lines() if l.kind == DIFF and table.lines().index(l) > table.lines().index(
        groups[(f"{B30} (base)",)]))
    assert diff.cells[12] == "+0.0"  # 53.33 - 53.3, from unrounded ours
    check_latex(render_latex(table))


def test_table3_and_table6_share_runs_and_show_checkpoint(tmp_path, games_results):
    results, runs_root = games_results
    extra = tidy_csv(tmp_path / "gem.csv", [("g30", 100, "gem", 0.52)])
    settings = ["base (Qwen3-30B-A3B-Instruct-2507)", "spade", "ED reward = learning potential", "2-skill curriculum",
                "w/o corpus grounding", "w/o memory", "w/o ED training and memory", "fixed ED (GPT-5.5)"]
    rows6 = [{"reported": {"setting": s}, "run": None} for s in settings]
    rows6[0].update(run="g30", step="base")
    rows6[1].update(run="g30")
    rows3 = [r for r in rows6 if r["reported"]["setting"] not in settings[2:4]]
    mapping = write_mapping(tmp_path / "map.yaml", {"table3": {"rows": rows3}, "table6": {"rows": rows6}})
    m = load_table_runs(mapping)
    tidy, _ = load_results([results, extra], runs_root, ["g30"])
    t6, cells6 = build_benchmark_table(TABLE6, m, REPORTED / "table6_ablations_full.csv", ResultIndex(tidy),
                                       runs_root)
    g6 = md_groups(render_markdown(t6))
    ours, reported, diff = g6[("spade",)]
    assert ours[1] == "100" and reported[1] == "303" and diff[1] == "—"  # checkpoint: ours, the paper's, no Δ
    assert ours[10] == "52.0" and diff[10] == "+1.8" and ours[11] == "58.5"  # GEM is not in the average
    assert g6[("2-skill curriculum",)][0][1:] == [NOT_RUN] * 11
    assert g6[("ED reward = learning potential",)][1][1] == "—"  # the paper gives no checkpoint
    assert any(c["column"] == "checkpoint" and c["sources"] for c in cells6)
    t3, _ = build_benchmark_table(load_script("table3_ablations").TABLE3, m, REPORTED / "table3_ablations.csv",
                                  ResultIndex(tidy), runs_root)
    g3 = md_groups(render_markdown(t3))
    assert g3[("spade", "self", "yes", "yes", "yes")][0][1:] == ["63.0", "75.0", "76.0", "47.0", "64.0", "32.0",
                                                                   "38.0", "73.0", "58.5"]
    check_latex(render_latex(t3))
    check_latex(render_latex(t6))


def test_results_from_run_folders(tmp_path):
    """The rules read run folders: eval/<benchmark>/step_N.json files, each cell traced to its file."""
    runs_root = tmp_path / "runs"
    for step, value in ((0, 0.4), (100, 0.6)):
        path = runs_root / "g30" / "eval" / "reasoning_gym_hard" / f"step_{step:06d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{"run": "g30", "step": step, "benchmark": "reasoning_gym_hard", "metric": m, "value": value, "n": 100,
                 "stderr": 0.05} for m in ("math", "algorithmic", "cognition", "logic")]
        path.write_text(json.dumps({"run": "g30", "rows": rows, "provenance": PROV}))
    select(runs_root, "g30", 100)
    table, cells = build(TABLE1, table1_mapping(tmp_path), None, runs_root)
    ours = md_groups(render_markdown(table))[(B30, "spade_games")][0]
    assert ours[1:5] == [NOT_RUN] * 4 and ours[5:9] == ["60.0"] * 4
    cell = next(c for c in cells if c["column"] == "rg_math" and "spade_games" in c["row"])
    assert cell["results"][0]["source"].endswith("eval/reasoning_gym_hard/step_000100.json")


# ----- bad inputs -----------------------------------------------------------------------------------------
def test_mapping_errors_name_file_and_key(tmp_path):
    good = {"reported": {"backbone": B30, "method": "base"}, "run": "g30"}
    cases = [
        ({"table1": {"rows": [{**good, "colour": "red"}]}}, r"tables\.table1\.rows\[0\]\.colour"),
        ({"table1": {"rows": [{**good, "step": "best"}]}}, r"tables\.table1\.rows\[0\]\.step"),
        ({"table1": {"rows": [{"reported": good["reported"]}]}}, r"tables\.table1\.rows\[0\]\.run"),
        ({"table9": {}}, r"tables\.table9"),
        ({"table7": {"run": "a", "phases": {"early_steps_0_40": [40, 0]}}}, r"tables\.table7\.phases"),
        ({"table8": {"rows": [], "vendi": {"balance_by": "phase"}}}, r"tables\.table8\.vendi\.balance_by"),
    ]
    for tables, key in cases:
        path = write_mapping(tmp_path / "bad.yaml", tables)
        with pytest.raises(ReportInputError, match=rf"bad\.yaml: key '{key}"):
            load_table_runs(path)
    with pytest.raises(ReportInputError, match=r"key 'metrics\.aime27'"):
        load_table_runs(write_mapping(tmp_path / "bad.yaml", {}, metrics={"aime27": "aime:x"}))
    with pytest.raises(ReportInputError, match="missing run mapping"):
        load_table_runs(tmp_path / "absent.yaml")


def test_mapping_must_cover_the_reported_rows(tmp_path):
    results = tidy_csv(tmp_path / "r.csv", [])
    short = write_mapping(tmp_path / "m.yaml", {"table1": {"rows": [
        {"reported": {"backbone": B30, "method": "base"}, "run": "g30"}]}})
    with pytest.raises(ReportInputError, match=r"m\.yaml: key 'tables\.table1\.rows' has no entry for .*method=base"):
        build(TABLE1, short, results, None)
    typo = table1_mapping(tmp_path, r0={"reported": {"backbone": "Qwen3-4B", "method": "base"}})
    with pytest.raises(ReportInputError, match=r"rows\[0\]\.reported' \(backbone=Qwen3-4B, method=base\) matches"):
        build(TABLE1, typo, results, None)
    with pytest.raises(ReportInputError, match=r"key 'tables\.table2' is missing"):
        build(TABLE2, short, results, None)


def test_reported_and_results_errors(tmp_path, games_results):
    results, runs_root = games_results
    bad = tmp_path / "reported.csv"
    bad.write_text((REPORTED / "table1_games.csv").read_text().replace("61.5", "sixty"))
    with pytest.raises(ReportInputError, match=r"reported\.csv, line 10, column aime25: 'sixty' is not a number"):
        build(TABLE1, table1_mapping(tmp_path), results, runs_root, reported=bad)
    bad.write_text("backbone,method,aime25\n")
    with pytest.raises(ReportInputError, match=r"reported\.csv lacks the column\(s\) aime26"):
        build(TABLE1, table1_mapping(tmp_path), results, runs_root, reported=bad)
    other = tidy_csv(tmp_path / "other.csv", [("g30", 0, "aime25", 0.1)])
    with pytest.raises(ReportInputError, match=r"different values in .*other\.csv and .*results\.csv"):
        load_results([results, other])
    load_results([results, results])  # the same values twice are fine


def test_script_exit_codes_and_sidecar(tmp_path, games_results):
    results, runs_root = games_results
    out = tmp_path / "tables" / "table1_games.md"
    args = [sys.executable, str(SCRIPTS / "table1_games.py"), "--mapping", str(table1_mapping(tmp_path)),
            "--reported", str(REPORTED / "table1_games.csv"), "--runs-root", str(runs_root), "--results", str(results),
            "--out", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert out.is_file() and out.with_suffix(".tex").is_file()
    record = json.loads(sidecar_path(out).read_text())
    assert record["script"] == "paper/scripts/table1_games.py" and record["paper_table"] == "table1"
    paths = {Path(entry["path"]).name for entry in record["inputs"]}
    assert {"map.yaml", "table1_games.csv", "results.csv", "selected_checkpoint.json"} <= paths
    assert record["runs"]["g30"]["config_hash"] == [PROV["config_hash"]]
    assert {Path(o["path"]).suffix for o in record["outputs"]} == {".md", ".tex"}
    bad = subprocess.run(args[:3] + [str(tmp_path / "nope.yaml")] + args[4:], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert bad.returncode == 2 and "nope.yaml" in bad.stderr and "Traceback" not in bad.stderr


# ----- Table 5: from the recipes -------------------------------------------------------------------------
def test_table5_matches_the_paper_and_follows_the_recipes(tmp_path):
    build_table5 = load_script("table5_hyperparameters").build_table5
    reported = REPORTED / "table5_hyperparameters.csv"
    recipes = {"games": RECIPES / "games.yaml", "tool_use": RECIPES / "tool_use.yaml"}
    table, _ = build_table5(recipes, reported)
    rows = {line.labels[0]: line.cells for line in table.lines()}
    assert len(rows) == 24
    assert rows["learning_rate"] == ["1e-06 (constant)", "1e-06 (constant)", "1e-6 (constant)", "same", "same"]
    assert rows["regeneration_interval_k"] == ["4", "8", "4 (tool use 8)", "same", "same"]
    assert rows["reward_normalization"][3:] == ["n/a", "n/a"]
    assert rows["ed_update_delay"][3:] == ["same", "differs"]  # the delay is k, and k is 8 for tool use
    others = {k for k, v in rows.items() if v[3] != "same"}
    assert others == {"reward_normalization"}
    check_latex(render_latex(table))

    changed = tmp_path / "games.yaml"
    changed.write_text(recipes["games"].read_text().replace("learning_rate: 1.0e-6", "learning_rate: 2.0e-6")
                       .replace("cap: 200", "cap: 150"))
    table2, _ = build_table5({**recipes, "games": changed}, reported)
    rows2 = {line.labels[0]: line.cells for line in table2.lines()}
    assert rows2["learning_rate"][0] == "2e-06 (constant)" and rows2["learning_rate"][3] == "differs"
    assert rows2["env_memory"][0] == "on (cap 150)" and rows2["env_memory"][3] == "differs"
    assert {k for k, v in rows2.items() if v != rows[k]} == {"learning_rate", "env_memory"}

    changed.write_text(recipes["games"].read_text().replace("group_size: 16", "group_sise: 16"))
    with pytest.raises(ReportInputError, match=r"recipe .*games\.yaml: .*group_sise"):
        build_table5({**recipes, "games": changed}, reported)


def test_hyperparameter_number_reading():
    text_numbers = load_script("table5_hyperparameters").text_numbers
    assert text_numbers("15k docs (10k math + 5k science)") == [15000.0, 10000.0, 5000.0]
    assert text_numbers("0 (0.005 for Qwen3-8B)") == [0.0, 0.005]
    assert text_numbers("1e-6 (constant)") == [1e-6]
    assert text_numbers("0.20/0.28") == [0.2, 0.28]


# ----- Table 7: environment quality from a run folder ------------------------------------------------------
CODE_A = '''"""A designed environment."""


class Alpha:
    def __init__(self, max_turns=5):
        self.x = 1
        self.y = 2

    def reset(self, seed=None):
        return "obs", {}

    def step(self, action):
        return "o", 0.0, True, False, {}
'''  # 8 lines of code; state x, y
CODE_B = '''"""Another one."""
import random


class Beta:
    # a comment line
    def __init__(self, max_turns=5):
        self.x = 1
        self.y = 2

    def reset(self, seed=None):
        self.z = random.Random(seed).randint(0, 9)
        return "obs", {}

    def step(self, action):
        return "o", 0.0, True, False, {}
'''  # 10 lines of code; state x, y, z


def env_row(step, env_id, code, win_rate, source="designer", valid=True, skill="logic", class_name=None):
    return {"step": step, "env_id": env_id, "skill": skill, "source": source, "code": code, "class_name": class_name,
            "valid": valid, "wins": None, "episodes": 8 if valid else 0, "win_rate": win_rate,
            "distinct_rewards": [0.0]}


def make_run(runs_root: Path, run: str, sets: dict, metrics: list | None = None) -> Path:
    folder = runs_root / run
    (folder / "envs").mkdir(parents=True, exist_ok=True)
    for step, envs in sets.items():
        (folder / "envs" / f"set_{step:05d}.json").write_text(json.dumps({"environments": envs}))
    if metrics is not None:
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    trained(runs_root, run)  # a 30B run at the paper's 400 steps
    return folder


def table7_mapping(tmp_path, run="q30"):
    return write_mapping(tmp_path / "map.yaml", {"table7": {"run": run, "phases": {
        "early_steps_0_40": [0, 40], "mid_steps_150_250": [150, 250], "late_steps_340_396": [340, 396]}}})


def test_table7_and_8_of_a_toy_run_carry_the_banner_and_no_difference(tmp_path):
    build_table7 = load_script("table7_env_quality").build_table7
    build_table8 = load_script("table8_diversity").build_table8
    runs_root = tmp_path / "runs"
    make_run(runs_root, "q30", {0: [env_row(0, "a", CODE_A, 0.5), env_row(0, "b", CODE_B, 0.9)]},
             [{"step": 0, "agent_win_rate": 0.25, "episodes": 8, "mean_turns": 3.0}])
    trained(runs_root, "q30", card="smollm2-135m", steps=4)
    table, _, _ = build_table7(load_table_runs(table7_mapping(tmp_path)), REPORTED / "table7_env_quality.csv",
                               runs_root)
    assert table.banner.startswith("TOY SCALE, NOT COMPARABLE: values of ours come from run q30: smollm2-135m, 4 steps")
    ours = [line for line in table.lines() if line.kind == OURS]
    assert all(line.detail == "run q30; TOY SCALE: smollm2-135m, 4 steps, not comparable" for line in ours)
    diffs = [c for line in table.lines() if line.kind == DIFF for c in line.cells]
    assert not [c for c in diffs if c[:1] in "+-"]  # no difference against the 30B values
    mapping = write_mapping(tmp_path / "map8.yaml", {"table8": {
        "field": "code", "vendi": {"size": 2, "draws": 1, "balance_by": "skill", "seed": 0}, "collapsed_below": 0.2,
        "rows": [{"reported": {"run": label}, "run": "q30" if label == "spade (full)" else None}
                 for label in pd.read_csv(REPORTED / "table8_diversity.csv")["run"]]}})
    fake = {name: (lambda texts: [[1.0, float(i)] for i in range(len(texts))]) for name in ("sbert", "tfidf_lsa")}
    table8, _, _ = build_table8(load_table_runs(mapping), REPORTED / "table8_diversity.csv", runs_root, fake)
    assert "run q30: smollm2-135m, 4 steps" in table8.banner
    (full,) = [i for i, line in enumerate(table8.lines()) if line.labels[0] == "spade (full)"]
    assert "TOY SCALE" in table8.lines()[full].detail and set(table8.lines()[full + 2].cells) == {BLANK}


def test_table7_quality_signals(tmp_path):
    build_table7 = load_script("table7_env_quality").build_table7
    runs_root = tmp_path / "runs"
    make_run(runs_root, "q30", {0: [env_row(0, "a", CODE_A, 0.5, class_name="Alpha"), env_row(0, "b", CODE_B, 0.9),
                                    env_row(0, "c", None, None, valid=False),
                                    env_row(0, "d", CODE_A, 0.3, source="backfill:lib")]},
             [{"step": 0, "agent_win_rate": 0.25, "episodes": 8, "mean_turns": 3.0},
              {"step": 1, "agent_win_rate": 0.5, "episodes": 24, "mean_turns": 5.0}])
    table, cells, inputs = build_table7(load_table_runs(table7_mapping(tmp_path)),
                                        REPORTED / "table7_env_quality.csv", runs_root)
    groups = {line.labels[0]: i for i, line in enumerate(table.lines()) if line.labels[0]}
    lines = table.lines()

    def rows(signal):
        i = groups[signal]
        return [lines[i].cells, lines[i + 1].cells, lines[i + 2].cells]

    # 2 learnable slots (0.5, and the backfilled 0.3) of 4; the invalid slot counts 0
    assert rows("learnable-band fraction (win rate in [0.2; 0.8])") == [
        ["0.50", "no data", "no data"], ["0.16", "0.16", "0.31"], ["+0.34", "no data", "no data"]]
    assert rows("RA win rate")[0][0] == "0.44" and rows("RA win rate")[2][0] == "+0.14"  # (2 + 12) / 32 episodes
    assert rows("interaction depth (turns per episode)")[0][0] == "4.5"  # (24 + 120) / 32
    assert rows("program length (LOC)")[0][0] == "9" and rows("program length (LOC)")[2][0] == "-307"
    assert rows("hidden state variables")[0][0] == "2.5"  # designer-written only: 2 and 3
    assert rows("well-posed (LLM rubric)")[0] == [NOT_COMPUTED] * 3
    assert rows("well-posed (LLM rubric)")[1] == ["0.98", "0.97", "0.97"]
    assert any("no environment set regenerated in steps 150-250" in m for m in table.missing)
    assert {p.name for p in inputs} == {"set_00000.json", "metrics.jsonl"}
    cell = next(c for c in cells if c["measure"] == "learnable_share")
    assert cell["n"] == 4 and cell["learnable"] == 2 and cell["config_hash"] == PROV["config_hash"]
    check_latex(render_latex(table))

    unmapped, _, _ = build_table7(load_table_runs(table7_mapping(tmp_path, None)),
                                  REPORTED / "table7_env_quality.csv", runs_root)
    first = unmapped.lines()[0]
    assert first.cells == [NOT_RUN] * 3 and unmapped.lines()[6].cells == [NOT_COMPUTED] * 3


# ----- Table 8: diversity with stand-in embeddings --------------------------------------------------------
def test_mean_pairwise_distance():
    assert mean_pairwise_distance([[1, 0], [0, 1], [1, 1]]) == pytest.approx(1 - 2 * 2 ** -0.5 / 3)
    assert mean_pairwise_distance(np.eye(5)) == pytest.approx(1.0)
    assert mean_pairwise_distance([[1, 2], [2, 4]]) == pytest.approx(0.0)


def test_table8_diversity(tmp_path):
    build_table8 = load_script("table8_diversity").build_table8
    runs_root = tmp_path / "runs"
    skills = ["logic", "math"] * 3
    make_run(runs_root, "d30", {0: [env_row(0, f"e{i}", f"code {i}", 0.5, skill=s) for i, s in enumerate(skills[:4])],
                                4: [env_row(4, f"f{i}", f"code f{i}", 0.5, skill=s) for i, s in enumerate(skills[:2])]
                                + [env_row(4, "g", "lib", 0.5, source="backfill:x")]})
    make_run(runs_root, "small30", {0: [env_row(0, f"s{i}", f"code s{i}", 0.5) for i in range(3)]})
    mapping = write_mapping(tmp_path / "map.yaml", {"table8": {
        "vendi": {"size": 4, "draws": 3, "balance_by": "skill", "seed": 0}, "collapsed_below": 0.2, "rows": [
            {"reported": {"run": "spade (full)"}, "run": "d30"}, {"reported": {"run": "w/o memory"}, "run": "small30"},
            {"reported": {"run": "w/o ED training and memory"}, "run": None},
            {"reported": {"run": "w/o corpus grounding"}, "run": "absent30"}]}})
    embedders = {"sbert": lambda texts: np.eye(len(texts)),  # orthogonal: Vendi of 4 draws = 4
                 "tfidf_lsa": lambda texts: np.ones((len(texts), 3))}  # identical: Vendi = 1
    table, cells, inputs = build_table8(load_table_runs(mapping), REPORTED / "table8_diversity.csv", runs_root,
                                        embedders)
    groups = md_groups(render_markdown(table))
    ours, reported, diff = groups[("spade (full)",)]
    assert ours[1:] == ["6", "1.00", "1.00", "0.25", "diverse"]  # backfilled environment left out
    assert reported[1:] == ["3310", "0.68", "0.94", "0.53", "diverse"]
    assert diff[1:] == ["-3304", "+0.32", "+0.06", "-0.28", "same"]
    ours = groups[("w/o memory",)][0]
    assert ours[1:] == ["3", "too few (n = 3)", "1.00", "too few (n = 3)", "too few (n = 3)"]
    assert groups[("w/o ED training and memory",)][0][1:] == [NOT_RUN] * 5
    assert groups[("w/o corpus grounding",)][0][1:] == [NOT_RUN] * 5
    assert len([p for p in inputs if p.parent.parent.name == "d30"]) == 2
    cell = next(c for c in cells if c["column"] == "vendi_per_n")
    assert cell["run"] == "d30" and cell["vendi"]["size"] == 4 and cell["git_commit"] == "abc123"
    tex = render_latex(table)
    check_latex(tex)
    assert r"\textit{too few (n = 3)}" in tex


# ----- the real mapping on the toy run's results: every table renders, with "not run" marks ---------------
def test_every_script_renders_without_paper_runs(tmp_path):
    """With only the toy run (mapped nowhere), every ours cell of every table is a mark, never a number."""
    runs_root = tmp_path / "runs"
    make_run(runs_root, "toy", {0: [env_row(0, "a", CODE_A, 0.5)]}, [{"step": 0, "agent_win_rate": 0.5, "episodes": 4}])
    mapping = ROOT / "paper" / "table_runs.yaml"
    assert "toy" not in {run for t in BENCHMARK_TABLES + ("table7", "table8")
                         for run in mapped_runs(load_table_runs(mapping), t)}
    for stem in STEMS.values():
        out = tmp_path / "out" / f"{stem}.md"
        load_script(stem).main(["--mapping", str(mapping), "--reported", str(REPORTED / f"{stem}.csv"),
                                "--runs-root", str(runs_root), "--out", str(out)])
        text = out.read_text()
        for cells in md_groups(text).values():
            for row in cells:
                if row[0].startswith(("ours", "Δ")):
                    assert set(row[1:]) <= {NOT_RUN, NOT_COMPUTED, "—"}, (stem, row)
        check_latex(out.with_suffix(".tex").read_text())
        assert json.loads(sidecar_path(out).read_text())["cells"] == []
    out = tmp_path / "out" / "table5_hyperparameters.md"
    load_script("table5_hyperparameters").main([
        "--games", str(RECIPES / "games.yaml"), "--tool-use", str(RECIPES / "tool_use.yaml"),
        "--reported", str(REPORTED / "table5_hyperparameters.csv"), "--out", str(out)])
    assert "| learning_rate | 1e-06 (constant) |" in out.read_text()


def test_reported_copies_are_unchanged():
    shared = ROOT.parent / "shared" / "reported"
    if not shared.is_dir():
        pytest.skip("the project's shared folder is not next to the checkout")
    for path in sorted(shared.glob("*.csv")):
        assert (REPORTED / path.name).read_bytes() == path.read_bytes(), path.name


def test_run_fingerprint_follows_result_files(tmp_path):
    runs_root = tmp_path / "runs"
    make_run(runs_root, "a", {0: [env_row(0, "x", CODE_A, 0.5)]})
    before = {t: run_fingerprint(runs_root, ["a", "missing"], t) for t in ("table1", "table8")}
    assert run_fingerprint(runs_root, ["a", "missing"], "table1") == before["table1"]
    make_run(runs_root, "other", {0: []})  # a run the table does not map
    assert run_fingerprint(runs_root, ["a", "missing"], "table1") == before["table1"]
    (runs_root / "a" / "selected_checkpoint.json").write_text(json.dumps({"step": 4}))
    assert run_fingerprint(runs_root, ["a", "missing"], "table1") != before["table1"]
    assert run_fingerprint(runs_root, ["a", "missing"], "table8") == before["table8"]  # it reads no selection
    (runs_root / "a" / "envs" / "set_00004.json").write_text(json.dumps({"environments": []}))
    assert run_fingerprint(runs_root, ["a", "missing"], "table8") != before["table8"]


def test_shipped_toy_mappings_never_show_toy_values_unmarked(tmp_path):
    """The toy run as the default pipeline leaves it (summary.json of the local trainer: smollm2-135m, 4 steps), rendered
    through the shipped toy mappings: Table 1 and the games numbers put it under the 30B backbone, and every value
    of ours there is marked toy, under the banner, with no difference to the paper."""
    from spade.paper import numbers as pn

    runs_root = tmp_path / "runs"
    rows = [("toy", step, c, v) for step, values in ((0, BASE_30), (4, SPADE_30)) for c, v in zip(GAMES, values)]
    results = tidy_csv(tmp_path / "results.csv", rows)
    trained(runs_root, "toy", card="smollm2-135m", steps=4)
    table, _ = build(TABLE1, ROOT / "paper" / "toy" / "table_runs.yaml", results, runs_root)
    ours = [line for line in table.lines() if line.kind == OURS and any(c[:1].isdigit() for c in line.cells)]
    assert ours and all("TOY SCALE: smollm2-135m, 4 steps" in line.detail for line in ours)
    assert all(c[:1] not in "+-" for line in table.lines() if line.kind == DIFF for c in line.cells)
    assert table.banner and "run toy: smollm2-135m, 4 steps" in render_markdown(table).split("|")[0]
    for run, step in (("toy", 0), ("toy", 4)):  # the numbers read run folders: the same values as eval files
        for (bench, metric), value in zip((COLUMN_METRICS[c] for c in GAMES), BASE_30 if step == 0 else SPADE_30):
            path = runs_root / run / "eval" / bench / f"step_{step:06d}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            old = json.loads(path.read_text())["rows"] if path.is_file() else []
            path.write_text(json.dumps({"run": run, "rows": old + [{"run": run, "step": step, "benchmark": bench,
                                        "metric": metric, "value": value, "n": 10, "stderr": 0.01}], "provenance": PROV}))
    games_gain = load_script("num_games_gain").GROUP
    group, numbers, ctx = pn.build_group(games_gain, ROOT / "paper" / "toy" / "number_runs.yaml", runs_root, REPORTED)
    shown = [n for n in numbers if n.value is not None]
    assert shown and all(n.shown().endswith(r"\textsuperscript{toy}") for n in shown)
    text = pn.render_macros(group, numbers, "script", "mapping", {})
    assert "TOY SCALE, NOT COMPARABLE" in text.split(pn.scale_macro(group))[2]


def test_shipped_toy_mapping_puts_the_tool_use_toy_on_table_2_marked_toy(tmp_path):
    """The tool-use toy (run toy_tool_use, `snakemake toy_tool_use`: smollm2-135m, 2 steps) through the shipped toy
    mapping: Table 2's 30B rows show its BFCL columns, marked toy under the banner with no difference to the paper;
    tau2 and ACEBench (not run offline) stay empty and say what is missing; no other size shows a value of ours."""
    bfcl = {"bfcl_base": 0.0, "bfcl_miss_func": 1.0, "bfcl_miss_param": 0.0, "bfcl_long_ctx": 0.0}
    rows = [("toy_tool_use", step, c, v) for step in (0, 2) for c, v in bfcl.items()]
    results = tidy_csv(tmp_path / "results.csv", rows)
    trained(tmp_path / "runs", "toy_tool_use", card="smollm2-135m", steps=2)
    table, _ = build(TABLE2, ROOT / "paper" / "toy" / "table_runs.yaml", results, tmp_path / "runs")
    ours = {tuple(line.labels): line for line in table.lines() if line.kind == OURS}
    for model in (f"{B30} (base)", f"{B30} + SPADE (tool use)"):
        line = ours[(model,)]
        assert "run toy_tool_use" in line.detail and "TOY SCALE: smollm2-135m, 2 steps, not comparable" in line.detail
        assert line.cells[:5] == ["0.0", "100.0", "0.0", "0.0", "25.0"], line.cells  # the four BFCL columns, avg
        assert set(line.cells[5:12]) == {NOT_RUN}, line.cells  # tau2 and ACEBench: no offline run
    diffs = [line for line in table.lines() if line.kind == DIFF]
    assert all(c[:1] not in "+-" for line in diffs for c in line.cells)
    assert table.banner.startswith("TOY SCALE, NOT COMPARABLE: values of ours come from run toy_tool_use")
    for model in ("Qwen3-4B-Instruct-2507 (base)", "Qwen3-8B + SPADE (tool use)"):
        assert set(ours[(model,)].cells) <= {NOT_RUN, "—"}, model
    assert any("tau2:pass^1/retail" in m for m in table.missing)
