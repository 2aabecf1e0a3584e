"""What the scripts of the paper's quoted numbers share (``paper/scripts/num_<group>.py``, one per group).

Each script computes its group's numbers and holds their exact definitions; this module holds only what several
of them share:

* the run mapping ``paper/number_runs.yaml`` (its header documents every key; :func:`load_number_runs` validates
  it), the groups' names (:data:`GROUPS`), the reported CSV each reads (:data:`GROUP_REPORTED`) and which run files
  each reads (:func:`group_runs`, :func:`group_step_rules`, :func:`run_fingerprint`): rules/paper_common.smk uses
  them when it parses the workflow;
* one number (:class:`Number`: ours, the paper's, the mark and reason of a missing one), macro names and formatting;
* the paper's values (:func:`reported_cell`, :func:`quoted_value`);
* the benchmark averages of Tables 1, 2 and 6 (:func:`benchmark_average`, reused from spade.paper.tables, never
  re-implemented) and numbers derived from others (:func:`derived`); the run folder of an archive number
  (:func:`run_or_missing`);
* writing ``<out>.tex`` (:func:`write_numbers`): a comment block (which script and rule wrote it, from which runs,
  and the group's definitions), then per number two macros, ``\\Num<Name>`` (ours) and ``\\Num<Name>Reported``
  (the paper's), and a provenance sidecar ``<out>.provenance.json`` (:func:`spade.paper.report.provenance_record`:
  the files read with their SHA-256, each run's config hash, git commit and seed, and per number its value, the
  text shown, the reported value and where each came from); the command line of every script
  (:func:`number_main`).

A number whose run is not mapped or has no folder prints ``\\textit{not run}``; one whose run exists but lacks
the data prints ``\\textit{no data}``. Both are listed under ``missing`` in the sidecar with the reason. A number
is never taken from elsewhere.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spade.paper import table_runs
from spade.paper.benchmark_tables import BenchmarkTable, ours_row
from spade.paper.report import (
    NOT_RUN,
    ReportInputError,
    latex_escape,
    provenance_record,
    read_yaml,
    sidecar_path,
    write_json_atomic,
    write_text_atomic,
)
from spade.paper.scale import PAPER_30B, banner, off_scale
from spade.paper.table_runs import (
    COLUMN_METRICS,
    ResultIndex,
    check_keys,
    load_results,
    mapping_error,
    mapping_int,
    mapping_runs,
    mapping_step_rule,
    run_provenance,
    vendi_settings,
)
from spade.paper.tables import NO_DATA, read_reported, reported_number, shown_path

PERCENT = 100.0
PCT = r"\,\%"  # the unit printed after a percentage
QUOTED_CSV = "quoted_numbers.csv"  # numbers that appear only in the paper's text
REPORTED_NONE = "---"  # the paper gives no value for this number


# ----- the run mapping (paper/number_runs.yaml) ---------------------------------------------------------------
GROUPS = ("games_gain", "tool_use_gain", "designer_reward", "learnable_share", "vendi_per_n", "formula_reveal",
          "reward_levels", "valid_env_rate")
_TOP_KEYS = ("default_step", "phases", "numbers")
_SECTION_KEYS = {
    "games_gain": ("backbones",),
    "tool_use_gain": ("backbones",),
    "designer_reward": ("hint_regret", "learning_potential"),
    "learnable_share": ("run", "phases"),
    "vendi_per_n": ("corpus", "no_corpus", "field", "vendi"),
    "formula_reveal": ("run", "phases", "physics_min_terms"),
    "reward_levels": ("run", "phases"),
    "valid_env_rate": ("run", "confidence"),
}
_BACKBONE_ROLES = {"games_gain": ("base", "spade", "fixed_env_grpo", "fixed_env_rlve"),
                   "tool_use_gain": ("base", "spade")}
_ROLE_KEYS = ("run", "step")
_PHASE_NAME = re.compile(r"^[a-z]+$")


def _roles(path, key: str, value, default_step) -> dict:
    """A run role: a run name, a list of replicate run names, null, or {run: ..., step: ...}."""
    if isinstance(value, dict):
        check_keys(path, key, value, _ROLE_KEYS)
        if "run" not in value:
            raise mapping_error(path, f"{key}.run", "is missing (write `run: null` for a role we have no run for)")
        step = mapping_step_rule(path, f"{key}.step", value.get("step", default_step))
        return {"runs": mapping_runs(path, f"{key}.run", value["run"]), "step": step}
    return {"runs": mapping_runs(path, key, value), "step": default_step}


def _one_run(path, key: str, value) -> str | None:
    runs = mapping_runs(path, key, value)
    if len(runs) > 1:
        raise mapping_error(path, key, f"must name one run (or null), got {runs!r}")
    return runs[0] if runs else None


def _phases(path, key: str, value) -> dict[str, tuple[int, int]]:
    if not isinstance(value, dict) or not value:
        raise mapping_error(path, key, "must map phase names (early, mid, late) to [first step, last step], got "
                                          f"{value!r}")
    parsed = {}
    for name, bounds in value.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not _PHASE_NAME.match(name):
            raise mapping_error(path, where,
                                   "a phase name must be lower-case letters (it becomes part of a macro name)")
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise mapping_error(path, where, f"must be [first step, last step], got {bounds!r}")
        first, last = (mapping_int(path, where, b, 0) for b in bounds)
        if first > last:
            raise mapping_error(path, where, f"first step {first} is after last step {last}")
        parsed[name] = (first, last)
    return parsed


def _section(path, name: str, section, default_step, phases) -> dict:
    key = f"numbers.{name}"
    if not isinstance(section, dict):
        raise mapping_error(path, key, f"must be a mapping, got {section!r}")
    check_keys(path, key, section, _SECTION_KEYS[name])
    if name in _BACKBONE_ROLES:
        backbones = section.get("backbones")
        if not isinstance(backbones, dict) or not backbones:
            raise mapping_error(path, f"{key}.backbones",
                                   f"must map backbone names (4B, 8B, 30B) to roles, got {backbones!r}")
        parsed = {}
        for size, entry in backbones.items():
            where = f"{key}.backbones.{size}"
            word = macro_word(str(size))
            if not isinstance(entry, dict):
                raise mapping_error(path, where, f"must be a mapping, got {entry!r}")
            allowed = ("reported",) + _BACKBONE_ROLES[name]
            check_keys(path, where, entry, allowed)
            missing = [k for k in allowed if k not in entry]
            if missing:
                raise mapping_error(path, f"{where}.{missing[0]}",
                                       "is missing (write null for a role we have no run for)")
            if not isinstance(entry["reported"], str) or not entry["reported"].strip():
                raise mapping_error(path, f"{where}.reported",
                                       f"must be the backbone as the reported CSV names it, got {entry['reported']!r}")
            roles = {role: _roles(path, f"{where}.{role}", entry[role], "base" if role == "base" else default_step)
                     for role in _BACKBONE_ROLES[name]}
            parsed[str(size)] = {"word": word, "reported": entry["reported"], "roles": roles}
        return {"backbones": parsed}
    if name == "designer_reward":
        for role in _SECTION_KEYS[name]:
            if role not in section:
                raise mapping_error(path, f"{key}.{role}", "is missing (write null for a role we have no run for)")
        return {role: _roles(path, f"{key}.{role}", section[role], default_step) for role in _SECTION_KEYS[name]}
    if name == "vendi_per_n":
        vendi = vendi_settings(path, key, section)
        text_field = section.get("field", "code")
        if not isinstance(text_field, str) or not text_field:
            raise mapping_error(path, f"{key}.field", f"must be an archive field name, got {text_field!r}")
        for role in ("corpus", "no_corpus"):
            if role not in section:
                raise mapping_error(path, f"{key}.{role}", "is missing (write null for a role we have no run for)")
        return {"corpus": _one_run(path, f"{key}.corpus", section["corpus"]),
                "no_corpus": _one_run(path, f"{key}.no_corpus", section["no_corpus"]),
                "field": text_field, "vendi": vendi}
    if "run" not in section:
        raise mapping_error(path, f"{key}.run", "is missing (write `run: null` if we have no run for it)")
    out = {"run": _one_run(path, f"{key}.run", section["run"])}
    if name != "valid_env_rate":
        out["phases"] = _phases(path, f"{key}.phases", section["phases"]) if "phases" in section else phases
        if out["phases"] is None:
            raise mapping_error(path, f"{key}.phases", "is missing and the mapping has no top-level 'phases'")
    if name == "reward_levels" and not {"early", "late"} <= set(out["phases"]):
        raise mapping_error(path, f"{key}.phases",
                               f"must name the phases early and late, got {', '.join(out['phases'])}")
    if name == "formula_reveal":
        out["physics_min_terms"] = mapping_int(path, f"{key}.physics_min_terms",
                                                  section.get("physics_min_terms", 2), 1)
    if name == "valid_env_rate":
        confidence = section.get("confidence", 0.95)
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
            raise mapping_error(path, f"{key}.confidence", f"must be a number in (0, 1), got {confidence!r}")
        out["confidence"] = float(confidence)
    return out


def load_number_runs(path: str | Path) -> dict:
    """The validated run mapping of the quoted numbers (``paper/number_runs.yaml``; keys documented there).

    Returns ``{"path", "default_step", "phases", "numbers": {group: section}}``. A missing file, bad YAML, an
    unknown key or a bad value raises :class:`ReportInputError` naming the file, the key and the allowed keys.
    """
    path = Path(path)
    data = read_yaml(path, "number run mapping")
    if not isinstance(data, dict):
        raise ReportInputError(f"{path} must hold a mapping at the top level")
    check_keys(path, "", data, _TOP_KEYS)
    default_step = mapping_step_rule(path, "default_step", data.get("default_step", "selected"))
    phases = _phases(path, "phases", data["phases"]) if "phases" in data else None
    numbers = data.get("numbers") or {}
    if not isinstance(numbers, dict):
        raise mapping_error(path, "numbers", f"must be a mapping of number group -> section, got {numbers!r}")
    check_keys(path, "numbers", numbers, GROUPS)
    parsed = {name: _section(path, name, section, default_step, phases) for name, section in numbers.items()}
    return {"path": str(path), "default_step": default_step, "phases": phases, "numbers": parsed}


def number_section(mapping: dict, group: str) -> dict:
    section = mapping["numbers"].get(group)
    if section is None:
        raise ReportInputError(f"{mapping['path']}: key 'numbers.{group}' is missing (allowed groups: "
                               f"{', '.join(GROUPS)})")
    return section


def group_runs(mapping: dict, group: str) -> list[str]:
    """Every run name the mapping gives for ``group`` (sorted; [] when the group has no section)."""
    section = mapping["numbers"].get(group)
    if section is None:
        return []
    runs: set[str] = set()
    if "backbones" in section:
        runs |= {r for entry in section["backbones"].values() for role in entry["roles"].values() for r in role["runs"]}
    elif group == "designer_reward":
        runs |= {r for role in section.values() for r in role["runs"]}
    elif group == "vendi_per_n":
        runs |= {r for r in (section["corpus"], section["no_corpus"]) if r}
    elif section.get("run"):
        runs.add(section["run"])
    return sorted(runs)


def group_step_rules(mapping: dict, group: str) -> set:
    """The step rules the group uses for its runs (rules/paper_numbers.smk declares selected_checkpoint.json)."""
    section = mapping["numbers"].get(group) or {}
    if "backbones" in section:
        return {role["step"] for entry in section["backbones"].values() for role in entry["roles"].values()}
    if group == "designer_reward":
        return {role["step"] for role in section.values()}
    return set()


# which run files each group reads: the patterns of the table whose machinery it reuses
GROUP_TABLE = {"games_gain": "table1", "tool_use_gain": "table2", "designer_reward": "table6",
               "learnable_share": "table7", "vendi_per_n": "table8", "formula_reveal": "table8",
               "reward_levels": "table8", "valid_env_rate": "table8"}
GROUP_REPORTED = {"games_gain": "table1_games.csv", "tool_use_gain": "table2_tool_use.csv",
                  "designer_reward": "table6_ablations_full.csv", "learnable_share": "table7_env_quality.csv",
                  "vendi_per_n": "table8_diversity.csv", "formula_reveal": QUOTED_CSV, "reward_levels": QUOTED_CSV,
                  "valid_env_rate": QUOTED_CSV}
EVAL_GROUPS = ("games_gain", "tool_use_gain", "designer_reward")


def run_fingerprint(runs_root: str | Path, runs: Sequence[str], group: str) -> str:
    """:func:`spade.paper.table_runs.run_fingerprint` over the files this group reads (a Snakemake parameter)."""
    return table_runs.run_fingerprint(runs_root, runs, GROUP_TABLE[group])


# ----- macro names and formatting -------------------------------------------------------------------------------
_ONES = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten", "Eleven", "Twelve",
         "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen")
_TENS = ("", "", "Twenty", "Thirty", "Forty", "Fifty", "Sixty", "Seventy", "Eighty", "Ninety")


def _number_word(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (_ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + "Hundred" + (_number_word(n % 100) if n % 100 else "")
    raise ValueError(f"{n} is too large for a macro name")


def macro_word(text: str) -> str:
    """A macro-name part (letters only) of a label: digit runs become English words, ``.``/``-``/``_``/blanks
    separate capitalised words: ``30B`` -> ``ThirtyB``, ``early`` -> ``Early``."""
    parts = re.findall(r"\d+|[A-Za-z]+", text)
    if not parts or "".join(parts) != re.sub(r"[\s._-]", "", text):
        raise ReportInputError(f"label {text!r} cannot become part of a LaTeX macro name (letters and digits only)")
    return "".join(_number_word(int(p)) if p.isdigit() else p[:1].upper() + p[1:] for p in parts)


def format_value(value: float, decimals: int, signed: bool = False) -> str:
    """LaTeX text of a number: ``decimals`` places, a typeset minus sign, ``+`` before gains when ``signed``."""
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    if float(text) == 0:
        text = text.replace("-", "+" if signed else "")
    return "$-$" + text[1:] if text.startswith("-") else text


@dataclass
class Number:
    """One quoted number: ours (``value``, or None with a ``mark`` and the ``reason``) and the paper's."""

    macro: str  # without the backslash, letters only
    what: str  # what is measured, in words
    value: float | None
    decimals: int
    reported: float | None
    reported_source: str
    signed: bool = False
    scale: float = 1.0  # shown = value * scale (fractions shown as percent)
    unit: str = ""  # LaTeX after a shown number (not after a mark), e.g. r"\,\%"
    mark: str = ""
    reason: str = ""
    detail: dict = field(default_factory=dict)
    off: list = field(default_factory=list)  # spade.paper.scale.RunScale of the runs behind it not at the paper's scale

    def shown(self) -> str:
        if self.value is None:
            return r"\textit{" + (self.mark or NOT_RUN) + "}"
        toy = r"\textsuperscript{toy}" if self.off else ""
        return format_value(self.value * self.scale, self.decimals, self.signed) + self.unit + toy

    def shown_reported(self) -> str:
        if self.reported is None:
            return REPORTED_NONE
        return format_value(self.reported, self.decimals, self.signed) + self.unit


