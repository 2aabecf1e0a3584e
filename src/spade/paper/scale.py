"""The scale of a run (its model card and step budget) against the paper's.

A value of ours may sit in a row or curve that the paper gives to a backbone (e.g. the toy run mapped onto the
Qwen3-30B SPADE rows). It is comparable with the paper's only when the run trained that backbone for the
paper's step budget (the recipe's ``selfplay.total_steps``, 400 in Table 5). Every artifact asks ``comparable``
and, when a value is not, says so visibly (``banner``) and shows no difference against the paper.

A run's scale comes from its ``summary.json`` (``model_card`` and ``steps``, written by both trainers). A rehearsal
run (``configs/rehearsal.yaml``: a paper run file on a tiny random model of its backbone's family, on a CPU) keeps its
paper model card but is never comparable, not even as a base-model row: its summary's ``rehearsal`` marks it, and
every artifact then says REHEARSAL instead of TOY SCALE.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from spade.configtools import load_yaml

RECIPE_DIR = Path(__file__).resolve().parents[3] / "configs" / "recipes"
PAPER_30B = "Qwen3-30B-A3B-Instruct-2507"  # the backbone of the paper's Tables 3, 6, 7 and 8


@lru_cache(maxsize=None)
def paper_steps(recipe: str = "games") -> int:
    """The paper's step budget: ``selfplay.total_steps`` of ``configs/recipes/<recipe>.yaml``."""
    return int(load_yaml(RECIPE_DIR / f"{recipe}.yaml")["selfplay"]["total_steps"])


@dataclass(frozen=True)
class RunScale:
    run: str
    model_card: str | None  # None: the run's summary.json predates the field (or is missing)
    total_steps: int | None
    rehearsal_model: str | None = None  # the tiny model a rehearsal run trained (summary.json "rehearsal")

    def label(self) -> str:
        model = self.model_card or "model unknown"
        steps = f"{self.total_steps} steps" if self.total_steps is not None else "steps unknown"
        if self.rehearsal_model is not None:
            return f"{self.rehearsal_model}, a rehearsal's tiny model standing in for {model}, {steps}"
        return f"{model}, {steps}"


def scale_word(scales: list) -> str:
    """How an artifact names values that are not at the paper's scale: REHEARSAL when any comes from a rehearsal
    run, else TOY SCALE."""
    return "REHEARSAL" if any(s.rehearsal_model is not None for s in scales) else "TOY SCALE"


def rehearsal_model(summary: dict) -> str | None:
    """The tiny model a rehearsal run's ``summary.json`` names (key ``rehearsal``); None for any other run."""
    mark = summary.get("rehearsal") if isinstance(summary, dict) else None
    return str(mark.get("model", "a tiny model")) if isinstance(mark, dict) else None


def run_scale(runs_root, run: str) -> RunScale:
    """The scale of ``runs_root/run`` from its ``summary.json`` (fields None when absent)."""
    from spade.paper.report import read_json

    path = Path(runs_root) / run / "summary.json" if runs_root is not None else None
    summary = read_json(path) if path is not None and path.is_file() else {}
    steps = summary.get("steps")
    return RunScale(run, summary.get("model_card"), int(steps) if isinstance(steps, int) else None,
                    rehearsal_model(summary))


def comparable(scale: RunScale, backbone: str, model_only: bool = False) -> bool:
    """Did the run train the paper row's ``backbone`` for the paper's step budget? ``model_only``: a base-model row,
    where only the model must match."""
    if scale.rehearsal_model is not None:
        return False  # a tiny random model, whatever card it stands in for
    same_model = scale.model_card is not None and scale.model_card.lower() == backbone.lower()
    return same_model and (model_only or scale.total_steps == paper_steps())


def off_scale(runs_root, runs, backbone: str, model_only: bool = False) -> list[RunScale]:
    """The scales of ``runs`` that are not comparable with ``backbone`` (:func:`comparable`); [] when all are."""
    scales = [run_scale(runs_root, run) for run in runs]
    return [s for s in scales if not comparable(s, backbone, model_only=model_only)]


def banner(scales: list[RunScale], backbones: list[str]) -> str:
    """One sentence for the top of an artifact whose values of ours come from runs not at the paper's scale;
    "" when ``scales`` is empty (every value is at the paper's scale)."""
    if not scales:
        return ""
    runs = "; ".join(f"run {s.run}: {s.label()}" for s in dict.fromkeys(scales))
    shown = ", ".join(dict.fromkeys(backbones))
    return (f"{scale_word(scales)}, NOT COMPARABLE: values of ours come from {runs}, not from the paper's setting "
            f"({shown}, {paper_steps()} steps). They show that the pipeline runs; no difference to the paper is "
            "shown for them.")
