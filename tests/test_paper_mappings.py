"""The toy run's paper mappings (paper/toy/, used by configs/default.yaml) must mirror the paper-scale ones:
same tables, rows, figures and curve labels, and load without errors; only run names and scales differ."""

from pathlib import Path

import pytest
import yaml

from spade.config import ConfigError, load_config
from spade.paper.figures import load_figure_runs, series_of
from spade.paper.table_runs import load_table_runs

ROOT = Path(__file__).resolve().parents[1]


def _rows(tables: dict) -> dict:
    return {name: [r.get("reported") for r in section.get("rows", [])] for name, section in tables.items()}


def test_toy_table_mapping_mirrors_the_paper_mapping():
    paper = yaml.safe_load((ROOT / "paper/table_runs.yaml").read_text())["tables"]
    toy = yaml.safe_load((ROOT / "paper/toy/table_runs.yaml").read_text())["tables"]
    assert _rows(toy) == _rows(paper)
    assert set(toy["table7"]["phases"]) == set(paper["table7"]["phases"])
    load_table_runs(ROOT / "paper/toy/table_runs.yaml")  # validates every entry


def test_toy_figure_mapping_mirrors_the_paper_mapping():
    paper = load_figure_runs(ROOT / "paper/figure_runs.yaml")["figures"]
    toy = load_figure_runs(ROOT / "paper/toy/figure_runs.yaml")["figures"]
    assert set(toy) == set(paper)
    for name in paper:
        assert [label for label, _ in series_of(toy[name])] == [label for label, _ in series_of(paper[name])], name
        assert set(toy[name].get("sizes") or {}) == set(paper[name].get("sizes") or {}), name
    runs = {run for section in toy.values() for _, run in series_of(section)} - {None}
    assert "toy" in runs and runs <= {"toy"} | _toy_extra_runs()


def _toy_extra_runs() -> set:
    """The extra toy runs of configs/default.yaml: config keys toy_ablations (`snakemake toy_ablations`) and
    toy_tool_use (`snakemake toy_tool_use`)."""
    config = yaml.safe_load((ROOT / "configs/default.yaml").read_text())
    return set(config["toy_ablations"]) | set(config["toy_tool_use"])


def test_toy_table_mapping_names_only_toy_runs():
    toy = yaml.safe_load((ROOT / "paper/toy/table_runs.yaml").read_text())["tables"]
    runs = {row["run"] for section in toy.values() for row in section.get("rows", [])} - {None}
    runs |= {section["run"] for section in toy.values() if section.get("run")}
    assert "toy" in runs and runs <= {"toy"} | _toy_extra_runs()


def test_default_config_points_at_the_toy_mappings():
    cfg = load_config(ROOT / "configs/default.yaml")
    for key in ("table_runs", "figure_runs"):
        path = getattr(cfg.paper, key)
        assert path.startswith("paper/toy/") and (ROOT / path).is_file(), (key, path)


def test_bad_latex_engine_names_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"paper\.latex_engine.*'lualatex'.*latexmk"):
        load_config(ROOT / "configs/default.yaml", overrides={"paper": {"latex_engine": "lualatex"}})