@dataclass
class NumberContext:
    """What a group's computation needs and collects: the mapping, folders, files read and runs used."""

    mapping: dict
    runs_root: Path
    reported_dir: Path
    inputs: list = field(default_factory=list)
    runs: set = field(default_factory=set)

    def run_dir(self, run: str | None) -> Path | None:
        if not run:
            return None
        folder = Path(self.runs_root) / run
        return folder if folder.is_dir() else None

    def absent(self, runs: Sequence[str]) -> str:
        """Why ``runs`` give no number when one of them is not there ('' when all folders exist)."""
        if not runs:
            return "no run mapped"
        gone = [r for r in runs if self.run_dir(r) is None]
        return f"run {', '.join(gone)} not run (no folder under {shown_path(self.runs_root)})" if gone else ""


def mark_missing(number: Number, mark: str, reason: str) -> Number:
    """``number`` without a value of ours: ``mark`` (not run, no data) is printed, ``reason`` goes to the sidecar."""
    number.value, number.mark, number.reason = None, mark, reason
    return number


# ----- reported values -----------------------------------------------------------------------------------------
def reported_cell(reported_dir: Path, stem: str, key: dict, column: str) -> tuple[float | None, str]:
    """The number in the reported CSV ``stem`` at the row matching ``key`` (column -> text) and ``column``."""
    path = Path(reported_dir) / stem
    rows = read_reported(path, [*key, column])
    for line, row in enumerate(rows, start=2):
        if all(row[k] == v for k, v in key.items()):
            return reported_number(path, line, column, row[column]), f"{stem}, line {line}, column {column}"
    shown = ", ".join(f"{k}={v}" for k, v in key.items())
    raise ReportInputError(f"{path}: no row with {shown} (check the run mapping's 'reported' names)")


