"""spade.paper.scale: when a run's values may sit beside the paper's (same backbone, the recipe's 400 steps)."""

from __future__ import annotations

import json

from spade.paper.scale import RunScale, banner, comparable, off_scale, paper_steps, run_scale


def test_comparable_needs_the_backbone_and_the_paper_steps():
    assert paper_steps() == 400  # configs/recipes/games.yaml, Table 5
    paper = RunScale("r", "qwen3-30b-a3b-instruct-2507", 400)
    assert comparable(paper, "Qwen3-30B-A3B-Instruct-2507")  # model card and backbone name, case-insensitively
    assert not comparable(RunScale("r", "qwen3-30b-a3b-instruct-2507", 4), "Qwen3-30B-A3B-Instruct-2507")
    assert comparable(RunScale("r", "qwen3-30b-a3b-instruct-2507", 4), "Qwen3-30B-A3B-Instruct-2507", model_only=True)
    assert not comparable(RunScale("r", "smollm2-135m", 400), "Qwen3-30B-A3B-Instruct-2507", model_only=True)
    assert not comparable(RunScale("r", None, None), "Qwen3-8B")
    assert RunScale("r", None, None).label() == "model unknown, steps unknown"


def test_off_scale_reads_summaries_and_banner_is_empty_without_them(tmp_path):
    for run, card, steps in (("toy", "smollm2-135m", 4), ("big", "qwen3-8b", 400)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "summary.json").write_text(json.dumps({"model_card": card, "steps": steps}))
    assert run_scale(tmp_path, "toy") == RunScale("toy", "smollm2-135m", 4)
    assert off_scale(tmp_path, ["toy", "big"], "Qwen3-8B") == [RunScale("toy", "smollm2-135m", 4)]
    assert off_scale(tmp_path, ["big"], "Qwen3-8B") == [] and banner([], ["Qwen3-8B"]) == ""
    text = banner(off_scale(tmp_path, ["toy"], "Qwen3-8B"), ["Qwen3-8B"])
    assert text.startswith("TOY SCALE, NOT COMPARABLE: values of ours come from run toy: smollm2-135m, 4 steps")
    assert "(Qwen3-8B, 400 steps)" in text
