"""The environment-cards figure (the paper's Figure 2): the early, middle and late cards of a run side by side,
written as PDF and PNG by ``spade.paper.report.save_figure``."""

from __future__ import annotations

import textwrap
from pathlib import Path

from spade.paper.env_cards_archive import EnvRecord, RunArchive
from spade.paper.env_cards_content import Observation, card_fields, empty_phase_text, scale_note, steps_label

OBSERVATION_LINES_IN_FIGURE = 9


def _wrap(text: str, width: int, max_lines: int | None = None) -> list:
    lines = []
    for paragraph in str(text).splitlines() or [""]:
        lines += textwrap.wrap(paragraph, width, replace_whitespace=False, drop_whitespace=True) or [""]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [f"[... {len(lines) - max_lines + 1} more lines on the page]"]
    return lines


_FULL_WIDTH = ("first observation", "hint")


def _card_lines(phase: str, lo: int, hi: int, env: EnvRecord | None, observation: Observation | None,
                width: int) -> list:
    """[(label, text, style, right)] rows of one card in the figure: a label (or "") in the left column and, when
    ``right``, its text in the right one; the first observation and the hint get their own rows at full width.
    Style: 'header', 'title', 'label', 'mono' or 'text'."""
    header = f"{phase.upper()}  ({steps_label(lo, hi)})"
    if env is None:
        return [("", header, "header", False), ("", "", "text", False),
                *(("", line, "text", False) for line in _wrap(empty_phase_text(lo, hi), width))]
    out = [("", header, "header", False), ("", env.data.get("class_name") or "(no class)", "title", False)]
    narrow, mono = int(width * 0.52), int(width * 0.85)
    for label, value in card_fields(env, observation):
        if label in _FULL_WIDTH:
            out.append(("", label, "label", False))
            style = "mono" if label == "first observation" else "text"
            out += [("", line, style, False)
                    for line in _wrap(value, mono if style == "mono" else width, OBSERVATION_LINES_IN_FIGURE)]
        else:
            lines = _wrap(value, narrow, 3)
            out += [(label if i == 0 else "", line, "text", True) for i, line in enumerate(lines)]
    return out


def render_figure(archive: RunArchive, cards: list, observations: dict, out: Path) -> list:
    """The cards side by side (early, middle, late); writes the PDF and PNG; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from spade.paper.report import PAPER_RC, save_figure

    toy, note = scale_note(archive)
    width_chars = 58
    columns = [_card_lines(phase, lo, hi, env, observations.get(env.anchor) if env else None, width_chars)
               for phase, lo, hi, env in cards]
    line_in = 0.092
    rows = max(len(column) for column in columns)
    height = 0.75 + (rows + 1) * line_in
    styles = {"header": {"fontsize": 5.8, "fontweight": "bold", "color": "#555555"},
              "title": {"fontsize": 7.5, "fontweight": "bold", "family": "monospace"},
              "label": {"fontsize": 5.2, "fontweight": "bold", "color": "#555555"},
              "mono": {"fontsize": 4.8, "family": "monospace"},
              "text": {"fontsize": 5.2}}
    with plt.rc_context({**PAPER_RC, "axes.grid": False}):
        fig, axes = plt.subplots(1, len(columns), figsize=(7.0, height))
        for ax, column in zip(axes, columns):
            ax.set_axis_off()
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.add_patch(FancyBboxPatch((0.0, 0.0), 1.0, 1.0, boxstyle="round,pad=0.0,rounding_size=0.02",
                                        transform=ax.transAxes, facecolor="#f7f7f7", edgecolor="#999999",
                                        linewidth=0.6, clip_on=False))
            step = 1.0 / (rows + 1)
            for number, (label, text, style, right) in enumerate(column):
                y = 1.0 - (number + 0.8) * step
                if label:
                    ax.text(0.03, y, label, transform=ax.transAxes, ha="left", va="center", parse_math=False,
                            **styles["label"])
                x = 0.44 if right else 0.03
                ax.text(x, y, text, transform=ax.transAxes, ha="left", va="center", parse_math=False,
                        **styles[style])
        title = f"Environment cards of run {archive.run} across training"
        fig.suptitle(title, fontsize=8, fontweight="bold", y=1.0 - 0.12 / height)
        fig.text(0.5, 1.0 - 0.3 / height, textwrap.fill(note, 150), ha="center", va="top", fontsize=5.6,
                 fontweight="bold" if toy else "normal", color="#b2182b" if toy else "#333333", parse_math=False)
        fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=1.0 - 0.62 / height, wspace=0.04)
        paths = save_figure(fig, out)
        plt.close(fig)
    return paths