def quoted_value(reported_dir: Path, key: str) -> tuple[float | None, str]:
    """A number of ``quoted_numbers.csv`` (columns key, value, unit, where)."""
    return reported_cell(reported_dir, QUOTED_CSV, {"key": key}, "value")


def difference(a: float | None, b: float | None) -> float | None:
    """``a - b``, or None when either is missing."""
    return None if a is None or b is None else a - b


# ----- benchmark averages (Tables 1, 2, 6) -----------------------------------------------------------------
def load_eval_results(ctx: NumberContext, runs: Sequence[str]) -> ResultIndex:
    """Evaluation results of ``runs`` (tidy) as a :class:`spade.paper.table_runs.ResultIndex`; files recorded."""
    tidy, files = load_results(runs_root=ctx.runs_root, runs=[r for r in runs if r])
    ctx.inputs += files
    for run in runs:
        selected = Path(ctx.runs_root) / run / "selected_checkpoint.json"
        if selected.is_file():
            ctx.inputs.append(selected)
    return ResultIndex(tidy)


def benchmark_average(ctx: NumberContext, spec: BenchmarkTable, role: dict, results: ResultIndex,
                      number: Number, backbone: str = PAPER_30B) -> Number:
    """``number`` filled with the table's "avg" of the runs of ``role`` at the step its rule picks (the Table 1,
    2 or 6 cell, via :func:`spade.paper.benchmark_tables.ours_row`), marked when a run is not at ``backbone``'s
    scale."""
    ctx.runs.update(role["runs"])
    number.off = off_scale(ctx.runs_root, [r for r in role["runs"] if ctx.run_dir(r)], backbone,
                           model_only=role["step"] == "base")  # a base-model number: only the model must match
    row = ours_row(spec, {"runs": role["runs"], "step": role["step"]}, results, ctx.runs_root, COLUMN_METRICS)
    number.detail = {"runs": role["runs"], "step_rule": role["step"],
                     "steps": [c.step for c in row["choices"]], "table": spec.name, "backbone": backbone}
    value = row["values"]["avg"]
    if value is None:
        gone = ctx.absent(role["runs"])
        return mark_missing(number, NOT_RUN if gone else NO_DATA, gone or "; ".join(row["missing"]) or "no average")
    number.value = value
    number.detail["cells"] = {k: v for k, v in row["cells"].items()}
    return number


