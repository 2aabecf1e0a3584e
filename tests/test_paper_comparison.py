"""The environment-source comparison (spade.paper.comparison, paper/scripts/*env_sources.py): every cell from
hand-made run folders with hand-computed values, the marks and their reasons, mapping errors, and the figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from paper_scripts import load_script

from spade.paper import comparison as pc
from spade.paper.report import NOT_RUN, ReportInputError, sidecar_path
from spade.paper.tables import TOO_FEW, render_markdown

ROOT = Path(__file__).resolve().parents[1]
TABLE = load_script("table_env_sources")
FIGURE = load_script("fig_env_sources")
PROV = {"config_hash": "0123456789abcdef", "git_commit": "abc123", "seed": 0, "eval_seed": 5}
CODE = "class Env{i}:\n    def reset(self, seed=None):\n        return 'x{i}', {{}}\n"


def env_row(step, env_id, win_rate, source="designer", valid=True, skill="logic"):
    return {"step": step, "env_id": env_id, "skill": skill, "source": source, "code": CODE.format(i=env_id),
            "valid": valid, "win_rate": win_rate if valid else None, "episodes": 4 if valid else 0}


def write_run(runs_root: Path, run: str, metrics: list, sets: dict, scores: dict) -> None:
    """A run folder: metrics.jsonl, envs/set_<step>.json and eval/reasoning_gym_hard/step_<N>.json (scores: step ->
    the value of every reasoning-gym column)."""
    folder = runs_root / run
    (folder / "envs").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    for step, rows in sets.items():
        (folder / "envs" / f"set_{step:05d}.json").write_text(json.dumps({"environments": rows}))
    for step, value in scores.items():
        path = folder / "eval" / "reasoning_gym_hard" / f"step_{step:06d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{"run": run, "step": step, "benchmark": "reasoning_gym_hard", "metric": m, "value": value, "n": 100,
                 "stderr": 0.05} for m in ("math", "algorithmic", "cognition", "logic")]
        path.write_text(json.dumps({"run": run, "rows": rows, "provenance": PROV}))
    (folder / "summary.json").write_text(json.dumps({"run": run, "model_card": "qwen3-30b-a3b-instruct-2507",
                                                     "steps": 400, "provenance": PROV}))


@pytest.fixture
def runs_root(tmp_path):
    root = tmp_path / "runs"
    # SPADE: 2 valid of 6 attempts, 1200 designer tokens; 4 slot-windows, of which one (0.5) is in [0.2, 0.8];
    # designer-written environments a, c (b is library backfill, the last slot is empty)
    write_run(root, "spade", [
        {"step": 0, "regenerated": True, "designer_valid": 1, "design_attempts": 4, "design_generated_tokens": 800},
        {"step": 1, "regenerated": False},
        {"step": 2, "regenerated": True, "designer_valid": 1, "design_attempts": 2, "design_generated_tokens": 400},
    ], {0: [env_row(0, "a", 0.5), env_row(0, "b", 0.9, source="backfill:crt")],
        2: [env_row(2, "c", 0.1, skill="math"), env_row(2, "d", None, valid=False)]}, {0: 0.30, 4: 0.45})
    # a fixed library pool: the same two environments in both windows; win rates 0.25 and 1.0, then 0.75 and 1.0
    pool = [{"step": s, "env_source": "fixed_pool", "regenerated": s == 0} for s in range(4)]
    write_run(root, "pool", pool, {0: [env_row(0, "p", 0.25, "library:p"), env_row(0, "q", 1.0, "library:q", skill="math")],
                                   2: [env_row(2, "p", 0.75, "library:p"), env_row(2, "q", 1.0, "library:q", skill="math")]},
              {4: 0.25})
    return root


def mapping_file(tmp_path, **changes) -> Path:
    data = {"sources": [{"label": "SPADE", "kind": "designer", "run": "spade"},
                        {"label": "Library pool", "kind": "pool", "run": "pool"},
                        {"label": "RLVE", "kind": "pool", "run": None}],
            "heldout": [{"key": "games", "header": "games suite", "parts": ["rg_math", "rg_algorithmic", "rg_cognition",
                                                                          "rg_logic"]}],
            "base_run": "spade", "step": "last", "embedding": "tfidf", **changes}
    path = tmp_path / "comparison.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def by_source(figure_data):
    return {s["label"]: s["cells"] for s in figure_data["sources"]}


def unit_embedder(texts):
    """Orthogonal embeddings: n distinct environments have Vendi score n, so Vendi/n = 1."""
    return np.eye(len(texts))


def test_every_cell_from_the_run_files(tmp_path, runs_root):
    mapping = pc.load_comparison_runs(mapping_file(tmp_path))
    _, cells, inputs, data = TABLE.build_comparison(mapping, runs_root, {"tfidf_lsa": unit_embedder})
    spade, pool, rlve = (by_source(data)[k] for k in ("SPADE", "Library pool", "RLVE"))

    assert spade["valid_env_rate"]["value"] == pytest.approx(2 / 6)
    assert (spade["valid_env_rate"]["successes"], spade["valid_env_rate"]["trials"]) == (2, 6)
    assert spade["valid_env_rate"]["low"] < 2 / 6 < spade["valid_env_rate"]["high"]
    assert spade["tokens_per_valid_env"]["value"] == pytest.approx(600.0)
    assert spade["learnable_share"]["value"] == pytest.approx(1 / 4) and spade["learnable_share"]["slots"] == 4
    assert spade["games"]["value"] == pytest.approx(15.0) and spade["games"]["step"] == 4  # (0.45 - 0.30) x 100

    # a pool generates nothing: n/a with the reason, never 0; its environments are counted once, not per window
    assert pool["valid_env_rate"]["status"] == TABLE.NA
    assert "generates no environment" in pool["valid_env_rate"]["reason"]
    assert pool["tokens_per_valid_env"]["value"] is None
    assert pool["learnable_share"]["value"] == pytest.approx(2 / 4)  # 0.25 and 0.75 are learnable, 1.0 twice not
    assert pool["vendi_per_n"]["n_envs"] == 2 and pool["games"]["value"] == pytest.approx(-5.0)  # base: spade step 0
    # both sources have 2 environments of their own (backfill b and the empty slot d excluded from SPADE's)
    assert spade["vendi_per_n"]["env_ids"] == ["a", "c"] and spade["vendi_per_n"]["value"] == pytest.approx(1.0)

    assert {c["status"] for c in rlve.values()} == {NOT_RUN}
    assert all(c["reason"] == "no run mapped" for c in rlve.values())
    assert {c["row"] for c in cells} == {"SPADE", "Library pool", "RLVE"} and len(cells) == 3 * 5
    assert runs_root / "spade" / "metrics.jsonl" in inputs


def test_rows_name_their_run_scale_and_a_toy_run_brings_the_banner(tmp_path, runs_root):
    mapping = pc.load_comparison_runs(mapping_file(tmp_path))
    table, _, _, data = TABLE.build_comparison(mapping, runs_root, {"tfidf_lsa": unit_embedder})
    assert not table.banner and table.lines()[0].labels[1] == "spade (qwen3-30b-a3b-instruct-2507, 400 steps)"
    summary = runs_root / "spade" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "model_card": "smollm2-135m", "steps": 4}))
    table, _, _, data = TABLE.build_comparison(mapping, runs_root, {"tfidf_lsa": unit_embedder})
    assert table.lines()[0].labels[1] == "spade (smollm2-135m, 4 steps)"
    assert table.banner.startswith("TOY SCALE, NOT COMPARABLE: values of ours come from run spade: smollm2-135m")
    assert data["banner"] == table.banner and "> **TOY SCALE" in render_markdown(table)
    figure = FIGURE.draw_comparison(data)
    assert figure._suptitle is not None and "TOY SCALE" in figure._suptitle.get_text()


def test_designer_that_never_validates_and_too_few_environments(tmp_path, runs_root):
    write_run(runs_root, "broken", [{"step": 0, "regenerated": True, "designer_valid": 0, "design_attempts": 3,
                                     "design_generated_tokens": 900}],
              {0: [env_row(0, "x", 0.5, source="backfill:crt")]}, {})
    mapping = pc.load_comparison_runs(mapping_file(tmp_path, sources=[
        {"label": "Broken", "kind": "designer", "run": "broken"}, {"label": "SPADE", "kind": "designer", "run": "spade"}]))
    table, _, _, data = TABLE.build_comparison(mapping, runs_root, {"tfidf_lsa": unit_embedder})
    broken = by_source(data)["Broken"]
    assert broken["valid_env_rate"]["value"] == 0.0
    assert broken["tokens_per_valid_env"]["shown"] == f"{TABLE.NO_VALID} (900 tokens)"
    assert broken["vendi_per_n"]["shown"] == f"{TOO_FEW} (n = 0)"
    assert "no trained checkpoint" in broken["games"]["reason"]
    assert any(line.startswith("Broken, games") for line in table.missing)


def test_kind_must_match_what_the_run_logged(tmp_path, runs_root):
    path = mapping_file(tmp_path, sources=[{"label": "Pool as designer", "kind": "designer", "run": "pool"}])
    with pytest.raises(ReportInputError, match=r"sources\[0\]\.kind.*fixed_pool.*write kind: pool"):
        TABLE.build_comparison(pc.load_comparison_runs(path), runs_root, {"tfidf_lsa": unit_embedder})


@pytest.mark.parametrize("changes, fragment", [
    ({"sources": []}, "'sources'"),
    ({"sources": [{"label": "A", "kind": "oracle", "run": "a"}]}, "sources[0].kind"),
    ({"sources": [{"label": "A", "kind": "pool", "run": "a"}, {"label": "A", "kind": "pool", "run": "b"}]},
     "repeats the label"),
    ({"heldout": [{"key": "g", "header": "g", "parts": ["no_such_column"]}]}, "heldout[0].parts[0]"),
    ({"step": "base"}, "'step'"),
    ({"learnable_band": [0.9, 0.1]}, "learnable_band"),
    ({"embedding": "bag_of_words"}, "embedding"),
    ({"vendi": {"draws": 0}}, "vendi.draws"),
    ({"colour": "red"}, "colour"),
])
def test_mapping_errors_name_the_file_and_key(tmp_path, changes, fragment):
    path = mapping_file(tmp_path, **changes)
    with pytest.raises(ReportInputError) as caught:
        pc.load_comparison_runs(path)
    assert fragment in str(caught.value) and str(path.name) in str(caught.value)


def test_shipped_mappings_load_and_name_configured_runs():
    toy = pc.load_comparison_runs(ROOT / "paper/toy/comparison_runs.yaml")
    paper = pc.load_comparison_runs(ROOT / "paper/comparison_runs.yaml")
    assert [s["label"] for s in toy["sources"]] == [s["label"] for s in paper["sources"]]
    ablations = set(yaml.safe_load((ROOT / "configs/default.yaml").read_text())["toy_ablations"])
    assert set(pc.comparison_runs(toy)) <= {"toy"} | ablations
    paper_config = yaml.safe_load((ROOT / "configs/paper.yaml").read_text())
    paper_runs = {Path(p).stem for p in paper_config["runs"]} | set(paper_config.get("pending") or {})
    assert set(pc.comparison_runs(paper)) <= paper_runs and "fixed_env_rlve_30b" in paper_runs


def test_scripts_write_table_and_figure_with_the_same_numbers(tmp_path, runs_root):
    out = tmp_path / "out" / "env_sources.md"
    TABLE.main(["--mapping", str(mapping_file(tmp_path)), "--runs-root", str(runs_root), "--out", str(out)])
    text = out.read_text()
    assert "0.33 [" in text and "(2/6)" in text and "| 600 |" in text and "+15.0 (step 4)" in text
    assert out.with_suffix(".tex").read_text().count("\\midrule") >= 1
    sidecar = json.loads(sidecar_path(out).read_text())
    assert {c["column"] for c in sidecar["cells"]} >= {"valid_env_rate", "vendi_per_n", "games"}
    figure = tmp_path / "out" / "env_sources.pdf"
    FIGURE.main(["--table", str(sidecar_path(out)), "--out", str(figure)])
    assert figure.is_file() and figure.with_suffix(".png").is_file()
    drawn = json.loads(sidecar_path(figure).read_text())
    assert drawn["series"] == {"SPADE": "spade", "Library pool": "pool"}
    assert any("RLVE" in line for line in drawn["missing"])
    vendi = by_source(sidecar["comparison"])["SPADE"]["vendi_per_n"]["value"]
    assert vendi is not None and math.isfinite(vendi)
