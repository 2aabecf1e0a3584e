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
grounded on is not archived; the first observation is not archived either, so it is replayed here in the sandbox,
``reset(seed)`` with the first recorded no-hint episode seed and the run's ``max_turns`` (``--no-replay``: "not
recorded"). Lines of code and state variables are static counts of the archived code (``spade.analysis``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import math
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from spade.paper.report import ReportInputError, read_json, read_metrics, run_script, sidecar_path, write_json_atomic
from spade.core.rewards import WIN_THRESHOLD

PHASES = ("early", "middle", "late")
NOT_RECORDED = "not recorded"
_SET_FILE = re.compile(r"^set_(\d+)\.json$")
_REQUIRED_ENV_KEYS = ("env_id", "step", "valid")
OBSERVATION_LINES_IN_FIGURE = 9
HIGHLIGHT_STYLE = "friendly"


# ----- reading a run ---------------------------------------------------------------------------------------
@dataclass
class EnvRecord:
    """One slot of an archived environment set, as written, with where it came from."""

    data: dict
    file: Path
    index: int  # position in the archive's "environments" list
    window_end: int | None = None  # first step after this set's window (the next set's step; None: run end unknown)

    @property
    def env_id(self) -> str:
        return str(self.data["env_id"])

    @property
    def step(self) -> int:
        return int(self.data["step"])

    @property
    def valid(self) -> bool:
        return bool(self.data.get("valid"))

    @property
    def source(self) -> str:
        return str(self.data.get("source") or "designer")

    @property
    def designer_written(self) -> bool:
        return self.valid and self.source == "designer"

    @property
    def anchor(self) -> str:
        """The HTML id of this slot on the browser page."""
        return "env-" + re.sub(r"[^A-Za-z0-9_-]", "_", f"{self.step:05d}-{self.index}-{self.env_id}")


@dataclass
class Rejection:
    """A rejected candidate kept by ``store_rejection``, matched to the slot and attempt whose report it is."""

    folder: Path
    report: dict
    raw: str
    code: str | None
    slot: EnvRecord | None = None
    attempt: int | None = None  # 1-based attempt of that slot

    @property
    def anchor(self) -> str:
        return "rejected-" + re.sub(r"[^A-Za-z0-9_-]", "_", self.folder.name)


@dataclass
class RunArchive:
    run: str
    run_dir: Path
    sets: list  # [(step, path, [EnvRecord])] in step order
    rejected: list  # [Rejection]
    metrics: dict  # step -> metrics record
    total_steps: int | None
    model_card: str | None
    inputs: list = field(default_factory=list)  # every file read

    @property
    def envs(self) -> list:
        return [env for _, _, envs in self.sets for env in envs]

    @property
    def phase_end(self) -> int:
        """The step budget the phases split: the run's, else one past the last archived set."""
        if self.total_steps is not None:
            return self.total_steps
        return max((step for step, _, _ in self.sets), default=-1) + 1


def _read_json_file(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path} ({what}) is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{path} ({what}) is not UTF-8 text: {exc}") from None


def _read_sets(run_dir: Path) -> list:
    folder = run_dir / "envs"
    if not folder.is_dir():
        raise ReportInputError(f"run folder {run_dir} has no envs/ folder: no environment set was archived "
                               "(is it a run folder, and has its training run?)")
    found = sorted((int(m.group(1)), path) for path in folder.iterdir() if (m := _SET_FILE.match(path.name)))
    if not found:
        raise ReportInputError(f"{folder} holds no environment-set archive (set_<step>.json)")
    sets = []
    for _, path in found:
        data = _read_json_file(path, "environment-set archive")
        if not isinstance(data, dict) or not isinstance(data.get("environments"), list):
            raise ReportInputError(f"{path} is not an environment-set archive (no 'environments' list)")
        records = []
        for index, env in enumerate(data["environments"]):
            if not isinstance(env, dict):
                raise ReportInputError(f"{path}: environments[{index}] is not an object")
            missing = [key for key in _REQUIRED_ENV_KEYS if key not in env]
            if missing:
                raise ReportInputError(f"{path}: environments[{index}] lacks {', '.join(map(repr, missing))}")
            if not isinstance(env["step"], int) or isinstance(env["step"], bool):
                raise ReportInputError(f"{path}: environments[{index}] has step {env['step']!r}, not an integer")
            records.append(EnvRecord(env, path, index))
        steps = {record.step for record in records}
        if len(steps) > 1:
            raise ReportInputError(f"{path}: its environments name several steps {sorted(steps)}; one set has one")
        step = steps.pop() if steps else int(_SET_FILE.match(path.name).group(1))
        sets.append((step, path, records))
    sets.sort(key=lambda item: item[0])
    return sets