def derived(number: Number, value: float | None, parts: Sequence[Number]) -> Number:
    """``number`` = ``value`` computed from ``parts``; when a part is missing, the worst mark of the parts."""
    number.detail = {"from": [p.macro for p in parts]}
    number.off = list(dict.fromkeys(s for p in parts for s in p.off))
    if value is not None:
        number.value = value
        return number
    marks = [p.mark for p in parts if p.value is None]
    reasons = [f"{p.macro}: {p.reason}" for p in parts if p.value is None]
    return mark_missing(number, NOT_RUN if NOT_RUN in marks else NO_DATA, "; ".join(reasons))


# ----- environment archives (Tables 7, 8; figures 8, 16) ---------------------------------------------------
def run_or_missing(ctx: NumberContext, run: str | None, numbers: list[Number]) -> Path | None:
    """The run folder of an archive number, or None after marking every number "not run"; the numbers of a run off
    the paper's 30B scale are marked toy."""
    if run:
        ctx.runs.add(run)
    folder = ctx.run_dir(run)
    if folder is None:
        for number in numbers:
            mark_missing(number, NOT_RUN, ctx.absent([run] if run else []))
    else:  # the archive numbers quote the paper's 30B games run
        for number in numbers:
            number.off = off_scale(ctx.runs_root, [run], PAPER_30B)
    return folder


