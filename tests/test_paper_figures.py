"""Paper figure scripts (paper/scripts/fig*_*.py) on small hand-made run folders.

What the scripts share is tested through spade.paper.figures; a figure's own functions through its script
(tests/paper_scripts.py: load_script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paper_scripts import load_script
from spade.paper import figures as pf

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "paper" / "scripts"


def write_eval(runs_root: Path, run: str, step: int, benchmark: str, metrics: dict) -> None:
    folder = runs_root / run / "eval" / benchmark
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"run": run, "step": step, "benchmark": benchmark, "metric": m, "value": v, "n": 100, "stderr": 0.01}
            for m, v in metrics.items()]
    (folder / f"step_{step:06d}.json").write_text(json.dumps({"rows": rows}))


RG = {"math": 0.2, "algorithmic": 0.3, "cognition": 0.4, "logic": 0.5}
PAPER_SCALE = ("qwen3-30b-a3b-instruct-2507", 400)  # the paper's 30B backbone and step budget
TOY_SCALE = ("smollm2-135m", 4)


def write_summary(runs_root: Path, run: str, scale: tuple) -> None:
    """The fields of summary.json that spade.paper.scale reads; a run without them counts as toy scale."""
    folder = runs_root / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"run": run, "model_card": scale[0], "steps": scale[1]}))


def full_suite(runs_root: Path, run: str, step: int, shift: float) -> None:
    write_eval(runs_root, run, step, "aime", {"avg@32/2025": 0.1 + shift, "avg@32/2026": 0.2 + shift})
    write_eval(runs_root, run, step, "gpqa_diamond", {"accuracy": 0.5 + shift})
    write_eval(runs_root, run, step, "livecodebench", {"pass@1": 0.3 + shift})
    write_eval(runs_root, run, step, "reasoning_gym_hard", {k: v + shift for k, v in RG.items()})


def env_set(step: int, win_rates: list, skill="logic") -> dict:
    envs = []
    for j, w in enumerate(win_rates):
        envs.append({"step": step, "env_id": f"s{step}-{j}", "skill": skill if j % 2 else "math", "valid": w is not None,
                     "episodes": 8 if w is not None else 0, "wins": 0, "win_rate": w, "source": "designer",
                     "distinct_rewards": [0.0, 0.5, 1.0][: 1 + j % 3],
                     "code": f"class Env{j}:\n    '''game {j} about {'apples' if j % 2 else 'trains'} step {step}'''\n"
                             f"    def reset(self):\n        return 'value {j * step}'\n"})
    return {"environments": envs}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    # spade_games_30b: full suite at 0 and 10; fixed_env_grpo_30b: step 10 only, without LCB
    full_suite(root, "spade_games_30b", 0, 0.0)
    full_suite(root, "spade_games_30b", 10, 0.1)
    write_eval(root, "fixed_env_grpo_30b", 10, "reasoning_gym_hard", dict(RG))
    write_eval(root, "fixed_env_grpo_30b", 10, "gpqa_diamond", {"accuracy": 0.55})
    envs = root / "spade_games_30b" / "envs"
    envs.mkdir(parents=True)
    for step in range(0, 48, 4):
        (envs / f"set_{step:05d}.json").write_text(json.dumps(env_set(step, [0.5, 0.1, None, 0.9, 0.3, 0.7])))
    with (root / "spade_games_30b" / "metrics.jsonl").open("w") as fh:
        for step in range(8):
            fh.write(json.dumps({"step": step, "mean_regret": 0.1 * step,
                                 "win_rate_by_skill": {"logic": 0.1 * step, "math": 0.5}}) + "\n")
    # both runs stand for the paper's 30B runs at its scale: no toy-scale banner
    for run in ("spade_games_30b", "fixed_env_grpo_30b"):
        write_summary(root, run, PAPER_SCALE)
    return root


def scaled_runs(runs_root: Path, dest: Path, scale: tuple) -> Path:
    """The fixture's runs under the toy mapping's names (paper/toy/figure_runs.yaml puts "toy" on the 30B SPADE
    curves), every one with the given scale."""
    for src, run in (("spade_games_30b", "toy"), ("fixed_env_grpo_30b", "toy_fixed_env_grpo")):
        shutil.copytree(runs_root / src, dest / run)
        write_summary(dest, run, scale)
    return dest


TOY_MAPPING = ROOT / "paper" / "toy" / "figure_runs.yaml"


def run_figure(stem: str, runs_root: Path, out_dir: Path, *extra,
               mapping: Path = ROOT / "paper" / "figure_runs.yaml") -> dict:
    out = out_dir / f"{stem}.pdf"
    proc = subprocess.run([sys.executable, str(SCRIPTS / f"{stem}.py"), "--mapping",
                           str(mapping), "--runs-root", str(runs_root), "--out", str(out),
                           *extra], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0 and out.with_suffix(".png").stat().st_size > 0
    return json.loads(Path(str(out) + ".provenance.json").read_text())


@pytest.mark.parametrize("stem", ["fig5_transfer_curves", "fig10_ablation_curves", "fig11_designer_reward",
                                  "fig13_curriculum_breadth", "fig14_skills_curves", "fig6_learnable_share",
                                  "fig1_middle_games_transfer", "fig1_right_tool_use_transfer", "fig12_model_size",
                                  "fig16_reward_levels", "fig17_skill_win_rates"])
def test_figure_renders_and_lists_missing(stem, runs, tmp_path):
    sidecar = run_figure(stem, runs, tmp_path)
    missing = " | ".join(sidecar["missing"])
    assert sidecar["outputs"] and all(o["sha256"] for o in sidecar["outputs"])
    assert sidecar["banner"] == ""  # every drawn run is at the paper's scale
    assert set(sidecar["scales"].values()) <= {"qwen3-30b-a3b-instruct-2507, 400 steps"}
    if stem in ("fig5_transfer_curves", "fig10_ablation_curves", "fig6_learnable_share"):
        assert "ablation_no_memory_30b" in missing or "fixed_env_rlve_30b" in missing or "ablation" in missing
    if stem in ("fig13_curriculum_breadth", "fig14_skills_curves"):
        assert "ablation_two_skills_30b" in missing
    if stem == "fig1_right_tool_use_transfer":
        assert "spade_tool_use_30b" in missing
    if stem == "fig12_model_size":
        assert "spade_games_4b" in missing and "selected_checkpoint.json" in missing
    if stem == "fig16_reward_levels":  # archives end at step 44: no late phase
        assert "all: no environment in the late phase" in sidecar["missing"]
    if stem == "fig17_skill_win_rates":
        assert sidecar["series"] == {"SPADE": "spade_games_30b"}
    if stem == "fig5_transfer_curves":  # grpo has no LCB evaluation
        assert "LCB-v6: no evaluation of run fixed_env_grpo_30b (Fixed-env GRPO)" in sidecar["missing"]
        assert sidecar["series"]["SPADE"] == "spade_games_30b"
    assert any(i["path"].endswith("figure_runs.yaml") for i in sidecar["inputs"])


def test_all_runs_missing_still_renders(tmp_path):
    empty = tmp_path / "none"
    empty.mkdir()
    sidecar = run_figure("fig5_transfer_curves", empty, tmp_path)
    assert any("spade_games_30b" in m and "not run" in m for m in sidecar["missing"])


def test_windowed_diversity_and_tsne_render(runs, tmp_path):
    sidecar = run_figure("fig18_windowed_diversity", runs, tmp_path, "--embedding", "tfidf")
    assert any("ablation_no_corpus_30b" in m for m in sidecar["missing"])
    sidecar = run_figure("fig7_tsne", runs, tmp_path, "--embedding", "tfidf")
    assert any("only 60 valid" in m for m in sidecar["missing"])  # 12 sets x 5 valid < 330


def test_series_equal_hand_computed(runs):
    tidy, _ = pf.load_eval(runs, ["spade_games_30b", "fixed_env_grpo_30b"])
    assert pf.curve(tidy, "spade_games_30b", "gpqa_diamond", "accuracy") == ([0, 10], [0.5, pytest.approx(0.6)])
    steps, values, incomplete = pf.suite_average_curve(tidy, "spade_games_30b")
    # base: (0.1 + 0.2 + 0.5 + 0.3 + 0.2 + 0.3 + 0.4 + 0.5) / 8 = 0.3125 -> 31.25 %; +0.1 everywhere -> 41.25
    assert steps == [0, 10] and values == pytest.approx([31.25, 41.25]) and incomplete == []
    six = load_script("fig11_designer_reward").SIX_BENCHMARKS
    steps, values, incomplete = pf.suite_average_curve(tidy, "fixed_env_grpo_30b", six)
    assert steps == [] and incomplete == [10]
    relative_curve = load_script("fig1_middle_games_transfer").relative_curve
    parts = [pf.PANEL_METRIC[k] for k in ("gpqa_diamond", "rg_logic")]
    steps, values, problems = relative_curve(tidy, "spade_games_30b", parts)
    # (0.6 - 0.5) / 0.5 = 20 %, (0.6 - 0.5) / 0.5 = 20 % -> mean 20 %
    assert steps == [0, 10] and values == pytest.approx([0.0, 20.0]) and problems == []


def test_learnable_share_series_hand_computed(runs):
    sets = pf.env_sets(pf.FigureContext("fig6", pf.load_figure_runs(ROOT / "paper" / "figure_runs.yaml"), runs),
                       "spade_games_30b")
    steps, shares = load_script("fig6_learnable_share").learnable_share_series(sets, 16)
    # each set: 6 slots, learnable (0.2 <= w <= 0.8): 0.5, 0.3, 0.7 -> 3/6 = 50 %, every window
    assert steps == [0, 16, 32] and shares == pytest.approx([50.0, 50.0, 50.0])
    records = [json.loads(line) for line in (runs / "spade_games_30b" / "metrics.jsonl").read_text().splitlines()]
    by_skill = load_script("fig17_skill_win_rates").skill_win_rates(records)
    assert by_skill["math"] == (list(range(8)), [0.5] * 8)


def test_mapping_names_known_runs_and_bad_mapping(tmp_path):
    mapping = pf.load_figure_runs(ROOT / "paper" / "figure_runs.yaml")
    assert "spade_games_30b" in pf.figure_runs(mapping, "fig5")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"figures": {"fig5": {"series": [{"run": "x"}]}}}))
    with pytest.raises(pf.ReportInputError, match="series"):
        pf.load_figure_runs(bad)


def legend_texts(fig) -> list[str]:
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def figure_texts(fig) -> list[str]:
    """Every text drawn on the figure, wrapping undone."""
    from matplotlib.text import Text

    return [" ".join(t.get_text().split()) for t in fig.findobj(Text)]


def draw_in_process(draw, figure: str, runs_root: Path, mapping: Path = TOY_MAPPING, **kw):
    """A figure drawn as figure_main draws it (banner included), kept open for its artists."""
    import matplotlib

    matplotlib.use("Agg")
    ctx = pf.FigureContext(figure, pf.load_figure_runs(mapping), runs_root, **kw)
    fig = draw(ctx)
    pf.show_banner(fig, ctx)
    return fig, ctx


@pytest.mark.parametrize("stem", ["fig5_transfer_curves", "fig6_learnable_share", "fig12_model_size",
                                  "fig16_reward_levels", "fig17_skill_win_rates"])
def test_toy_run_on_30b_curve_carries_banner(stem, runs, tmp_path):
    root = scaled_runs(runs, tmp_path / "runs", TOY_SCALE)
    sidecar = run_figure(stem, root, tmp_path, mapping=TOY_MAPPING)
    assert sidecar["banner"].startswith("TOY SCALE, NOT COMPARABLE")
    assert "run toy: smollm2-135m, 4 steps" in sidecar["banner"]
    assert "Qwen3-30B-A3B-Instruct-2507" in sidecar["banner"]
    assert sidecar["scales"]["toy"] == "smollm2-135m, 4 steps"


def test_toy_legend_names_run_and_scale_and_banner_is_drawn(runs, tmp_path):
    import matplotlib.pyplot as plt

    root = scaled_runs(runs, tmp_path / "runs", TOY_SCALE)
    fig, ctx = draw_in_process(pf.draw_eval_panels, "fig5", root)
    texts = [" ".join(t.split()) for t in legend_texts(fig)]  # labels are wrapped
    assert "SPADE — run toy (smollm2-135m, 4 steps)" in texts
    assert "Fixed-env GRPO — run toy_fixed_env_grpo (smollm2-135m, 4 steps)" in texts
    assert "base" in texts
    assert ctx.banner_text() in figure_texts(fig)  # on top: the title of the figure legend
    assert ctx.banner_text().startswith("TOY SCALE, NOT COMPARABLE")
    plt.close(fig)


def test_paper_scale_run_has_no_banner(runs, tmp_path):
    import matplotlib.pyplot as plt

    root = scaled_runs(runs, tmp_path / "runs", PAPER_SCALE)
    sidecar = run_figure("fig5_transfer_curves", root, tmp_path, mapping=TOY_MAPPING)
    assert sidecar["banner"] == ""
    fig, ctx = draw_in_process(pf.draw_eval_panels, "fig5", root)
    assert ctx.off == [] and not any("TOY SCALE" in t for t in figure_texts(fig))
    texts = [" ".join(t.split()) for t in legend_texts(fig)]
    assert "SPADE — run toy (qwen3-30b-a3b-instruct-2507, 400 steps)" in texts
    plt.close(fig)


def test_run_without_scale_fields_counts_as_toy(runs, tmp_path):
    root = scaled_runs(runs, tmp_path / "runs", PAPER_SCALE)
    (root / "toy" / "summary.json").write_text(json.dumps({"run": "toy"}))  # written before the fields existed
    sidecar = run_figure("fig6_learnable_share", root, tmp_path, mapping=TOY_MAPPING)
    assert "run toy: model unknown, steps unknown" in sidecar["banner"]


def test_model_size_compares_each_size_with_its_backbone(runs, tmp_path):
    import matplotlib.pyplot as plt

    # a 30B run at the paper's scale drawn on the 4B curve is not the paper's 4B run
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(yaml.safe_dump({"figures": {"fig12": {"sizes": {"4B": {"spade": "spade_games_30b"}}}}}))
    fig, ctx = draw_in_process(load_script("fig12_model_size").draw_model_size, "fig12", runs, mapping)
    assert "Qwen3-4B-Instruct-2507" in ctx.banner_text() and "run spade_games_30b" in ctx.banner_text()
    plt.close(fig)


def write_quoted(folder: Path, rows: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "quoted_numbers.csv").write_text("key,value,unit,where\n" + rows)
    return folder


def test_vendi_reference_line_comes_from_reported_file(runs, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    fig18 = load_script("fig18_windowed_diversity")
    lines, path = fig18.reported_vendi_lines()  # the repository's copy: the paper's 21.3
    assert path.name == "quoted_numbers.csv" and lines[0][0] == pytest.approx(21.3)
    monkeypatch.setattr(fig18, "REPORTED_DIR", write_quoted(tmp_path / "reported", "vendi_window_spade,7.5,x,y\n"))
    fig, ctx = draw_in_process(fig18.draw_windowed_vendi, "fig18", runs, ROOT / "paper" / "figure_runs.yaml",
                               embedding="tfidf")
    references = sorted(float(line.get_ydata()[0]) for line in fig.axes[0].lines if line.get_linestyle() == ":")
    assert references == [1.0, 7.5]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "7.5 (reported, SPADE)" in texts and "1.0 (lower bound: identical envs)" in texts
    assert tmp_path / "reported" / "quoted_numbers.csv" in ctx.inputs
    plt.close(fig)


def test_vendi_reference_missing_is_a_clear_error(tmp_path, monkeypatch):
    fig18 = load_script("fig18_windowed_diversity")
    monkeypatch.setattr(fig18, "REPORTED_DIR", write_quoted(tmp_path / "reported", "other,1,x,y\n"))
    with pytest.raises(pf.ReportInputError, match=r"quoted_numbers.csv: no numeric value for key 'vendi_window_spade'"):
        fig18.reported_vendi_lines()
    monkeypatch.setattr(fig18, "REPORTED_DIR", tmp_path / "nowhere")
    with pytest.raises(pf.ReportInputError, match="missing reported file .*quoted_numbers.csv"):
        fig18.reported_vendi_lines()


def test_reward_levels_step_ticks_are_integers(tmp_path):
    import matplotlib.pyplot as plt

    # archives at steps 0-2 (a toy run): matplotlib's default locator would put ticks at 0.5, 1.5, ...
    envs = tmp_path / "runs" / "toy" / "envs"
    envs.mkdir(parents=True)
    for step in range(3):
        (envs / f"set_{step:05d}.json").write_text(json.dumps(env_set(step, [0.5, 0.1, 0.9, 0.3])))
    write_summary(tmp_path / "runs", "toy", TOY_SCALE)
    fig, ctx = draw_in_process(load_script("fig16_reward_levels").draw_reward_levels, "fig16", tmp_path / "runs")
    fig.canvas.draw()
    ticks = fig.axes[0].get_xticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
    title = " ".join(fig.axes[0].get_title(loc="left").split())
    assert "SPADE — run toy (smollm2-135m, 4 steps)" in title
    assert fig._suptitle is not None and " ".join(fig._suptitle.get_text().split()) == ctx.banner_text()
    plt.close(fig)