_REPORT_MATCH_KEYS = ("valid", "reason", "message", "isolation", "class_name", "kind", "changes", "checks",
                      "code_sha256", "elapsed_ms")


def _report_key(report: dict) -> str:
    return json.dumps({key: report.get(key) for key in _REPORT_MATCH_KEYS}, sort_keys=True)


def _read_rejected(run_dir: Path, envs: list) -> tuple[list, list]:
    folder = run_dir / "rejected"
    if not folder.is_dir():
        return [], []
    # a slot's report of each attempt is the same to_dict() that store_rejection wrote: match them exactly
    attempts = {}
    for env in envs:
        for number, report in enumerate(env.data.get("reports") or [], start=1):
            if isinstance(report, dict) and not report.get("valid"):
                attempts.setdefault(_report_key(report), (env, number))
    rejected, inputs = [], []
    for entry in sorted(folder.iterdir()):
        if not entry.is_dir():
            continue
        report_path = entry / "report.json"
        if not report_path.is_file():
            raise ReportInputError(f"rejected candidate {entry} has no report.json")
        report = _read_json_file(report_path, "validation report of a rejected candidate")
        if not isinstance(report, dict) or "reason" not in report:
            raise ReportInputError(f"{report_path} is not a validation report (no 'reason')")
        raw_path, code_path = entry / "raw.txt", entry / "code.py"
        raw = raw_path.read_text(encoding="utf-8", errors="replace") if raw_path.is_file() else ""
        code = code_path.read_text(encoding="utf-8", errors="replace") if code_path.is_file() else None
        inputs += [p for p in (report_path, raw_path, code_path) if p.is_file()]
        slot, attempt = attempts.get(_report_key(report), (None, None))
        rejected.append(Rejection(entry, report, raw, code, slot, attempt))
    rejected.sort(key=lambda r: (r.slot.step if r.slot else math.inf, r.slot.env_id if r.slot else "",
                                 r.attempt or 0, r.folder.name))
    return rejected, inputs


def archive_files(run_dir: str | Path) -> list:
    """The files of a run that the cards and the browser read (for the workflow's fingerprint of a run it does not
    build): the set archives, the rejected candidates' reports, metrics.jsonl and summary.json, those that exist."""
    folder = Path(run_dir)
    files = sorted(folder.glob("envs/set_*.json")) + sorted(folder.glob("rejected/*/report.json"))
    return files + [path for path in (folder / "metrics.jsonl", folder / "summary.json") if path.is_file()]


def output_files(paths, run: str) -> list:
    """What one run's rendering writes, from ``spade.paths.ResultPaths`` ``paths``: the figure's PDF, PNG and
    sidecar, the cards page and the browser page."""
    figure = paths.env_cards_figure(run)
    return [figure, str(Path(figure).with_suffix(".png")), str(sidecar_path(figure)), paths.env_cards_page(run),
            paths.env_browser_page(run)]


def load_run(run_dir: str | Path) -> RunArchive:
    """Everything the cards and the browser show, read from ``run_dir``; ReportInputError names a bad file."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportInputError(f"run folder {run_dir} does not exist")
    sets = _read_sets(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.is_file() else {}
    if not isinstance(summary, dict):
        raise ReportInputError(f"{summary_path} is not a JSON object")
    steps = summary.get("steps")
    total = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None
    for number, (step, _, records) in enumerate(sets):
        end = sets[number + 1][0] if number + 1 < len(sets) else total
        for record in records:
            record.window_end = end
    metrics_path = run_dir / "metrics.jsonl"
    metrics = {record["step"]: record for record in read_metrics(metrics_path)} if metrics_path.is_file() else {}
    envs = [env for _, _, records in sets for env in records]
    rejected, rejected_inputs = _read_rejected(run_dir, envs)
    inputs = [path for _, path, _ in sets] + [p for p in (summary_path, metrics_path) if p.is_file()] + rejected_inputs
    return RunArchive(str(summary.get("run") or run_dir.name), run_dir, sets, rejected, metrics, total,
                      summary.get("model_card"), inputs)


# ----- scale ----------------------------------------------------------------------------------------------
def scale_note(archive: RunArchive) -> tuple[bool, str]:
    """(toy, text): whether the run is off the paper's scale, and the sentence every artifact shows about it."""
    from spade.paper.figures import SIZE_BACKBONES
    from spade.paper.scale import RunScale, banner, comparable

    scale = RunScale(archive.run, archive.model_card, archive.total_steps)
    backbones = list(SIZE_BACKBONES.values())
    matched = [backbone for backbone in backbones if comparable(scale, backbone)]
    if matched:
        return False, f"Paper scale: run {archive.run} trained {matched[0]} for {archive.total_steps} steps."
    return True, banner([scale], backbones)