# ----- writing -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Group:
    """A group of quoted numbers, as its script defines it: the name (one of :data:`GROUPS`), the title, the
    computation ``compute(ctx, **kwargs) -> [Number]`` and the definitions printed in the macro file."""

    name: str
    title: str
    compute: Callable
    definitions: tuple


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii")


def render_macros(group: Group, numbers: Sequence[Number], script: str, mapping_path: str,
                  runs: dict[str, str]) -> str:
    """The macro file: a comment block (writer, rule, runs, definitions), then ``\\newcommand`` per macro."""
    seen = set()
    for number in numbers:
        if not re.fullmatch(r"[A-Za-z]+", number.macro) or number.macro in seen:
            raise ReportInputError(f"bad or repeated macro name {number.macro!r} in group {group.name}")
        seen.add(number.macro)
    run_text = "; ".join(f"{run} ({state})" for run, state in sorted(runs.items())) or "none mapped"
    lines = [f"% Quoted numbers '{group.name}': {group.title}.",
             (f"% Written by {script} (Snakemake rule paper_number_{group.name}) through spade.paper.numbers; do "
              "not edit."), f"% Run mapping: {mapping_path}. Runs: {run_text}.", "% Definitions:"]
    lines += [f"%   {_ascii(d)}" for d in group.definitions]
    lines += ["% \\<Name> is our value (\\textit{not run}: no run; \\textit{no data}: the run lacks the data);",
              (f"% \\<Name>Reported is the paper's value ({REPORTED_NONE} where the paper gives none). Sidecar: "
               "<this file>.provenance.json."), ""]
    off = list(dict.fromkeys(s for n in numbers if n.value is not None for s in n.off))
    backbones = [n.detail.get("backbone", PAPER_30B) for n in numbers if n.value is not None and n.off]
    text = latex_escape(banner(off, backbones))
    lines.append(f"% \\{scale_macro(group)}: the toy-scale banner of the paragraph quoting these numbers "
                 "(empty when every value of ours comes from a run at the paper's scale; toy values also carry "
                 "a superscript 'toy').")
    lines.append(f"\\newcommand{{\\{scale_macro(group)}}}{{" + (
        r"\par\noindent\fbox{\parbox{\dimexpr\linewidth-2\fboxsep-2\fboxrule}{\textbf{" + text + r"}}}\par "
        if text else "") + "}  % toy-scale banner")
    for number in numbers:
        note = f"ours: {number.what}" + (f" [{number.mark}: {number.reason}]" if number.value is None else "")
        lines.append(f"\\newcommand{{\\{number.macro}}}{{{number.shown()}}}  % {_ascii(note)}")
        lines.append(f"\\newcommand{{\\{number.macro}Reported}}{{{number.shown_reported()}}}  % reported: "
                     f"{_ascii(number.reported_source)}")
    return "\n".join(lines) + "\n"


