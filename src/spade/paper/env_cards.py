"""Environment cards across training (the paper's Figure 2) and a browser of every environment a run designed or
rejected, both drawn from what the run wrote.

    python -m spade.paper.env_cards --run-dir results/runs/toy --figure results/figures/toy_env_cards.pdf \
        --cards-html results/env_cards/toy/cards.html --browser-html results/env_cards/toy/environments.html \
        --max-turns 2

Inputs (nothing else is read): ``<run>/envs/set_<step>.json`` (one archive per environment set, written by
``spade.train.trainer.write_archives``), ``<run>/rejected/<sha12>/{report.json, raw.txt, code.py}`` (``store_rejection``),
``<run>/metrics.jsonl`` (per-step win rate of each environment) and ``<run>/summary.json`` (model card and step
budget: the scale the pages and the figure name).

Outputs:

* the figure (PDF and the PNG of the same stem, plus ``<pdf>.provenance.json``): one card per phase of training
  (early / middle / late thirds of the run's steps), each the environment of that phase with the highest designer
  reward (designer-written environments first; a run whose sets hold only library or check environments shows one
  of those, named by its source);
* ``cards.html``: the same cards as a page;
* ``environments.html``: every environment slot of every set (valid or left empty) and every rejected candidate, with
  its code (syntax-highlighted by Pygments), validation reports and reason codes, hint and the window's statistics.

Both pages are self-contained (inline CSS, one small inline script for filtering, a Content-Security-Policy that
allows nothing else, no network). Generated code, observations, hints and reports are untrusted text: every one is
HTML-escaped (``tests/test_env_cards.py`` checks this with a hostile environment).

What the archives do not hold is shown as "not recorded", never filled in: the corpus document a design was
grounded on is not archived; the first observation is not archived either, so it is replayed in the sandbox,
``reset(seed)`` with the first recorded no-hint episode seed and the run's ``max_turns`` (``--no-replay``: "not
recorded"). Lines of code and state variables are static counts of the archived code (``spade.analysis``).

This module is the command (``render_run``, ``main``). The cards code is split by concern: ``env_cards_archive``
reads a run's archives into records, ``env_cards_content`` says what a card and a browser entry show (and replays
the first observations), ``env_cards_figure`` draws the figure and ``env_cards_pages`` writes the two pages; the
workflow's rule ``env_cards_of_run`` depends on all five files (``ENV_CARDS_LIB`` in ``rules/env_cards.smk``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from spade.paper.env_cards_archive import load_run
from spade.paper.env_cards_content import (no_replay, pick_cards, replay_first_observations, scale_note,
                                           scale_word_of)
from spade.paper.env_cards_figure import render_figure
from spade.paper.env_cards_pages import render_browser_html, render_cards_html
from spade.paper.report import ReportInputError, run_script, sidecar_path, write_json_atomic


def output_files(paths, run: str) -> list:
    """What one run's rendering writes, from ``spade.paths.ResultPaths`` ``paths``: the figure's PDF, PNG and
    sidecar, the cards page and the browser page."""
    figure = paths.env_cards_figure(run)
    return [figure, str(Path(figure).with_suffix(".png")), str(sidecar_path(figure)), paths.env_cards_page(run),
            paths.env_browser_page(run)]


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve().parent)).as_posix()


def render_run(run_dir: str | Path, figure: str | Path, cards_html: str | Path, browser_html: str | Path,
               max_turns: int | None = None, pool=None, replay: bool = True) -> dict:
    """Write the figure (PDF, PNG, sidecar) and both pages for ``run_dir``; returns what was written.

    ``pool``: a SandboxPool for the replays (None: one is started here and closed after); ``replay`` False shows
    the first observation as not recorded."""
    from spade.paper.report import provenance_record, write_text_atomic

    archive = load_run(run_dir)
    figure, cards_html, browser_html = Path(figure), Path(cards_html), Path(browser_html)
    if figure.suffix.lower() != ".pdf":
        raise ReportInputError(f"--figure must name a .pdf file (the PNG goes beside it), got {figure}")
    cards = pick_cards(archive)
    if not replay:
        observations = no_replay(archive.envs)
    elif pool is not None:
        observations = replay_first_observations(archive.envs, pool, max_turns)
    else:
        from spade.sandbox import SandboxConfig, SandboxPool

        with SandboxPool(SandboxConfig(workers=1)) as own:
            observations = replay_first_observations(archive.envs, own, max_turns)
    outputs = render_figure(archive, cards, observations, figure)
    png = figure.with_suffix(".png")
    write_text_atomic(cards_html, render_cards_html(archive, cards, observations, _relative(browser_html, cards_html),
                                                    _relative(png, cards_html)))
    write_text_atomic(browser_html, render_browser_html(archive, observations, _relative(cards_html, browser_html)))
    toy, note = scale_note(archive)
    not_recorded = ["corpus document of each design (run archives keep none)",
                    "first observation (not archived; " + ("replayed in the sandbox)" if replay else "replay off)")]
    if archive.rejected and any(r.slot is None for r in archive.rejected):
        not_recorded.append("step and slot of rejected candidates whose report no archived slot holds")
    record = provenance_record("src/spade/paper/env_cards.py", archive.inputs, [*outputs, cards_html, browser_html],
                               run=archive.run, toy_scale=toy, scale_note=note,
                               cards={phase: (env.env_id, env.step) if env else None for phase, _, _, env in cards},
                               not_recorded=not_recorded, replay_max_turns=max_turns if replay else None)
    write_json_atomic(sidecar_path(figure), record)
    return {"figure": outputs, "cards_html": cards_html, "browser_html": browser_html, "toy": toy,
            "scale_word": scale_word_of(archive), "environments": len(archive.envs), "rejected": len(archive.rejected)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spade.paper.env_cards", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="the run folder (results/runs/<run>)")
    parser.add_argument("--figure", type=Path, required=True, help="PDF to write (the PNG and sidecar go beside it)")
    parser.add_argument("--cards-html", type=Path, required=True, help="the cards page to write")
    parser.add_argument("--browser-html", type=Path, required=True, help="the page of every environment to write")
    parser.add_argument("--max-turns", type=int, default=None,
                        help="the run's agent.max_turns, passed to each replayed environment as its episodes had it")
    parser.add_argument("--no-replay", action="store_true",
                        help="do not replay first observations in the sandbox (they show as not recorded)")
    args = parser.parse_args(argv)
    if args.max_turns is not None and args.max_turns < 1:
        parser.error(f"--max-turns must be >= 1, got {args.max_turns}")
    done = render_run(args.run_dir, args.figure, args.cards_html, args.browser_html, args.max_turns,
                      replay=not args.no_replay)
    scale = done["scale_word"].lower() if done["toy"] else "paper scale"
    print(f"{args.run_dir}: {done['environments']} environment slots, {done['rejected']} rejected candidates "
          f"({scale})")
    for path in [*done["figure"], done["cards_html"], done["browser_html"]]:
        print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(run_script(main))