# ----- what a card shows ---------------------------------------------------------------------------------
def phase_windows(total_steps: int) -> list:
    """[(phase, first step, end step)]: the run's steps cut into thirds (end exclusive)."""
    cuts = [0, math.ceil(total_steps / 3), math.ceil(2 * total_steps / 3), total_steps]
    return [(name, cuts[i], cuts[i + 1]) for i, name in enumerate(PHASES)]


def _card_rank(env: EnvRecord) -> tuple:
    reward = env.data.get("designer_reward")
    has_reward = isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward)
    return (not env.designer_written, not has_reward, -(reward if has_reward else 0.0), env.step, env.index)


def pick_cards(archive: RunArchive) -> list:
    """[(phase, first step, end step, EnvRecord or None)]: per third of training, the valid environment with the
    highest designer reward (designer-written ones first, then earliest step and archive order)."""
    picked = []
    for name, lo, hi in phase_windows(archive.phase_end):
        candidates = [env for env in archive.envs if env.valid and lo <= env.step < hi]
        picked.append((name, lo, hi, min(candidates, key=_card_rank) if candidates else None))
    return picked


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _returns(env: EnvRecord, key: str) -> list:
    values = env.data.get(key) or []
    return [float(v) for v in values if _number(v) is not None]


def _share(wins: int, n: int) -> str:
    return f"{wins / n:.2f} ({wins}/{n} plays)"


def win_rate_without_hint(env: EnvRecord) -> str:
    episodes, wins = env.data.get("episodes"), env.data.get("wins")
    if not isinstance(episodes, int) or not isinstance(wins, int) or episodes <= 0:
        return "no no-hint play was recorded"
    return f"{_share(wins, episodes)} over the set's window"


def mean_return_without_hint(env: EnvRecord) -> str:
    """The mean no-hint return over the window (partial rewards count here, not in the win rate)."""
    episodes, total = env.data.get("episodes"), _number(env.data.get("return_sum"))
    if not isinstance(episodes, int) or episodes <= 0 or total is None:
        return "no no-hint play was recorded"
    return f"{total / episodes:.3f} over the set's window ({episodes} plays)"


def win_rate_with_hint(env: EnvRecord) -> str:
    hinted = _returns(env, "hint_returns")
    if not hinted:
        return "no hinted play was recorded" + ("" if env.data.get("hint") else " (no hint was written)")
    text = f"{_share(sum(r >= WIN_THRESHOLD for r in hinted), len(hinted))} at the regeneration step"
    paired = _returns(env, "paired_returns")
    if paired:
        text += f"; without the hint there: {_share(sum(r >= WIN_THRESHOLD for r in paired), len(paired))}"
    return text


def regret_text(env: EnvRecord) -> str:
    value = _number(env.data.get("regret"))
    if value is not None:
        return f"{value:+.3f}"
    return "none: no hinted play was recorded" if not _returns(env, "hint_returns") else "none recorded"


def designer_reward_text(env: EnvRecord) -> str:
    value = _number(env.data.get("designer_reward"))
    if value is not None:
        return f"{value:.3f}"
    if not env.designer_written:
        return f"none: the designer did not write this environment ({env.source})"
    return "none recorded"


def corpus_text(env: EnvRecord) -> str:
    if env.source != "designer":
        return f"none: {env.source} is a built-in environment, not designed from a document"
    return f"{NOT_RECORDED} (run archives keep no grounding document)"


def code_stats(env: EnvRecord) -> tuple[str, str]:
    """(lines of code, state variables) of the archived code, counted statically."""
    from spade.analysis import hidden_state_variables, program_length

    code = env.data.get("code") or ""
    if not code:
        return "no code (empty slot)", "no code (empty slot)"
    try:
        lines = str(program_length(code))
    except ValueError as exc:
        lines = f"not counted: {exc}"
    try:
        names = hidden_state_variables(code, env.data.get("class_name") or None)
        variables = f"{len(names)}: {', '.join(names)}" if names else "0"
    except ValueError as exc:
        variables = f"not counted: {exc}"
    return lines, variables