def scale_macro(group: Group) -> str:
    """``Num<Group>Scale``, e.g. NumGamesGainScale: the group's toy-scale banner macro."""
    return "Num" + "".join(part.capitalize() for part in group.name.split("_")) + "Scale"


def _plain(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def write_numbers(group: Group, numbers: Sequence[Number], ctx: NumberContext, out: Path, script: str,
                  mapping_path: Path) -> list[Path]:
    """Write the macro file ``out`` and its sidecar ``<out>.provenance.json``, each atomically."""
    out = Path(out)
    if out.suffix != ".tex":
        raise ReportInputError(f"--out must name the macro file (.tex), got {out}")
    states = {run: ("present" if ctx.run_dir(run) else "not run") for run in ctx.runs}
    # the macro file prints paths relative to the repository root (the sidecar keeps them whole)
    write_text_atomic(out, render_macros(group, numbers, shown_path(script), shown_path(mapping_path), states))
    records = [{"macro": n.macro, "what": n.what, "value": _plain(n.value), "shown": n.shown(),
                "toy_scale": [s.label() for s in n.off],
                "scale": n.scale, "reported": n.reported, "reported_shown": n.shown_reported(),
                "reported_source": n.reported_source, "detail": n.detail} for n in numbers]
    missing = [{"macro": n.macro, "mark": n.mark, "reason": n.reason} for n in numbers if n.value is None]
    runs = {run: run_provenance(ctx.run_dir(run)) for run in sorted(ctx.runs) if ctx.run_dir(run)}
    summaries = [ctx.run_dir(run) / "summary.json" for run in ctx.runs if ctx.run_dir(run)]
    inputs = [Path(p) for p in [*ctx.inputs, *summaries] if Path(p).is_file()]
    record = provenance_record(script, inputs, [out], group=group.name, mapping=str(mapping_path), runs=runs,
                               numbers=records, missing=missing)
    write_json_atomic(sidecar_path(out), record)
    return [out, sidecar_path(out)]


def build_group(group: Group, mapping_path: str | Path, runs_root: str | Path, reported_dir: str | Path,
                **kwargs) -> tuple[Group, list[Number], NumberContext]:
    """Compute the numbers of one group (``kwargs`` go to its computation, e.g. ``embedders`` for Vendi/n)."""
    if group.name not in GROUPS:
        raise ReportInputError(f"unknown number group {group.name!r} (known: {', '.join(GROUPS)})")
    mapping = load_number_runs(mapping_path)
    ctx = NumberContext(mapping, Path(runs_root), Path(reported_dir))
    reported = Path(reported_dir) / GROUP_REPORTED[group.name]
    ctx.inputs += [Path(mapping_path), reported]
    numbers = group.compute(ctx, **kwargs)
    return group, numbers, ctx


def number_main(group: Group, script: str, argv=None, **kwargs) -> None:
    """The command line of every ``paper/scripts/num_<group>.py``: computes ``group`` and writes its files."""
    parser = argparse.ArgumentParser(description=f"Quoted numbers: {group.title}")
    parser.add_argument("--mapping", type=Path, required=True, help="run mapping (paper/number_runs.yaml)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder of the run folders (results/runs)")
    parser.add_argument("--reported-dir", type=Path, required=True, help="the paper's values (paper/reported)")
    parser.add_argument("--out", type=Path, required=True, help="macro file to write (.tex; sidecar beside)")
    args = parser.parse_args(argv)
    group, numbers, ctx = build_group(group, args.mapping, args.runs_root, args.reported_dir, **kwargs)
    outputs = write_numbers(group, numbers, ctx, args.out, script, args.mapping)
    for number in numbers:
        print(f"\\{number.macro} = {number.shown()} (reported {number.shown_reported()})"
              + (f"  [{number.reason}]" if number.value is None else ""))
    print(f"wrote {', '.join(map(str, outputs))}")