def _episode_seed(env: EnvRecord) -> int | None:
    for key in ("paired_seeds", "hint_seeds"):
        seeds = env.data.get(key) or []
        if seeds and isinstance(seeds[0], int) and not isinstance(seeds[0], bool):
            return seeds[0]
    return None


@dataclass(frozen=True)
class Observation:
    text: str | None  # the observation reset() returned; None when it was not replayed or the replay failed
    note: str  # how it was obtained, or why there is none
    tools: tuple = ()  # names of the tools a tool-use environment offered (its info["tools"])


def _replay_key(env: EnvRecord, max_turns: int | None) -> str:
    data = {"code": env.data.get("code"), "class": env.data.get("class_name"), "seed": _episode_seed(env),
            "kwargs": env.data.get("env_kwargs") or {}, "max_turns": max_turns}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def replay_first_observations(envs: list, pool, max_turns: int | None) -> dict:
    """{EnvRecord.anchor: Observation}: ``reset(seed)`` of each valid environment in the sandbox ``pool``, with the
    first recorded no-hint episode seed (the first hinted one when none) and the constructor arguments the agent's
    episodes had (``max_turns`` and the archived ``env_kwargs``). Identical replays run once."""
    done: dict = {}
    out = {}
    for env in envs:
        if not env.valid or not env.data.get("code"):
            continue
        seed = _episode_seed(env)
        if seed is None:
            out[env.anchor] = Observation(None, f"{NOT_RECORDED}: the archive holds no episode seed to replay")
            continue
        key = _replay_key(env, max_turns)
        if key not in done:
            kwargs = dict(env.data.get("env_kwargs") or {})
            if max_turns is not None:
                kwargs["max_turns"] = max_turns
            episode = pool.open(env.data["code"], env.data.get("class_name") or "", seed=seed, env_kwargs=kwargs)
            try:
                outcome = episode.reset(seed) if episode.opened.ok else episode.opened
            finally:
                episode.close()
            turns = f"max_turns={max_turns}" if max_turns is not None else "the class's default max_turns"
            how = f"replayed in the sandbox: reset(seed={seed}), {turns}"
            if outcome.ok:
                text, info = outcome.value
                tools = info.get("tools") if isinstance(info, dict) else None
                names = tuple(str(t.get("function", t).get("name", "?")) for t in tools
                              if isinstance(t, dict)) if isinstance(tools, list) else ()
                done[key] = Observation(text, how, names)
            else:
                done[key] = Observation(None, f"the replay failed ({how}): {outcome.describe()}")
        out[env.anchor] = done[key]
    return out


def no_replay(envs: list) -> dict:
    return {env.anchor: Observation(None, f"{NOT_RECORDED} (run archives keep no observation; replay is off)")
            for env in envs if env.valid}


def observation_text(observation: Observation | None) -> str:
    if observation is None:
        return "no observation: the slot holds no valid environment"
    if observation.text is None:
        return observation.note
    tools = f"\n[+ {len(observation.tools)} tool schemas: {', '.join(observation.tools)}]" if observation.tools else ""
    return observation.text + tools


def card_fields(env: EnvRecord, observation: Observation | None) -> list:
    """[(label, value)] of one card, the same for the figure and the pages."""
    lines, variables = code_stats(env)
    return [
        ("environment", f"{env.env_id} (set of step {env.step}; source {env.source})"),
        ("skill", str(env.data.get("skill") or NOT_RECORDED)),
        ("lines of code", lines),
        ("state variables", variables),
        ("corpus document", corpus_text(env)),
        ("first observation", observation_text(observation)),
        ("hint", str(env.data.get("hint") or "none written")),
        ("win rate, no hint", win_rate_without_hint(env)),
        ("mean return, no hint", mean_return_without_hint(env)),
        ("win rate, with hint", win_rate_with_hint(env)),
        ("regret", regret_text(env)),
        ("designer reward", designer_reward_text(env)),
    ]


# ----- the figure ------------------------------------------------------------------------------------------
def _wrap(text: str, width: int, max_lines: int | None = None) -> list:
    lines = []
    for paragraph in str(text).splitlines() or [""]:
        lines += textwrap.wrap(paragraph, width, replace_whitespace=False, drop_whitespace=True) or [""]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [f"[... {len(lines) - max_lines + 1} more lines on the page]"]
    return lines


_FULL_WIDTH = ("first observation", "hint")


def steps_label(lo: int, hi: int) -> str:
    """The steps [lo, hi) in words."""
    if hi <= lo:
        return "no steps"
    return f"step {lo}" if hi - lo == 1 else f"steps {lo}-{hi - 1}"


def empty_phase_text(lo: int, hi: int) -> str:
    if hi <= lo:
        return "The run has too few steps to have this third of training."
    return f"No environment set was regenerated in {steps_label(lo, hi)} of this run."


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


# ----- the pages -------------------------------------------------------------------------------------------
_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d0d7de; --bg: #f6f8fa; --warn: #b2182b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0; }
header.top { padding: 12px 20px; border-bottom: 1px solid var(--line); background: var(--bg); }
header.top h1 { font-size: 20px; margin: 0 0 4px 0; }
main { padding: 12px 20px 40px 20px; }
.scale { margin: 6px 0; padding: 6px 10px; border-radius: 4px; border: 1px solid var(--line); }
.scale.toy { border-color: var(--warn); color: var(--warn); font-weight: 600; background: #fff5f5; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600;
         background: var(--bg); border: 1px solid var(--line); margin-right: 4px; }
.badge.toy { color: #fff; background: var(--warn); border-color: var(--warn); }
.badge.valid { color: #1a7f37; border-color: #1a7f37; }
.badge.empty, .badge.rejected { color: var(--warn); border-color: var(--warn); }
.cards { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 14px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; background: #fff; min-width: 0; }
.card h2 { font-size: 13px; text-transform: uppercase; color: var(--muted); margin: 0 0 4px 0; }
.card .class-name, article.env .class-name { font-family: ui-monospace, monospace; font-size: 17px; margin: 0 0 6px 0; }
dl.fields { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 3px 10px; margin: 0; }
dl.fields dt { font-weight: 600; color: var(--muted); }
dl.fields dd { margin: 0; overflow-wrap: anywhere; }
pre.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; background: var(--bg); padding: 4px 6px;
           border-radius: 4px; font-size: 12px; max-height: 22em; overflow: auto; }
article.env { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; margin: 10px 0; }
article.env.rejected, article.env.empty { border-left: 4px solid var(--warn); }
article.env.valid { border-left: 4px solid #1a7f37; }
table.data { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
table.data th, table.data td { border: 1px solid var(--line); padding: 2px 6px; text-align: left; vertical-align: top; }
table.data td.msg { max-width: 60em; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace;
                    font-size: 12px; }
details > summary { cursor: pointer; color: var(--muted); margin: 4px 0; }
.highlight pre { margin: 0; font-size: 12px; line-height: 1.35; }
.codebox { overflow: auto; max-height: 40em; border: 1px solid var(--line); border-radius: 4px; }
td.linenos { background: var(--bg); color: var(--muted); user-select: none; }
.controls { position: sticky; top: 0; background: #fff; padding: 6px 0; border-bottom: 1px solid var(--line); z-index: 2; }
.controls input { width: 28em; max-width: 60vw; }
.muted { color: var(--muted); }
nav.sets a { margin-right: 8px; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _highlight_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style=HIGHLIGHT_STYLE).get_style_defs(".highlight")


def highlight_python(code: str) -> str:
    """Pygments' HTML of ``code`` (every character of the source is escaped by the formatter)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(style=HIGHLIGHT_STYLE, linenos="table"))


def _script_hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def _page(title: str, body_attrs: dict, body: str, script: str = "") -> str:
    script_src = f"'sha256-{_script_hash(script)}'" if script else "'none'"
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_src}"
    attrs = "".join(f' {key}="{_e(value)}"' for key, value in body_attrs.items())
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{_e(title)}</title>\n"
            f"<style>{_CSS}\n{_highlight_css()}</style>\n</head>\n<body{attrs} data-scripts=\"{1 if script else 0}\">\n"
            f"{body}\n" + (f"<script>{script}</script>\n" if script else "") + "</body>\n</html>\n")


def _header(archive: RunArchive, title: str, links: str) -> str:
    toy, note = scale_note(archive)
    badge = '<span class="badge toy">TOY SCALE</span>' if toy else '<span class="badge">paper scale</span>'
    scale = (f"{_e(archive.model_card or 'model unknown')}, "
             f"{_e(archive.total_steps if archive.total_steps is not None else 'unknown')} steps")
    return (f'<header class="top"><h1>{_e(title)}</h1><div>{badge}<span class="muted">run <strong>{_e(archive.run)}</strong> '
            f'({scale}); read from {_e(archive.run_dir.as_posix())}</span> {links}</div>'
            f'<div class="scale{" toy" if toy else ""}" data-scale="{"toy" if toy else "paper"}">{_e(note)}</div></header>')


def _fields_html(fields: list) -> str:
    rows = []
    for label, value in fields:
        multiline = label in ("first observation", "hint") or "\n" in value
        shown = f'<pre class="text">{_e(value)}</pre>' if multiline else _e(value)
        rows.append(f'<dt>{_e(label)}</dt><dd data-field="{_e(label)}">{shown}</dd>')
    return f'<dl class="fields">{"".join(rows)}</dl>'


def render_cards_html(archive: RunArchive, cards: list, observations: dict, browser_href: str,
                      figure_href: str | None) -> str:
    """The cards page: one card per third of training, linking each environment to the browser page."""
    sections = []
    for phase, lo, hi, env in cards:
        steps = steps_label(lo, hi)
        if env is None:
            sections.append(f'<section class="card empty" data-card="{phase}"><h2>{_e(phase)} ({_e(steps)})</h2>'
                            f'<p class="muted">{_e(empty_phase_text(lo, hi))}</p></section>')
            continue
        fields = card_fields(env, observations.get(env.anchor))
        sections.append(
            f'<section class="card" data-card="{phase}" data-env="{_e(env.env_id)}"><h2>{_e(phase)} ({_e(steps)})</h2>'
            f'<h3 class="class-name">{_e(env.data.get("class_name") or "(no class)")}</h3>{_fields_html(fields)}'
            f'<p><a href="{_e(browser_href)}#{_e(env.anchor)}">code, validation and per-step statistics</a></p>'
            "</section>")
    links = f'<a href="{_e(browser_href)}">every environment of the run</a>'
    if figure_href:
        links += f' · <a href="{_e(figure_href)}">the figure (PNG)</a>'
    intro = ("<p class=\"muted\">One environment per third of the run's training steps: the valid environment of "
             "that third with the highest designer reward (designer-written environments first). Lines of code and "
             "state variables are counted statically from the archived code; the first observation is replayed in "
             "the sandbox from the first recorded episode seed, because run archives do not keep it. "
             "\"not recorded\" marks what the run did not write down.</p>")
    body = (_header(archive, f"Environment cards: {archive.run}", links) + f"<main>{intro}"
            f'<div class="cards">{"".join(sections)}</div></main>')
    return _page(f"Environment cards: {archive.run}", {"data-page": "env-cards", "data-cards": str(len(cards))}, body)


def _report_rows(reports: list) -> str:
    rows = []
    for number, report in enumerate(reports, start=1):
        if not isinstance(report, dict):
            continue
        checks = ", ".join(map(str, report.get("checks") or [])) or "-"
        changes = ", ".join(map(str, report.get("changes") or [])) or "-"
        rows.append(f"<tr><td>{number}</td><td>{_e(report.get('revision', 0))}</td>"
                    f"<td>{'valid' if report.get('valid') else 'rejected'}</td>"
                    f"<td><code>{_e(report.get('reason', '?'))}</code></td><td class=\"msg\">{_e(report.get('message', ''))}"
                    f"</td><td>{_e(checks)}</td><td>{_e(changes)}</td><td>{_e(report.get('isolation', ''))}</td>"
                    f"<td>{_e(report.get('generated_tokens', ''))}</td></tr>")
    if not rows:
        return '<p class="muted">No validation report was archived for this slot.</p>'
    return ('<table class="data reports"><tr><th>attempt</th><th>revision</th><th>verdict</th><th>reason code</th>'
            "<th>message</th><th>checks passed</th><th>intake changes</th><th>isolation</th><th>tokens</th></tr>"
            + "".join(rows) + "</table>")


def _window_rows(archive: RunArchive, env: EnvRecord) -> str:
    end = env.window_end
    steps = [step for step in sorted(archive.metrics) if step >= env.step and (end is None or step < end)]
    cells = []
    for step in steps:
        rates = archive.metrics[step].get("env_win_rates")
        value = rates.get(env.env_id) if isinstance(rates, dict) else None
        shown = f"{value:.2f}" if _number(value) is not None else "-"
        cells.append(f"<tr><td>{step}</td><td>{shown}</td></tr>")
    if not cells:
        return '<p class="muted">No per-step record of this window in metrics.jsonl.</p>'
    return ('<table class="data per-step"><tr><th>step</th><th>win rate, no hint</th></tr>' + "".join(cells)
            + "</table>")


def _window_stats(env: EnvRecord) -> list:
    data = env.data
    end = env.window_end
    window = f"steps {env.step}-{end - 1}" if end is not None else f"from step {env.step} (end not recorded)"
    hinted, paired = _returns(env, "hint_returns"), _returns(env, "paired_returns")
    regen = data.get("regen_episodes")
    distinct = data.get("distinct_rewards") or []
    return [
        ("window", window),
        ("win rate, no hint", win_rate_without_hint(env)),
        ("mean return, no hint", mean_return_without_hint(env)),
        ("plays left out (environment failures)", str(data.get("dropped", "-"))),
        ("distinct rewards seen", ", ".join(f"{v:g}" for v in distinct if _number(v) is not None) or "-"),
        ("regeneration step, no hint (paired seeds)",
         f"mean {sum(paired) / len(paired):.3f} over {len(paired)} plays" if paired else "-"),
        ("regeneration step, with hint", f"mean {sum(hinted) / len(hinted):.3f} over {len(hinted)} plays"
         if hinted else "-"),
        ("win rate, with hint", win_rate_with_hint(env)),
        ("plays with return > 0 at regeneration", f"{data.get('regen_positive', '-')}/{regen}" if regen else "-"),
        ("regret", regret_text(env)),
        ("designer reward", designer_reward_text(env)),
    ]


def _stats_table(rows: list) -> str:
    return ('<table class="data stats">' + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
            + "</table>")


def _code_block(code: str, label: str, open_: bool = False) -> str:
    return (f'<details class="code"{" open" if open_ else ""}><summary>{_e(label)}</summary>'
            f'<div class="codebox">{highlight_python(code)}</div></details>')


def _env_article(archive: RunArchive, env: EnvRecord, observations: dict, rejected_here: list) -> str:
    data = env.data
    status = "valid" if env.valid else "empty"
    code = data.get("code") or ""
    lines, variables = code_stats(env)
    observation = observations.get(env.anchor) if env.valid else None
    fields = [
        ("environment id", env.env_id),
        ("skill", str(data.get("skill") or NOT_RECORDED)),
        ("source", env.source),
        ("kind", str(data.get("kind") or "-")),
        ("design attempts", str(data.get("attempts", "-"))),
        ("lines of code", lines),
        ("state variables", variables),
        ("corpus document", corpus_text(env)),
        ("constructor arguments", json.dumps(data.get("env_kwargs") or {}, sort_keys=True)),
        ("first observation", observation_text(observation) if env.valid else "no valid environment in this slot"),
        ("hint", str(data.get("hint") or "none written")),
    ]
    kept = "".join(f'<li><a href="#{_e(r.anchor)}">attempt {r.attempt}: {_e(r.report.get("reason", "?"))}</a></li>'
                   for r in rejected_here)
    kept_html = f"<p>Rejected candidates kept for this slot:</p><ul>{kept}</ul>" if kept else ""
    title = data.get("class_name") or "(no valid environment)"
    return (f'<article class="env {status}" id="{_e(env.anchor)}" data-status="{status}" '
            f'data-has-code="{1 if code else 0}" data-env="{_e(env.env_id)}">'
            f'<h3 class="class-name">{_e(title)} <span class="badge {status}">{status}</span></h3>'
            f"{_fields_html(fields)}<h4>Window statistics</h4>{_stats_table(_window_stats(env))}"
            f"<details><summary>per-step win rate (metrics.jsonl)</summary>{_window_rows(archive, env)}</details>"
            f"<h4>Validation reports</h4>{_report_rows(data.get('reports') or [])}{kept_html}"
            + (_code_block(code, f"code ({lines} lines of code)") if code else "") + "</article>")


def _rejected_article(rejection: Rejection) -> str:
    report = rejection.report
    where = (f'slot <a href="#{_e(rejection.slot.anchor)}">{_e(rejection.slot.env_id)}</a> (set of step '
             f"{rejection.slot.step}), attempt {rejection.attempt}" if rejection.slot else
             "slot and step " + NOT_RECORDED + " (no archived slot has this report)")
    rows = [("reason code", str(report.get("reason", "?"))), ("message", str(report.get("message", ""))),
            ("checks passed", ", ".join(map(str, report.get("checks") or [])) or "-"),
            ("intake changes", ", ".join(map(str, report.get("changes") or [])) or "-"),
            ("isolation", str(report.get("isolation", "-"))), ("kept in", rejection.folder.as_posix())]
    if rejection.slot is not None:
        rows.insert(0, ("skill", str(rejection.slot.data.get("skill") or NOT_RECORDED)))
    code = (_code_block(rejection.code, "sanitised code (code.py)", open_=True) if rejection.code else
            '<p class="muted">No sanitised code was kept (intake found no code to validate).</p>')
    return (f'<article class="env rejected" id="{_e(rejection.anchor)}" data-status="rejected" '
            f'data-has-code="{1 if rejection.code else 0}">'
            f'<h3 class="class-name">{_e(report.get("class_name") or "(no class found)")} '
            f'<span class="badge rejected">rejected: {_e(report.get("reason", "?"))}</span></h3>'
            f"<p>{where}</p>{_stats_table(rows)}{code}"
            f'<details><summary>raw designer output (raw.txt)</summary><pre class="text">{_e(rejection.raw)}</pre>'
            "</details></article>")


_FILTER_SCRIPT = """(function () {
  var box = document.getElementById("filter"), status = document.getElementById("status");
  var shown = document.getElementById("shown");
  function apply() {
    var q = box.value.toLowerCase(), s = status.value, n = 0;
    document.querySelectorAll("article.env").forEach(function (a) {
      var ok = (!s || a.dataset.status === s) && (!q || a.textContent.toLowerCase().indexOf(q) >= 0);
      a.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = String(n);
  }
  box.addEventListener("input", apply);
  status.addEventListener("change", apply);
  apply();
}());"""


def render_browser_html(archive: RunArchive, observations: dict, cards_href: str) -> str:
    """The browser page: every slot of every set, then every rejected candidate."""
    by_slot: dict = {}
    for rejection in archive.rejected:
        if rejection.slot is not None:
            by_slot.setdefault(rejection.slot.anchor, []).append(rejection)
    overview, blocks = [], []
    for step, path, envs in archive.sets:
        valid = sum(env.valid for env in envs)
        rates = [env.data["wins"] / env.data["episodes"] for env in envs
                 if isinstance(env.data.get("episodes"), int) and env.data["episodes"] > 0
                 and isinstance(env.data.get("wins"), int)]
        mean = f"{sum(rates) / len(rates):.2f}" if rates else "-"
        designed = sum(env.designer_written for env in envs)
        overview.append(f'<tr><td><a href="#set-{step:05d}">{step}</a></td><td>{valid}/{len(envs)}</td>'
                        f"<td>{designed}</td><td>{mean}</td><td>{_e(path.name)}</td></tr>")
        articles = "".join(_env_article(archive, env, observations, by_slot.get(env.anchor, [])) for env in envs)
        blocks.append(f'<section class="set" id="set-{step:05d}"><h2>Environment set of step {step}</h2>'
                      f'<p class="muted">{valid} of {len(envs)} slots valid; {designed} designer-written; '
                      f"archive {_e(path.name)}</p>{articles}</section>")
    rejected = "".join(_rejected_article(r) for r in archive.rejected)
    rejected_block = (f'<section id="rejected"><h2>Rejected candidates ({len(archive.rejected)})</h2>'
                      + (rejected or '<p class="muted">The run kept no rejected candidate (rejected/ is empty or '
                                     "absent).</p>") + "</section>")
    slots = len(archive.envs)
    controls = ('<div class="controls"><label>filter <input id="filter" type="search" '
                'placeholder="class name, skill, reason code, text in the code"></label> '
                '<label>status <select id="status"><option value="">all</option><option value="valid">valid</option>'
                '<option value="empty">empty slot</option><option value="rejected">rejected</option></select></label> '
                f'<span class="muted"><span id="shown">{slots + len(archive.rejected)}</span> shown</span></div>')
    table = ('<table class="data overview"><tr><th>set step</th><th>valid / slots</th><th>designer-written</th>'
             "<th>mean win rate (no hint)</th><th>archive</th></tr>" + "".join(overview) + "</table>")
    links = f'<a href="{_e(cards_href)}">environment cards</a> · <a href="#rejected">rejected candidates</a>'
    body = (_header(archive, f"Environments of run {archive.run}", links) + f"<main>{controls}{table}"
            + "".join(blocks) + rejected_block + "</main>")
    attrs = {"data-page": "env-browser", "data-environments": str(slots), "data-rejected": str(len(archive.rejected))}
    return _page(f"Environments of run {archive.run}", attrs, body, _FILTER_SCRIPT)


# ----- the command -----------------------------------------------------------------------------------------
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
            "environments": len(archive.envs), "rejected": len(archive.rejected)}


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
    scale = "toy scale" if done["toy"] else "paper scale"
    print(f"{args.run_dir}: {done['environments']} environment slots, {done['rejected']} rejected candidates "
          f"({scale})")
    for path in [*done["figure"], done["cards_html"], done["browser_html"]]:
        print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(run_script(main))
